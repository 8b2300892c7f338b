package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

func TestNextUser(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cands   []slotCandidate
		perUser int
		want    string
	}{
		{"nobody waits", nil, 3, ""},
		{"one user below the limit", []slotCandidate{{"bob", 2, 7}}, 3, "bob"},
		{"one user at the limit", []slotCandidate{{"bob", 3, 7}}, 3, ""},
		{"the user holding fewer slots first", []slotCandidate{{"bob", 2, 1}, {"alice", 0, 9}}, 3, "alice"},
		{"equal holdings: the oldest request first", []slotCandidate{{"bob", 1, 5}, {"alice", 1, 4}}, 3, "alice"},
		{"the storm at its limit does not block others", []slotCandidate{{"bob", 3, 0}, {"alice", 2, 8}}, 3, "alice"},
		{"everyone at the limit", []slotCandidate{{"bob", 3, 0}, {"alice", 3, 8}}, 3, ""},
		{"no limit: fewest held still first", []slotCandidate{{"bob", 15, 0}, {"carol", 1, 3}}, 16, "carol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextUser(tc.cands, tc.perUser); got != tc.want {
				t.Errorf("nextUser(%v, %d) = %q, want %q", tc.cands, tc.perUser, got, tc.want)
			}
		})
	}
}

func TestPerUserLimit(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 3, 4: 3, 16: 12, 64: 48, 256: 192} {
		if got := perUserLimit(n); got != want {
			t.Errorf("perUserLimit(%d) = %d, want %d", n, got, want)
		}
	}
}

// acquired starts acquire in a goroutine and returns the channel its
// result comes on.
func acquired(p *pool, ctx context.Context, user string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- p.acquire(ctx, user) }()
	return ch
}

// mustGet waits (bounded) for an acquire that must succeed with nothing
// released in the meantime.
func mustGet(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still waiting for a slot", what)
	}
}

// waitQueued waits until n requests wait in p.
func waitQueued(t *testing.T, p *pool, n int64) {
	t.Helper()
	if !testutil.WaitFor(30*time.Second, time.Millisecond, func() bool { return p.waiting.Load() == n }) {
		t.Fatalf("%d requests waiting, want %d", p.waiting.Load(), n)
	}
}

// A storm of one user's requests takes at most the per-user limit of
// slots: another user's request starts at once, with no slot released;
// when a slot frees, the user holding fewer gets it; a user's own
// requests run in order.
func TestFairPoolStormDoesNotStarveOthers(t *testing.T) {
	ctx := context.Background()
	p := newFairPool("short", 4, perUserLimit(4))
	for i := range 3 {
		mustGet(t, acquired(p, ctx, "bob"), fmt.Sprintf("bob's request %d", i+1))
	}
	var storm []<-chan error
	for range 10 {
		storm = append(storm, acquired(p, ctx, "bob"))
		waitQueued(t, p, int64(len(storm))) // one at a time, so their order is known
	}
	mustGet(t, acquired(p, ctx, "alice"), "alice's request while bob holds 3 of 4 slots")

	// Every slot is taken; alice asks again and bob frees one: alice holds
	// 1, bob 2, so the slot is alice's although bob's requests came first.
	second := acquired(p, ctx, "alice")
	waitQueued(t, p, 11)
	p.release("bob")
	mustGet(t, second, "alice's second request after bob released a slot")
	for i, ch := range storm {
		select {
		case err := <-ch:
			t.Fatalf("bob's queued request %d got a slot (%v) while he was at his limit", i, err)
		default:
		}
	}

	// Now alice leaves: bob (holding 2) gets one more slot, for his oldest
	// queued request, and no more although a slot stays free; each slot
	// he frees goes to his next request in order.
	p.release("alice")
	p.release("alice")
	mustGet(t, storm[0], "bob's first queued request")
	waitQueued(t, p, 9)
	p.release("bob")
	mustGet(t, storm[1], "bob's second queued request")
	waitQueued(t, p, 8)
	for i, ch := range storm[2:] {
		select {
		case err := <-ch:
			t.Fatalf("bob's queued request %d got a slot (%v) beyond his limit of %d", i+2, err, p.perUser)
		default:
		}
	}
	if got := p.busy.Load(); got != 0 {
		t.Errorf("busy = %d; acquire alone must not count a request as running", got)
	}
}

// A request cancelled while it waits leaves the queue and takes no slot.
func TestFairPoolCancelWhileQueued(t *testing.T) {
	p := newFairPool("short", 1, 1)
	mustGet(t, acquired(p, context.Background(), "bob"), "bob's request")
	ctx, cancel := context.WithCancel(context.Background())
	queued := acquired(p, ctx, "alice")
	waitQueued(t, p, 1)
	cancel()
	select {
	case err := <-queued:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire returned %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled acquire did not return")
	}
	waitQueued(t, p, 0)
	p.release("bob")
	mustGet(t, acquired(p, context.Background(), "carol"), "carol's request after the cancelled one left")
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running != 1 || len(p.held) != 1 || p.held["carol"] != 1 {
		t.Errorf("running %d, held %v; want only carol's slot", p.running, p.held)
	}
}
