package lb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// controlServer answers the controller on the unix socket.
type controlServer struct {
	b        *Balancer
	listen   string
	shutdown chan struct{} // closed by POST /shutdown
	once     sync.Once
}

func (c *controlServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /replicas", func(w http.ResponseWriter, r *http.Request) {
		var rs ReplicaSet
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&rs); err != nil {
			http.Error(w, "bad replica set: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.b.SetReplicas(rs); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		st := c.b.State()
		st.PID = os.Getpid()
		st.Listen = c.listen
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /shutdown", func(w http.ResponseWriter, r *http.Request) {
		c.once.Do(func() { close(c.shutdown) })
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// listenControl takes the control socket: a stale socket file (its load
// balancer is gone) is replaced, a live one is left alone.
func listenControl(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
			conn.Close()
			return nil, fmt.Errorf("control socket %s is in use by another load balancer: stop it first", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// The socket steers the service's traffic: only its owner may use it.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Client talks to a load balancer's control socket.
type Client struct {
	sock string
	http *http.Client
}

// Dial returns a client of the control socket at sock. It connects on
// each call, so it may be made before the load balancer is up.
func Dial(sock string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{sock: sock, http: &http.Client{Transport: tr}}
}

// SetReplicas pushes the ready set.
func (c *Client) SetReplicas(ctx context.Context, rs ReplicaSet) error {
	body, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPut, "/replicas", body, nil)
}

// State reads the load balancer's state.
func (c *Client) State(ctx context.Context) (State, error) {
	var st State
	err := c.do(ctx, http.MethodGet, "/state", nil, &st)
	return st, err
}

// Shutdown asks the load balancer to drain (up to 5 s) and exit. It
// returns once the request was taken, not when the process is gone.
func (c *Client) Shutdown(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/shutdown", nil, nil)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://lb"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("load balancer control socket %s: %w", c.sock, op.Err)
		}
		return fmt.Errorf("load balancer control socket %s: %w", c.sock, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return fmt.Errorf("load balancer %s %s: %s: %s", method, path, res.Status, strings.TrimSpace(string(msg)))
	}
	if out != nil {
		return json.NewDecoder(res.Body).Decode(out)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return nil
}
