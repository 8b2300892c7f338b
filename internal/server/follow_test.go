package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/testutil"
)

// tailOp stands for a log tail: it writes a line, then runs until it is
// cancelled or the test releases it.
func tailOp(name string, release <-chan struct{}, cancelUnfollowed bool) op.Op {
	return op.Op{Name: name, Schedule: op.Follow, CancelWhenUnfollowed: cancelUnfollowed,
		Run: func(ctx context.Context, r *op.Request) (any, error) {
			fmt.Fprintln(r.Log, "following")
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return "released", nil
			}
		}}
}

// liveServer serves s over real HTTP, so that a client closing its
// connection is seen by the server as it would be in production.
func liveServer(t *testing.T, s *Server) string {
	t.Helper()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

func submit(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Post(base+"/"+name, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get(api.HeaderRequestID)
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("POST /%s: HTTP %d, id %q", name, resp.StatusCode, id)
	}
	return id
}

// follower is one client following a request; hangUp closes its
// connection the way a killed process's kernel would.
type follower struct {
	hangUp func()
	lines  *bufio.Reader
}

// follow opens GET /api/stream on id and returns once the first line
// arrived, i.e. once the server counts the stream as a follower.
func follow(t *testing.T, base, id string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/stream?follow=true&request_id="+id, nil)
	// A transport per follower: each one is its own connection, as each
	// CLI process is.
	hc := &http.Client{Transport: &http.Transport{}}
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f := &follower{lines: bufio.NewReader(resp.Body), hangUp: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(f.hangUp)
	if line, err := f.lines.ReadString('\n'); err != nil || line != "following\n" {
		t.Fatalf("stream of %s began with %q, %v", id, line, err)
	}
	return f
}

func statusNow(t *testing.T, s *Server, id string) api.Request {
	t.Helper()
	rec, err := s.store.GetRequest(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return *rec
}

// waitStatus polls the record until it has status want (bounded).
func waitStatus(t *testing.T, s *Server, id string, want api.RequestStatus) api.Request {
	t.Helper()
	var rec api.Request
	if !testutil.WaitFor(15*time.Second, 20*time.Millisecond, func() bool { rec = statusNow(t, s, id); return rec.Status == want }) {
		t.Fatalf("request %s is %s, want %s (error %s)", id, rec.Status, want, rec.Error)
	}
	return rec
}

// waitFollowers polls until the server counts n followers of id.
func waitFollowers(t *testing.T, s *Server, id string, n int) {
	t.Helper()
	got := -1
	if !testutil.WaitFor(15*time.Second, 20*time.Millisecond, func() bool {
		s.exec.mu.Lock()
		defer s.exec.mu.Unlock()
		got = -1
		if j := s.exec.jobs[id]; j != nil {
			got = j.followers
		}
		return got == n
	}) {
		t.Fatalf("request %s has %d followers, want %d", id, got, n)
	}
}

func errorMessage(t *testing.T, rec api.Request) string {
	t.Helper()
	var e struct{ Type, Message string }
	if err := json.Unmarshal([]byte(rec.Error), &e); err != nil {
		t.Fatalf("error field %q: %v", rec.Error, err)
	}
	if e.Type != "RequestCancelled" {
		t.Errorf("error type %q, want RequestCancelled", e.Type)
	}
	return e.Message
}

// The last follower hanging up cancels the request, but only the last:
// while another client streams it, it keeps running.
func TestLastFollowerGoneCancels(t *testing.T) {
	release := make(chan struct{})
	s := newTestServer(t, Options{}, tailOp("tail", release, true))
	base := liveServer(t, s)
	id := submit(t, base, "tail")
	a, b := follow(t, base, id), follow(t, base, id)
	waitFollowers(t, s, id, 2)

	a.hangUp()
	waitFollowers(t, s, id, 1)
	if rec := statusNow(t, s, id); rec.Status != api.RequestRunning {
		t.Fatalf("with one follower left the request is %s, want RUNNING", rec.Status)
	}
	b.hangUp()
	rec := waitStatus(t, s, id, api.RequestCancelled)
	if msg := errorMessage(t, rec); !strings.Contains(msg, "went away") {
		t.Errorf("cancel reason %q does not say the client went away", msg)
	}
	// The record moves first; then the job is stopped and its Run returns.
	if !testutil.WaitFor(15*time.Second, 20*time.Millisecond, func() bool { return s.exec.jobFor(id) == nil }) {
		t.Fatalf("the cancelled request still runs")
	}
}

// A request that ends by itself while followed ends SUCCEEDED: the
// stream closing after the end is not a client going away.
func TestFollowerSeesEndNoCancel(t *testing.T) {
	release := make(chan struct{})
	s := newTestServer(t, Options{}, tailOp("tail", release, true))
	base := liveServer(t, s)
	id := submit(t, base, "tail")
	f := follow(t, base, id)
	close(release)
	rest, err := f.lines.ReadString('\n')
	if err == nil || rest != "" {
		t.Fatalf("after the request ended the stream sent %q, %v; want its end", rest, err)
	}
	waitStatus(t, s, id, api.RequestSucceeded)
}

// Without the flag, a request outlives its followers: `sky launch`
// interrupted by Ctrl-C keeps running.
func TestUnflaggedOutlivesFollowers(t *testing.T) {
	release := make(chan struct{})
	s := newTestServer(t, Options{}, tailOp("keep", release, false), tailOp("tail", release, true))
	base := liveServer(t, s)
	keep := submit(t, base, "keep")
	follow(t, base, keep).hangUp()
	// The flagged request's follower hangs up after the other one did;
	// once its cancellation shows, the first hang-up has had its turn.
	tail := submit(t, base, "tail")
	follow(t, base, tail).hangUp()
	waitStatus(t, s, tail, api.RequestCancelled)
	if rec := statusNow(t, s, keep); rec.Status != api.RequestRunning {
		t.Fatalf("unflagged request is %s after its follower left, want RUNNING", rec.Status)
	}
	close(release)
	waitStatus(t, s, keep, api.RequestSucceeded)
}

// A client waiting in /api/get is a follower too.
func TestGetWaiterGoneCancels(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := newTestServer(t, Options{}, tailOp("tail", release, true))
	base := liveServer(t, s)
	id := submit(t, base, "tail")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/get?request_id="+id, nil)
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitFollowers(t, s, id, 1)
	cancel()
	<-done
	waitStatus(t, s, id, api.RequestCancelled)
}

// A request nobody comes to follow (its client died between the POST
// and the stream) is cancelled after the attach grace; one that is
// followed is not.
func TestNeverFollowedCancelled(t *testing.T) {
	release := make(chan struct{})
	s := newTestServer(t, Options{}, tailOp("tail", release, true))
	// Set before the server goroutines start, so they all see it. A
	// follower attaches within milliseconds; a second is ample.
	s.exec.attachGrace = time.Second
	base := liveServer(t, s)
	watched := submit(t, base, "tail")
	follow(t, base, watched)
	lonely := submit(t, base, "tail")
	rec := waitStatus(t, s, lonely, api.RequestCancelled)
	if msg := errorMessage(t, rec); !strings.Contains(msg, "no client followed it") {
		t.Errorf("cancel reason %q does not say nobody followed", msg)
	}
	// The followed one was submitted first, so its grace has passed too;
	// a margin more, and it still runs.
	time.Sleep(s.exec.attachGrace)
	if rec := statusNow(t, s, watched); rec.Status != api.RequestRunning {
		t.Fatalf("followed request is %s, want RUNNING", rec.Status)
	}
	close(release)
	waitStatus(t, s, watched, api.RequestSucceeded)
}

// Followers have their own pool: with every follower slot taken and one
// more queued, short and long requests still run at once.
func TestFollowersOwnPool(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	quick := func(context.Context, *op.Request) (any, error) { return "ok", nil }
	s := newTestServer(t, Options{LongWorkers: 1, ShortWorkers: 1, FollowWorkers: 3},
		tailOp("tail", release, false),
		op.Op{Name: "quick.long", Schedule: op.Long, Run: quick},
		op.Op{Name: "quick.short", Schedule: op.Short, Run: quick})
	base := liveServer(t, s)
	var tails []string
	for range 4 {
		tails = append(tails, submit(t, base, "tail"))
	}
	p := s.exec.follow
	if !testutil.WaitFor(15*time.Second, 20*time.Millisecond, func() bool { return p.busy.Load() == 3 && p.waiting.Load() == 1 }) {
		t.Fatalf("follow pool: %d busy, %d waiting; want 3 and 1", p.busy.Load(), p.waiting.Load())
	}
	for _, name := range []string{"quick/long", "quick/short"} {
		waitStatus(t, s, submit(t, base, name), api.RequestSucceeded)
	}
	if rec := statusNow(t, s, tails[0]); rec.ScheduleType != "short" {
		t.Errorf("a follower is recorded with schedule %q, want short", rec.ScheduleType)
	}
}
