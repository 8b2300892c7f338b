package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/op"
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

func collect(c *client.Client, body any) ([]string, error) {
	var lines []string
	err := c.StreamOp(context.Background(), jobsQueueOp, body, func(line []byte) error {
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
