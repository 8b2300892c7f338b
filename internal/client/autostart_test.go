package client

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/version"
)

// resetFirst accepts on ln; the first n connections read the request and
// are reset (as by a server coming up or going down), the rest are served
// by h. It returns how many connections were reset.
func resetFirst(t *testing.T, ln net.Listener, n int32, h http.Handler) *atomic.Int32 {
	t.Helper()
	var reset atomic.Int32
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	conns := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			if reset.Load() < n {
				reset.Add(1)
				_, _ = bufio.NewReader(c).ReadString('\n')
				_ = c.(*net.TCPConn).SetLinger(0)
				_ = c.Close()
				continue
			}
			conns <- c
		}
	}()
	go func() { _ = srv.Serve(&chanListener{conns: conns, addr: ln.Addr()}) }()
	t.Cleanup(func() { _ = ln.Close(); _ = srv.Close() })
	return &reset
}

type chanListener struct {
	conns chan net.Conn
	addr  net.Addr
}

func (l *chanListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l *chanListener) Close() error   { return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

// TestAutoStartRetriesAReset: a local server that resets the first calls
// (it is still starting) is waited for, as a refused one is, and the call
// goes through instead of failing on "connection reset by peer".
func TestAutoStartRetriesAReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", version.ServerHeader())
		if r.URL.Path == "/api/health" {
			_, _ = w.Write([]byte(`{"status":"healthy"}`))
			return
		}
		w.Header().Set(api.HeaderRequestID, "req-1")
	})
	reset := resetFirst(t, ln, 2, mux)
	t.Setenv(EnvEndpoint, "")
	t.Setenv(api.EnvPort, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	c, err := New(Options{Home: t.TempDir(), AutoStart: true, StartCommand: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Local {
		t.Fatalf("client of %s is not local", c.Endpoint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := Submit(ctx, c, apiop.Status, api.ClustersBody{})
	if err != nil || id != "req-1" {
		t.Fatalf("submit through resets: id %q, %v", id, err)
	}
	if got := reset.Load(); got != 2 {
		t.Errorf("%d connections were reset, want the 2 the server dropped", got)
	}
	// A remote server's reset is its own business: no retry, a clear error.
	rc, err := New(Options{Endpoint: c.Endpoint, Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	reset.Store(-1)
	if _, err := Submit(ctx, rc, apiop.Status, api.ClustersBody{}); err == nil || !strings.Contains(err.Error(), "reset") {
		t.Errorf("remote reset: %v, want the reset reported", err)
	}
}
