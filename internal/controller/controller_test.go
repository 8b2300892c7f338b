package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const base, ceiling = 100 * time.Millisecond, 1 * time.Second
	tests := []struct {
		n       int
		r       float64
		base    time.Duration
		ceiling time.Duration
		want    time.Duration
		reason  string
	}{
		{n: 1, r: 0, want: 50 * time.Millisecond, reason: "first retry, lowest jitter: half of base"},
		{n: 1, r: 0.5, want: 75 * time.Millisecond, reason: "jitter scales the upper half"},
		{n: 2, r: 0, want: 100 * time.Millisecond, reason: "doubles"},
		{n: 3, r: 0, want: 200 * time.Millisecond, reason: "doubles again"},
		{n: 4, r: 0.75, want: 700 * time.Millisecond, reason: "three quarters of the jitter range"},
		{n: 5, r: 0, want: 500 * time.Millisecond, reason: "capped at max before jitter"},
		{n: 1_000_000, r: 0, want: 500 * time.Millisecond, reason: "a key failing for days stays capped"},
		{n: 80, r: 0, base: time.Second, ceiling: time.Duration(1<<63 - 1), want: time.Duration(1<<63-1) / 2, reason: "no overflow near the largest duration"},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			b, m := tt.base, tt.ceiling
			if b == 0 {
				b, m = base, ceiling
			}
			if got := backoff(tt.n, b, m, tt.r); got != tt.want {
				t.Errorf("backoff(%d, %v, %v, %v) = %v, want %v", tt.n, b, m, tt.r, got, tt.want)
			}
		})
	}
}

func TestTerminal(t *testing.T) {
	cause := errors.New("invalid credentials")
	if Terminal(nil) != nil {
		t.Error("Terminal(nil) != nil")
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"plain error", cause, false},
		{"nil", nil, false},
		{"terminal", Terminal(cause), true},
		{"wrapped terminal", fmt.Errorf("launch: %w", Terminal(cause)), true},
	}
	for _, tt := range tests {
		if got := IsTerminal(tt.err); got != tt.want {
			t.Errorf("%s: IsTerminal = %v, want %v", tt.name, got, tt.want)
		}
	}
	if err := Terminal(cause); !errors.Is(err, cause) || err.Error() != cause.Error() {
		t.Errorf("Terminal hides its cause: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	r := ReconcilerFunc(func(context.Context, string) (Result, error) { return Result{}, nil })
	for name, f := range map[string]func(){
		"nil reconciler": func() { New(nil, Options{Name: "x"}) },
		"no name":        func() { New(r, Options{}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New did not panic")
				}
			}()
			f()
		})
	}
	c := New(r, Options{Name: "x", BaseBackoff: time.Minute, MaxBackoff: time.Second})
	if c.o.Workers != 4 || c.o.MaxBackoff != time.Minute {
		t.Errorf("defaults: workers %d, max backoff %v; want 4, 1m (raised to base)", c.o.Workers, c.o.MaxBackoff)
	}
}

// A key enqueued many times before it is reconciled is reconciled once.
func TestEnqueueDedups(t *testing.T) {
	s := newScripted(nil)
	c := New(s, Options{Name: "t", Logger: testLogger(t)})
	for range 5 {
		c.Enqueue("a")
	}
	c.Enqueue("b")
	c.EnqueueAfter("a", time.Hour) // a reconcile of a is already due
	start(t, c)
	waitIdle(t, c)
	if a, b := s.count("a"), s.count("b"); a != 1 || b != 1 {
		t.Errorf("reconciles: a %d, b %d; want 1 each", a, b)
	}
}

// A key enqueued while it is being reconciled is reconciled exactly once
// more, after the running reconcile, never beside it.
func TestEnqueueWhileReconciling(t *testing.T) {
	tests := []struct {
		name   string
		during func(c *Controller)
	}{
		{"enqueue once", func(c *Controller) { c.Enqueue("k") }},
		{"enqueue ten times", func(c *Controller) {
			for range 10 {
				c.Enqueue("k")
			}
		}},
		{"enqueue after a delay", func(c *Controller) { c.EnqueueAfter("k", 5*time.Millisecond) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan int, 10)
			release := make(chan struct{})
			var calls, running atomic.Int32
			c := New(ReconcilerFunc(func(ctx context.Context, key string) (Result, error) {
				if running.Add(1) != 1 {
					t.Error("two reconciles of one key overlap")
				}
				defer running.Add(-1)
				n := int(calls.Add(1))
				started <- n
				if n == 1 {
					<-release
				}
				return Result{}, nil
			}), Options{Name: "t", Workers: 4, Logger: testLogger(t)})
			c.Enqueue("k")
			start(t, c)
			receive(t, "first reconcile", started)
			tt.during(c)
			close(release)
			if n := receive(t, "second reconcile", started); n != 2 {
				t.Fatalf("got reconcile %d, want 2", n)
			}
			waitIdle(t, c)
			if n := calls.Load(); n != 2 {
				t.Errorf("%d reconciles, want 2", n)
			}
		})
	}
}

// However hard a few keys are enqueued, many workers never run two
// reconciles of one key at once.
func TestOneReconcilePerKey(t *testing.T) {
	keys := []string{"a", "b", "c"}
	var running sync.Map // key -> *atomic.Int32
	for _, k := range keys {
		running.Store(k, new(atomic.Int32))
	}
	var overlaps, calls atomic.Int32
	c := New(ReconcilerFunc(func(ctx context.Context, key string) (Result, error) {
		v, _ := running.Load(key)
		n := v.(*atomic.Int32)
		if n.Add(1) > 1 {
			overlaps.Add(1)
		}
		calls.Add(1)
		runtime.Gosched() // widen the window an overlap would need
		n.Add(-1)
		return Result{}, nil
	}), Options{Name: "t", Workers: 8, Logger: testLogger(t)})
	start(t, c)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				c.Enqueue(keys[(g+i)%len(keys)])
			}
		})
	}
	wg.Wait()
	waitIdle(t, c)
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping reconciles of one key", n)
	}
	if calls.Load() < int32(len(keys)) {
		t.Errorf("%d reconciles, want at least one per key", calls.Load())
	}
}

// No more than Workers reconciles run at once; the rest wait in the queue.
func TestWorkersBound(t *testing.T) {
	const workers, keys = 3, 10
	reg, m := newRegistryMetrics(t)
	started := make(chan string, keys)
	release := make(chan struct{})
	var running, peak atomic.Int32
	c := New(ReconcilerFunc(func(ctx context.Context, key string) (Result, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- key
		<-release
		running.Add(-1)
		return Result{}, nil
	}), Options{Name: "t", Workers: workers, Metrics: m, Logger: testLogger(t)})
	for i := range keys {
		c.Enqueue(fmt.Sprint("k", i))
	}
	start(t, c)
	for range workers {
		receive(t, "a worker to start", started)
	}
	// Every worker is blocked now, so these are stable.
	if v, _ := metric(t, reg, "skygo_controller_reconciles_in_flight", map[string]string{"controller": "t"}); v != workers {
		t.Errorf("in-flight gauge %v, want %d", v, workers)
	}
	if v, _ := metric(t, reg, "skygo_controller_queue_depth", map[string]string{"controller": "t"}); v != keys-workers {
		t.Errorf("queue depth gauge %v, want %d", v, keys-workers)
	}
	close(release)
	for range keys - workers {
		receive(t, "the other keys", started)
	}
	waitIdle(t, c)
	if p := peak.Load(); p > workers {
		t.Errorf("%d reconciles ran at once, want at most %d", p, workers)
	}
	if v, _ := metric(t, reg, "skygo_controller_queue_depth", map[string]string{"controller": "t"}); v != 0 {
		t.Errorf("queue depth gauge %v at idle, want 0", v)
	}
}

// A key that hangs keeps one worker at most; the other keys are all
// reconciled meanwhile. With Timeout, even a single worker is freed, by
// cancelling the hung reconcile's context.
func TestHungKeyDoesNotDelayOthers(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		timeout time.Duration
	}{
		{"other workers carry on", 2, 0},
		{"timeout frees the only worker", 1, 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const others = 20
			release := make(chan struct{})
			hungErr := make(chan error, 1)
			var hungReturned atomic.Bool
			var done sync.WaitGroup
			done.Add(others)
			c := New(ReconcilerFunc(func(ctx context.Context, key string) (Result, error) {
				if key != "hung" {
					done.Done()
					return Result{}, nil
				}
				defer hungReturned.Store(true)
				select {
				case <-release:
					return Result{}, nil
				case <-ctx.Done():
					hungErr <- ctx.Err()
					return Result{}, ctx.Err()
				}
			}), Options{Name: "t", Workers: tt.workers, Timeout: tt.timeout,
				BaseBackoff: time.Hour, Logger: testLogger(t)})
			c.Enqueue("hung") // first in line, so it takes a worker first
			for i := range others {
				c.Enqueue(fmt.Sprint("k", i))
			}
			start(t, c)
			defer close(release)
			allDone := make(chan struct{})
			go func() { done.Wait(); close(allDone) }()
			receive(t, "the other keys", allDone)
			if tt.timeout == 0 {
				if hungReturned.Load() {
					t.Error("the hung reconcile returned before it was released")
				}
				return
			}
			if err := receive(t, "the hung reconcile's context to end", hungErr); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("hung reconcile's context ended with %v, want deadline exceeded", err)
			}
		})
	}
}

// Each kind of outcome is counted, logged, and followed by the right next
// step: a retry, a requeue, or nothing.
func TestOutcomes(t *testing.T) {
	cause := errors.New("cloud unreachable")
	tests := []struct {
		name    string
		script  []step
		calls   int                // reconciles until idle
		results map[string]float64 // skygo_controller_reconciles_total by result
		errors  float64
		logMsg  string // logged for the first reconcile
	}{
		{
			name:    "success",
			script:  nil,
			calls:   1,
			results: map[string]float64{resultSuccess: 1},
			logMsg:  "reconciled",
		},
		{
			name:    "requeue after",
			script:  []step{{res: Result{RequeueAfter: 5 * time.Millisecond}}},
			calls:   2,
			results: map[string]float64{resultRequeue: 1, resultSuccess: 1},
			logMsg:  "reconciled",
		},
		{
			name:    "error is retried",
			script:  []step{{err: cause}, {err: cause}},
			calls:   3,
			results: map[string]float64{resultError: 2, resultSuccess: 1},
			errors:  2,
			logMsg:  "reconcile failed",
		},
		{
			// If the hour were honoured, the test would time out.
			name:    "error with a delay retries on backoff, not the delay",
			script:  []step{{res: Result{RequeueAfter: time.Hour}, err: cause}},
			calls:   2,
			results: map[string]float64{resultError: 1, resultSuccess: 1},
			errors:  1,
			logMsg:  "reconcile returned both an error and RequeueAfter; retrying on backoff instead",
		},
		{
			name:    "terminal error is not retried",
			script:  []step{{err: Terminal(cause)}},
			calls:   1,
			results: map[string]float64{resultTerminal: 1},
			errors:  1,
			logMsg:  "reconcile failed, not retrying",
		},
		{
			name:    "wrapped terminal error is not retried",
			script:  []step{{err: fmt.Errorf("launch: %w", Terminal(cause))}},
			calls:   1,
			results: map[string]float64{resultTerminal: 1},
			errors:  1,
			logMsg:  "reconcile failed, not retrying",
		},
		{
			name:    "panic is recovered and retried",
			script:  []step{{panic: "nil map"}},
			calls:   2,
			results: map[string]float64{resultPanic: 1, resultSuccess: 1},
			errors:  1,
			logMsg:  "reconcile panicked",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, m := newRegistryMetrics(t)
			var logs logBuffer
			s := newScripted(map[string][]step{"k": tt.script})
			c := New(s, Options{Name: "t", Metrics: m, Logger: logs.logger(),
				BaseBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
			c.Enqueue("k")
			start(t, c)
			waitIdle(t, c)
			if n := s.count("k"); n != tt.calls {
				t.Errorf("%d reconciles, want %d", n, tt.calls)
			}
			for _, r := range results {
				got, ok := metric(t, reg, "skygo_controller_reconciles_total", map[string]string{"controller": "t", "result": r})
				if !ok {
					t.Errorf("no reconciles_total series for result %s", r)
				}
				if got != tt.results[r] {
					t.Errorf("reconciles_total{result=%s} = %v, want %v", r, got, tt.results[r])
				}
			}
			if got, _ := metric(t, reg, "skygo_controller_reconcile_errors_total", map[string]string{"controller": "t"}); got != tt.errors {
				t.Errorf("errors_total = %v, want %v", got, tt.errors)
			}
			if got, _ := metric(t, reg, "skygo_controller_reconcile_duration_seconds", map[string]string{"controller": "t"}); got != float64(tt.calls) {
				t.Errorf("duration histogram has %v samples, want %d", got, tt.calls)
			}
			if got, _ := metric(t, reg, "skygo_controller_reconciles_in_flight", map[string]string{"controller": "t"}); got != 0 {
				t.Errorf("in-flight gauge %v at idle, want 0", got)
			}
			var found bool
			for _, r := range logs.records(t) {
				if r["msg"] == tt.logMsg && r["key"] == "k" && r["controller"] == "t" {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("no log %q for key k", tt.logMsg)
			}
		})
	}
}

// Logs carry the controller, the key, the duration and the error; a
// panic's log carries the stack that panicked.
func TestLogFields(t *testing.T) {
	var logs logBuffer
	s := newScripted(map[string][]step{
		"boom": {{panic: "index out of range"}},
		"bad":  {{err: errors.New("ssh: connection refused")}},
	})
	c := New(s, Options{Name: "autostop", Logger: logs.logger(), BaseBackoff: time.Millisecond})
	c.Enqueue("boom")
	c.Enqueue("bad")
	c.Enqueue("fine")
	start(t, c)
	waitIdle(t, c)
	want := map[string]struct {
		msg, err, stack string
	}{
		"boom": {"reconcile panicked", "reconcile panicked: index out of range", "(*scripted).Reconcile"},
		"bad":  {"reconcile failed", "ssh: connection refused", ""},
		"fine": {"reconciled", "", ""},
	}
	for key, w := range want {
		var rec map[string]any
		for _, r := range logs.records(t) {
			if r["key"] == key && r["msg"] == w.msg {
				rec = r
				break
			}
		}
		if rec == nil {
			t.Errorf("%s: no log %q", key, w.msg)
			continue
		}
		if rec["controller"] != "autostop" {
			t.Errorf("%s: controller = %v", key, rec["controller"])
		}
		if _, ok := rec["duration"]; !ok {
			t.Errorf("%s: no duration in %v", key, rec)
		}
		if _, ok := rec["reconcile_id"]; !ok {
			t.Errorf("%s: no reconcile_id in %v", key, rec)
		}
		if w.err != "" && rec["err"] != w.err {
			t.Errorf("%s: err = %v, want %q", key, rec["err"], w.err)
		}
		if w.stack != "" {
			if st, _ := rec["stack"].(string); !strings.Contains(st, w.stack) {
				t.Errorf("%s: stack does not show %s:\n%s", key, w.stack, st)
			}
		}
	}
}

// The backoff grows with consecutive failures and starts over after a
// success or a requeue; each retry waits at least its backoff.
func TestBackoffHistory(t *testing.T) {
	fail := step{err: errors.New("transient")}
	tests := []struct {
		name   string
		script []step
		rounds int   // times the key is enqueued, each after the previous idle
		want   []int // failure counts the backoff was asked for, in order
		// In one round every gap between reconciles is a backoff wait.
		checkGaps bool
	}{
		{"grows", []step{fail, fail, fail}, 1, []int{1, 2, 3}, true},
		{"reset by success", []step{fail, fail, {}, fail}, 2, []int{1, 2, 1}, false},
		{"reset by requeue", []step{fail, {res: Result{RequeueAfter: time.Millisecond}}, fail}, 1, []int{1, 1}, false},
		{"reset by terminal error", []step{fail, {err: Terminal(errors.New("bad task"))}, fail}, 2, []int{1, 1}, false},
	}
	const base = 4 * time.Millisecond
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScripted(map[string][]step{"k": tt.script})
			c := New(s, Options{Name: "t", BaseBackoff: base, MaxBackoff: time.Second, Logger: testLogger(t)})
			c.jitter = func() float64 { return 0 } // each wait is exactly half the backoff
			var mu sync.Mutex
			var asked []int
			var waits []time.Duration
			orig := c.q.backoff
			c.q.backoff = func(n int) time.Duration {
				d := orig(n)
				mu.Lock()
				asked, waits = append(asked, n), append(waits, d)
				mu.Unlock()
				return d
			}
			start(t, c)
			for range tt.rounds {
				c.Enqueue("k")
				waitIdle(t, c)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(asked) != fmt.Sprint(tt.want) {
				t.Errorf("backoff asked for failures %v, want %v", asked, tt.want)
			}
			if !tt.checkGaps {
				return
			}
			// Waits only bound the gaps from below, as timers never fire
			// early.
			s.mu.Lock()
			defer s.mu.Unlock()
			starts := s.starts["k"]
			for i, w := range waits {
				if gap := starts[i+1].Sub(starts[i]); gap < w {
					t.Errorf("retry %d came %v after the failure, before its backoff %v", i+1, gap, w)
				}
			}
		})
	}
}

func TestEnqueueAfter(t *testing.T) {
	tests := []struct {
		name    string
		enqueue func(c *Controller)
		min     time.Duration // the reconcile comes no sooner
	}{
		{"delays", func(c *Controller) { c.EnqueueAfter("k", 20*time.Millisecond) }, 20 * time.Millisecond},
		{"zero delay is now", func(c *Controller) { c.EnqueueAfter("k", 0) }, 0},
		// idle (no timer left) shows the hour was dropped.
		{"earlier request wins", func(c *Controller) {
			c.EnqueueAfter("k", time.Hour)
			c.EnqueueAfter("k", 10*time.Millisecond)
		}, 10 * time.Millisecond},
		{"later request is merged into the earlier", func(c *Controller) {
			c.EnqueueAfter("k", 10*time.Millisecond)
			c.EnqueueAfter("k", time.Hour)
		}, 10 * time.Millisecond},
		{"enqueue now cancels the timer", func(c *Controller) {
			c.EnqueueAfter("k", time.Hour)
			c.Enqueue("k")
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScripted(nil)
			c := New(s, Options{Name: "t", Logger: testLogger(t)})
			start(t, c)
			t0 := time.Now()
			tt.enqueue(c)
			waitIdle(t, c)
			if n := s.count("k"); n != 1 {
				t.Fatalf("%d reconciles, want 1", n)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if gap := s.starts["k"][0].Sub(t0); gap < tt.min {
				t.Errorf("reconciled %v after the enqueue, want at least %v", gap, tt.min)
			}
		})
	}
}

// Run returns only once every in-flight reconcile has returned, having
// seen its context cancelled; keys still queued are not started.
func TestShutdown(t *testing.T) {
	const workers = 3
	started := make(chan struct{}, 10)
	var returned atomic.Int32
	var sawCancel atomic.Int32
	var begun atomic.Int32
	c := New(ReconcilerFunc(func(ctx context.Context, key string) (Result, error) {
		begun.Add(1)
		started <- struct{}{}
		<-ctx.Done()
		if errors.Is(ctx.Err(), context.Canceled) {
			sawCancel.Add(1)
		}
		time.Sleep(10 * time.Millisecond) // a reconcile finishing its write
		returned.Add(1)
		return Result{}, ctx.Err()
	}), Options{Name: "t", Workers: workers, Logger: testLogger(t)})
	for i := range 10 {
		c.Enqueue(fmt.Sprint("k", i))
	}
	stop := start(t, c)
	for range workers {
		receive(t, "workers to start", started)
	}
	stop() // cancels and waits for Run
	if n := returned.Load(); n != workers {
		t.Errorf("Run returned with %d of %d reconciles finished", n, workers)
	}
	if n := sawCancel.Load(); n != workers {
		t.Errorf("%d of %d reconciles saw context.Canceled", n, workers)
	}
	if n := begun.Load(); n != workers {
		t.Errorf("%d reconciles began, want %d: queued keys must not start after cancel", n, workers)
	}
	c.Enqueue("late") // must not block or panic
	c.EnqueueAfter("late", time.Millisecond)
	if err := c.Run(context.Background()); err == nil {
		t.Error("second Run returned nil")
	}
}

// After Run returns, nothing the controller started is left running: not
// its workers, not its resync loop, not its timers.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	var resyncs atomic.Int32
	s := newScripted(map[string][]step{
		"poll":  {{res: Result{RequeueAfter: time.Hour}}},         // leaves a timer
		"flaky": {{err: errors.New("x")}, {err: errors.New("x")}}, // leaves a backoff timer
		"boom":  {{panic: "boom"}},
	})
	c := New(s, Options{
		Name: "t", Workers: 8, Timeout: time.Second, Logger: testLogger(t),
		BaseBackoff: time.Hour,
		Resync: func(ctx context.Context) ([]string, error) {
			resyncs.Add(1)
			return []string{"poll", "flaky", "boom", "plain"}, nil
		},
		ResyncEvery: time.Millisecond,
	})
	c.EnqueueAfter("early", time.Hour)
	stop := start(t, c)
	waitFor(t, "several resyncs and reconciles", func() bool {
		return resyncs.Load() >= 5 && s.count("poll") >= 1 && s.count("flaky") >= 1 && s.count("boom") >= 1
	})
	stop()
	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after Run returned:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	if len(c.q.timers) != 0 {
		t.Errorf("%d timers left after Run returned", len(c.q.timers))
	}
}

func TestResync(t *testing.T) {
	t.Run("lists at start and then periodically", func(t *testing.T) {
		s := newScripted(nil)
		c := New(s, Options{Name: "t", Logger: testLogger(t), ResyncEvery: time.Millisecond,
			Resync: func(ctx context.Context) ([]string, error) { return []string{"a", "b"}, nil }})
		start(t, c)
		waitFor(t, "each key reconciled three times", func() bool { return s.count("a") >= 3 && s.count("b") >= 3 })
	})

	t.Run("ResyncEvery 0 lists once", func(t *testing.T) {
		s := newScripted(nil)
		var lists atomic.Int32
		listed := make(chan struct{})
		c := New(s, Options{Name: "t", Logger: testLogger(t),
			Resync: func(ctx context.Context) ([]string, error) {
				if lists.Add(1) == 1 {
					close(listed)
				}
				return []string{"a"}, nil
			}})
		stop := start(t, c)
		receive(t, "the first listing", listed)
		waitIdle(t, c)
		stop() // the resync loop is joined by Run, so no listing can follow
		if n := lists.Load(); n != 1 {
			t.Errorf("%d listings, want 1", n)
		}
		if n := s.count("a"); n != 1 {
			t.Errorf("%d reconciles, want 1", n)
		}
	})

	// The hour-long ResyncEvery would time the test out: a failed listing
	// must be retried on the (short) backoff.
	for name, fail := range map[string]func() ([]string, error){
		"failed listing is retried":    func() ([]string, error) { return nil, errors.New("database is locked") },
		"panicking listing is retried": func() ([]string, error) { panic("nil store") },
	} {
		t.Run(name, func(t *testing.T) {
			s := newScripted(nil)
			var lists atomic.Int32
			c := New(s, Options{Name: "t", Logger: testLogger(t), BaseBackoff: time.Millisecond,
				ResyncEvery: time.Hour,
				Resync: func(ctx context.Context) ([]string, error) {
					if lists.Add(1) <= 2 {
						return fail()
					}
					return []string{"a"}, nil
				}})
			start(t, c)
			waitFor(t, "the key of the third listing", func() bool { return s.count("a") == 1 })
		})
	}

	t.Run("resync leaves failing keys to their backoff", func(t *testing.T) {
		s := newScripted(map[string][]step{"bad": {{err: errors.New("x")}, {err: errors.New("x")}, {err: errors.New("x")}}})
		var lists atomic.Int32
		c := New(s, Options{Name: "t", Logger: testLogger(t), BaseBackoff: time.Hour,
			ResyncEvery: time.Millisecond,
			Resync: func(ctx context.Context) ([]string, error) {
				lists.Add(1)
				return []string{"bad", "good"}, nil
			}})
		start(t, c)
		// Wait until bad has failed and waits on its hour of backoff.
		waitFor(t, "bad to back off", func() bool {
			c.q.mu.Lock()
			defer c.q.mu.Unlock()
			return c.q.failures["bad"] > 0 && c.q.timers["bad"] != nil
		})
		n := s.count("bad")
		l := lists.Load()
		waitFor(t, "three more listings", func() bool { return lists.Load() >= l+3 })
		if got := s.count("bad"); got != n {
			t.Errorf("resync reconciled a backing-off key: %d reconciles, then %d", n, got)
		}
		waitFor(t, "good to be reconciled again by the listings", func() bool { return s.count("good") >= 2 })
		// An explicit enqueue means something changed: it goes through.
		c.Enqueue("bad")
		waitFor(t, "enqueued bad to be reconciled", func() bool { return s.count("bad") == n+1 })
	})
}

func TestLoggerInContext(t *testing.T) {
	var logs logBuffer
	c := New(ReconcilerFunc(func(ctx context.Context, key string) (Result, error) {
		Logger(ctx).Info("stopping idle cluster")
		return Result{}, nil
	}), Options{Name: "autostop", Logger: logs.logger()})
	c.Enqueue("my-cluster")
	start(t, c)
	waitIdle(t, c)
	var found bool
	for _, r := range logs.records(t) {
		if r["msg"] == "stopping idle cluster" {
			found = r["controller"] == "autostop" && r["key"] == "my-cluster" && r["reconcile_id"] != nil
			break
		}
	}
	if !found {
		t.Errorf("the reconcile's own log lacks controller, key or reconcile_id: %v", logs.records(t))
	}
	Logger(context.Background()).Info("outside a reconcile: discarded, not a nil logger")
}

func TestNewMetrics(t *testing.T) {
	_, m1 := newRegistryMetrics(t)
	_, m2 := newRegistryMetrics(t)
	if m1 == nil || m2 == nil {
		t.Fatal("nil metrics")
	}
	reg, _ := newRegistryMetrics(t)
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
}
