package controller

import (
	"sync"
	"time"
)

// queue holds the keys of one controller, after client-go's workqueue.
//
// A key is in one of four states: idle; waiting for a timer; ready (in the
// FIFO, to be taken by a worker); processing. The dirty set marks keys that
// need a reconcile that has not started yet: every ready key, and a
// processing key that was enqueued again meanwhile. A processing key is never
// made ready, which is what keeps two reconciles of one key from
// overlapping; when it finishes, a dirty key goes back into the FIFO once,
// however many times it was enqueued.
//
// Enqueues of a key merge: an enqueue asks for a reconcile no later than a
// given time, and a reconcile that has not started yet answers every such
// request. So an immediate enqueue cancels the key's timer, a delayed one is
// dropped when a reconcile is already due, and of two timers the earlier one
// wins. A reconcile that wants another look later says so in its Result.
type queue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	ready      []string
	dirty      map[string]bool
	processing map[string]bool
	timers     map[string]*timer
	failures   map[string]int // consecutive errors, for backoff
	shutdown   bool

	// backoff is the wait before retry n; the controller sets it from
	// its Options.
	backoff func(n int) time.Duration
	// depth reports len(ready) when it changes, for the queue gauge.
	depth func(int)
}

// timer is a key's pending delayed enqueue. Its identity tells a timer that
// fires from one that was stopped or replaced while its func was starting.
type timer struct {
	at time.Time
	t  *time.Timer
}

// outcome is what a finished reconcile asks for next.
type outcome struct {
	retry bool          // it failed: count a failure and back off
	after time.Duration // it succeeded and wants another look after this
}

func newQueue(backoff func(int) time.Duration, depth func(int)) *queue {
	q := &queue{
		dirty:      map[string]bool{},
		processing: map[string]bool{},
		timers:     map[string]*timer{},
		failures:   map[string]int{},
		backoff:    backoff,
		depth:      depth,
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// add makes key due now.
func (q *queue) add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

// addResync is add for the periodic listing. It leaves out keys that are
// failing, because a retry of theirs is already scheduled (ready,
// processing, or a backoff timer); making them due now would let a short
// resync period override the backoff. An explicit add still goes through:
// it signals that something changed.
func (q *queue) addResync(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failures[key] > 0 {
		return
	}
	q.addLocked(key)
}

func (q *queue) addLocked(key string) {
	if q.shutdown {
		return
	}
	q.stopTimerLocked(key)
	if q.dirty[key] {
		return
	}
	q.dirty[key] = true
	if q.processing[key] {
		return // finish puts it back
	}
	q.pushLocked(key)
}

func (q *queue) pushLocked(key string) {
	q.ready = append(q.ready, key)
	q.depth(len(q.ready))
	q.cond.Signal()
}

// addAfter makes key due after d.
func (q *queue) addAfter(key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addAfterLocked(key, d)
}

func (q *queue) addAfterLocked(key string, d time.Duration) {
	if d <= 0 {
		q.addLocked(key)
		return
	}
	if q.shutdown || q.dirty[key] {
		return
	}
	at := time.Now().Add(d)
	if old := q.timers[key]; old != nil {
		if !at.Before(old.at) {
			return
		}
		old.t.Stop()
	}
	t := &timer{at: at}
	t.t = time.AfterFunc(d, func() { q.fire(key, t) })
	q.timers[key] = t
}

func (q *queue) fire(key string, t *timer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timers[key] != t {
		return // stopped or replaced after it had started to fire
	}
	delete(q.timers, key)
	q.addLocked(key)
}

func (q *queue) stopTimerLocked(key string) {
	if t := q.timers[key]; t != nil {
		t.t.Stop()
		delete(q.timers, key)
	}
}

// get blocks until a key is ready and marks it processing. It reports false
// once the queue is shut down, even if keys are ready: shutting down means
// starting no new reconcile.
func (q *queue) get() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return "", false
	}
	key := q.ready[0]
	q.ready[0] = "" // let the backing array drop the string
	q.ready = q.ready[1:]
	q.depth(len(q.ready))
	delete(q.dirty, key)
	q.processing[key] = true
	return key, true
}

// finish ends the processing of key and schedules what o asks for, in one
// step so that a worker picking the key up again cannot see the backoff
// history half updated. It returns the key's consecutive failures and the
// wait before its next reconcile (0 when it is due again at once because it
// was enqueued meanwhile).
func (q *queue) finish(key string, o outcome) (failures int, next time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	next = o.after
	if o.retry {
		q.failures[key]++
		failures = q.failures[key]
		next = q.backoff(failures)
	} else {
		delete(q.failures, key)
	}
	if q.shutdown {
		return failures, 0
	}
	if q.dirty[key] {
		q.pushLocked(key)
		return failures, 0
	}
	if !o.retry && next <= 0 {
		return failures, 0 // done until enqueued again
	}
	q.addAfterLocked(key, next)
	return failures, next
}

// shutDown wakes every worker waiting in get and stops all timers; keys
// added from now on are dropped.
func (q *queue) shutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	for key := range q.timers {
		q.stopTimerLocked(key)
	}
	q.cond.Broadcast()
}
