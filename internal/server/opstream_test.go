package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/testutil"
)

// streamedQueue stands for jobs.queue served as a stream: it emits
// "limit" values, then fails if asked to, or refuses a bad body first.
func streamedQueue() op.Op {
	return op.Op{Name: jobsQueueOp, Schedule: op.Short, Body: api.JobsQueueBody{}, Result: api.JobsQueueResult{},
		Run: func(context.Context, *op.Request) (any, error) { return nil, nil },
		Stream: func(ctx context.Context, r *op.Request, emit func(any) error) error {
			var b struct {
				Limit     int    `json:"limit"`
				FailAfter bool   `json:"fail_after"`
				Infra     string `json:"infra"`
			}
			if err := r.Decode(&b); err != nil {
				return err
			}
			if b.Infra == "bad" {
				return &op.Error{Type: "ValueError", Message: "infra bad: no such infrastructure"}
			}
			for i := range b.Limit {
				if err := emit(map[string]any{"job_id": i, "name": "<a & b>"}); err != nil {
					return err
				}
			}
			if b.FailAfter {
				return errors.New("database is locked")
			}
			return nil
		}}
}

func streamClient(t *testing.T, ops ...op.Op) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Endpoint: liveServer(t, newTestServer(t, Options{}, ops...)), Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// streamedQueueOp is jobs.queue's descriptor with a body of any keys:
// the tests send bodies the real one could not encode.
var streamedQueueOp = op.Desc[map[string]any, api.JobsQueueResult]{Name: jobsQueueOp}

func collect(c *client.Client, body map[string]any) ([]string, error) {
	var lines []string
	err := client.StreamOp(context.Background(), c, streamedQueueOp, body, func(line []byte) error {
		lines = append(lines, string(line))
		return nil
	})
	return lines, err
}

// TestStreamedOp: POST /jobs/queue/stream answers each value the op
// emits as one line of JSON, as the CLI prints it ('<', '&' unescaped);
// an error after values is told by the trailer, one before them as an
// ordinary error answer, and a server whose op does not stream answers
// ErrNoOpStream, so the client can ask for pages.
func TestStreamedOp(t *testing.T) {
	c := streamClient(t, streamedQueue())
	lines, err := collect(c, map[string]any{"limit": 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"job_id":0,"name":"<a & b>"}`, `{"job_id":1,"name":"<a & b>"}`, `{"job_id":2,"name":"<a & b>"}`}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if lines, err := collect(c, map[string]any{}); err != nil || len(lines) != 0 {
		t.Errorf("no values: %q, %v; want none and no error", lines, err)
	}
	lines, err = collect(c, map[string]any{"limit": 2, "fail_after": true})
	if err == nil || !strings.Contains(err.Error(), "database is locked") || len(lines) != 2 {
		t.Errorf("failing after 2 values: %d lines, error %v; want 2 and the server's reason", len(lines), err)
	}
	_, err = collect(c, map[string]any{"infra": "bad"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Detail, "no such infrastructure") {
		t.Errorf("refused body: %v, want a 400 with the op's message", err)
	}
	if _, err := collect(c, map[string]any{"limit": "many"}); !errors.As(err, &ae) || ae.Status != 400 {
		t.Errorf("undecodable body: %v, want a 400", err)
	}

	plain := streamedQueue()
	plain.Stream = nil
	if _, err := collect(streamClient(t, plain), nil); !errors.Is(err, client.ErrNoOpStream) {
		t.Errorf("op without Stream: %v, want ErrNoOpStream", err)
	}
	if _, err := collect(streamClient(t), nil); !errors.Is(err, client.ErrNoOpStream) {
		t.Errorf("no such op: %v, want ErrNoOpStream", err)
	}
}

// TestStreamedOpClientStopsReading: a client that stops reading (its
// output piped to a pager left open) does not keep its slot of the short
// pool: once a write waits longer than the stall bound, the stream ends
// and the op sees the failed write.
func TestStreamedOpClientStopsReading(t *testing.T) {
	var emitErr atomic.Value
	o := streamedQueue()
	inner := o.Stream
	o.Stream = func(ctx context.Context, r *op.Request, emit func(any) error) error {
		err := inner(ctx, r, emit)
		if err != nil {
			emitErr.Store(err)
		}
		return err
	}
	s := newTestServer(t, Options{}, o)
	s.streamStall = 200 * time.Millisecond
	base := liveServer(t, s)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Far more than the socket buffers hold: the server's writes block.
	body := `{"limit": 5000000}`
	fmt.Fprintf(conn, "POST /jobs/queue/stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if !testutil.WaitFor(20*time.Second, 20*time.Millisecond, func() bool { return emitErr.Load() != nil && s.exec.short.busy.Load() == 0 }) {
		t.Fatalf("a client that reads nothing still holds the stream after 20 s (busy %d, op error %v)", s.exec.short.busy.Load(), emitErr.Load())
	}
	s.exec.short.mu.Lock()
	running := s.exec.short.running
	s.exec.short.mu.Unlock()
	if running != 0 {
		t.Errorf("%d short slots still held after the stream ended", running)
	}
}
