package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/testutil"
)

// recordingHandler keeps every log record, for tests that check what the
// server logged and at which level.
type recordingHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// find returns the first record that ok accepts.
func (h *recordingHandler) find(ok func(slog.Record) bool) (slog.Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if ok(r) {
			return r, true
		}
	}
	return slog.Record{}, false
}

func attr(r slog.Record, key string) string {
	v := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// A client that hangs up while it waits for its request is normal: the
// server logs it at INFO with the reason, never at ERROR as an internal
// error (issue 26, item 11).
func TestClientDisconnectIsNotAnError(t *testing.T) {
	logs := &recordingHandler{}
	// An op that runs until cancelled, cancelled once nobody waits for it,
	// so the wait below lasts until the client goes away.
	block := op.Op{Name: "test.block", Schedule: op.Short, CancelWhenUnfollowed: true, Body: op.NoBody{}, Result: op.Null{},
		Run: func(ctx context.Context, r *op.Request) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
	s, err := New(Options{Home: t.TempDir(), Logger: slog.New(logs)}, []op.Op{block})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)

	resp, err := http.Post(hs.URL+"/test/block", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get(api.HeaderRequestID)
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("POST /test/block: %s, request id %q", resp.Status, id)
	}

	// Wait for the request on a raw connection, so the test decides when
	// the client goes away: once the server counts it as following.
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /api/get?request_id=%s HTTP/1.1\r\nHost: test\r\n\r\n", id)
	waitUntil(t, "the server to count the client as following the request", func() bool {
		s.exec.mu.Lock()
		defer s.exec.mu.Unlock()
		j := s.exec.jobs[id]
		return j != nil && j.followers == 1
	})
	conn.Close()

	var gone slog.Record
	waitUntil(t, "the server to log the client's departure", func() bool {
		var ok bool
		gone, ok = logs.find(func(r slog.Record) bool {
			return r.Level >= slog.LevelError || r.Message == "client went away before its answer"
		})
		return ok
	})
	if gone.Level != slog.LevelInfo || gone.Message != "client went away before its answer" {
		t.Fatalf("client disconnect logged as %s %q (err=%s), want INFO \"client went away before its answer\"", gone.Level, gone.Message, attr(gone, "err"))
	}
	if reason := attr(gone, "reason"); !strings.Contains(reason, "context canceled") {
		t.Errorf("reason = %q, want the cause (context canceled)", reason)
	}
	if p := attr(gone, "path"); p != "/api/get" {
		t.Errorf("path = %q, want /api/get", p)
	}
	// Cancelling the unfollowed request is normal too.
	waitUntil(t, "the request to be cancelled", func() bool {
		rec, err := s.store.GetRequest(context.Background(), id)
		return err == nil && rec.Status == api.RequestCancelled
	})
	if r, bad := logs.find(func(r slog.Record) bool { return r.Level >= slog.LevelError }); bad {
		t.Errorf("logged at %s: %q %s", r.Level, r.Message, attr(r, "err"))
	}
}

// waitUntil polls cond for up to 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testutil.WaitFor(30*time.Second, 10*time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}
