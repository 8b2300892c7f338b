package server

import (
	"context"
	"sync"
	"sync/atomic"
)

// pool bounds how many requests of one schedule run at once, and decides
// which waiting request runs next.
//
// A plain semaphore served requests in arrival order, so on a shared
// server one user's storm (200 clients looping `sky jobs queue`) filled
// the short pool's queue and every other user's `sky status` waited
// behind all of it: 10–30 s per request, four requests per `sky status`.
// So the next free slot goes to the waiting user who holds the fewest
// slots (oldest request first among equals), and in a pool with a
// per-user limit no user holds more than that limit, which keeps slots
// free for anyone else who comes: a newcomer's request starts at once
// instead of when one of the storm's ends. A user's own requests still
// run in the order they came.
type pool struct {
	name string
	size int
	// perUser is how many slots one user may hold at once (size: no limit).
	perUser int

	mu      sync.Mutex
	running int
	held    map[string]int
	queues  map[string][]*slotWaiter
	seq     uint64

	// For metrics and logs.
	waiting atomic.Int64
	busy    atomic.Int64
}

// slotWaiter is one request waiting for a slot.
type slotWaiter struct {
	seq     uint64
	ready   chan struct{}
	granted bool
}

// newPool is a pool of n slots with no per-user limit.
func newPool(name string, n int) *pool {
	return newFairPool(name, n, n)
}

// newFairPool is a pool of n slots of which one user holds at most perUser.
func newFairPool(name string, n, perUser int) *pool {
	n = max(n, 1)
	return &pool{name: name, size: n, perUser: min(max(perUser, 1), n),
		held: map[string]int{}, queues: map[string][]*slotWaiter{}}
}

// perUserLimit leaves a quarter of a pool (at least one slot once it has
// four) to users other than the one holding the rest.
func perUserLimit(n int) int {
	return n - n/4
}

// acquire waits for a slot for user's request; it returns ctx's error
// (holding no slot) if ctx ends first.
func (p *pool) acquire(ctx context.Context, user string) error {
	p.mu.Lock()
	w := &slotWaiter{seq: p.seq, ready: make(chan struct{})}
	p.seq++
	p.queues[user] = append(p.queues[user], w)
	p.waiting.Add(1)
	p.dispatch()
	p.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted {
		// Granted as ctx ended: hand the slot on.
		p.releaseLocked(user)
		return ctx.Err()
	}
	q := p.queues[user]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(p.queues, user)
	} else {
		p.queues[user] = q
	}
	p.waiting.Add(-1)
	return ctx.Err()
}

// release frees a slot user held.
func (p *pool) release(user string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(user)
}

func (p *pool) releaseLocked(user string) {
	p.running--
	if p.held[user]--; p.held[user] <= 0 {
		delete(p.held, user)
	}
	p.dispatch()
}

// dispatch gives free slots to waiting requests as nextUser picks them.
func (p *pool) dispatch() {
	for p.running < p.size && len(p.queues) > 0 {
		cands := make([]slotCandidate, 0, len(p.queues))
		for u, q := range p.queues {
			cands = append(cands, slotCandidate{user: u, held: p.held[u], oldest: q[0].seq})
		}
		u := nextUser(cands, p.perUser)
		if u == "" {
			return
		}
		q := p.queues[u]
		w := q[0]
		if len(q) == 1 {
			delete(p.queues, u)
		} else {
			p.queues[u] = q[1:]
		}
		w.granted = true
		p.running++
		p.held[u]++
		p.waiting.Add(-1)
		close(w.ready)
	}
}

// slotCandidate is a user with requests waiting: how many slots the user
// holds, and the arrival number of the user's oldest waiting request.
type slotCandidate struct {
	user   string
	held   int
	oldest uint64
}

// nextUser picks whose request gets a free slot: among users below the
// per-user limit, the one holding the fewest slots, and among those the
// one whose oldest request came first. "" when every waiting user is at
// the limit.
func nextUser(cands []slotCandidate, perUser int) string {
	best := -1
	for i, c := range cands {
		if c.held >= perUser {
			continue
		}
		if best < 0 || c.held < cands[best].held || (c.held == cands[best].held && c.oldest < cands[best].oldest) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return cands[best].user
}
