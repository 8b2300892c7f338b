package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Reconciler brings the object named by key to its desired state. It must be
// idempotent and must honour ctx: the runner cancels it at Options.Timeout
// and at shutdown.
type Reconciler interface {
	Reconcile(ctx context.Context, key string) (Result, error)
}

// ReconcilerFunc lets a plain function be a Reconciler.
type ReconcilerFunc func(ctx context.Context, key string) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, key string) (Result, error) {
	return f(ctx, key)
}

// Result says when a successful reconcile wants another look.
type Result struct {
	// RequeueAfter > 0 reconciles the key again after this long, for
	// polling progress the controller cannot be told about (a cluster
	// booting, an idle timer running out). 0 means done until the key is
	// enqueued again. It is ignored when the reconcile returns an error:
	// errors retry on the key's backoff instead.
	RequeueAfter time.Duration
}

// terminalError marks an error that retrying cannot fix.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// Terminal marks err as one no retry can fix (bad credentials, an invalid
// task): the runner logs and counts it and drops the key until it is
// enqueued again. Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or an error it wraps, was made by Terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}

// Options configure a Controller. Only Name is required.
type Options struct {
	// Name names the controller in logs and metric labels ("autostop",
	// "status-refresh"); unique within a server.
	Name string
	// Workers bounds how many keys are reconciled at once. Default 4.
	Workers int
	// Logger receives the controller's logs; nil discards them.
	Logger *slog.Logger
	// Metrics, if set, counts this controller's reconciles.
	Metrics *Metrics
	// A failing key waits between half and all of BaseBackoff·2^(n-1),
	// capped at MaxBackoff, before its n-th retry. Defaults 1 s and 5 min.
	BaseBackoff, MaxBackoff time.Duration
	// Timeout, if set, is the deadline of each reconcile's (and each
	// resync's) context, so a hung call cannot keep a worker forever. A
	// reconcile that ignores its context still keeps its worker.
	Timeout time.Duration
	// Resync, if set, lists every key; the controller enqueues them all
	// when it starts and again ResyncEvery after each listing ended (never
	// again if ResyncEvery is 0). This is what repairs missed events and
	// picks the work up again after a restart. A listing that fails is
	// retried on a backoff no longer than ResyncEvery.
	Resync      func(ctx context.Context) ([]string, error)
	ResyncEvery time.Duration
}

// Controller runs one Reconciler over a queue of keys; see the package doc
// for its guarantees. Create it with New.
type Controller struct {
	r       Reconciler
	o       Options
	log     *slog.Logger
	metrics *controllerMetrics
	q       *queue
	jitter  func() float64
	nextID  atomic.Uint64
	started atomic.Bool
}

// New creates a controller. Keys may be enqueued before Run; they are
// reconciled once it starts. New panics if r is nil or o.Name is empty,
// which are programming errors.
func New(r Reconciler, o Options) *Controller {
	if r == nil {
		panic("controller: nil Reconciler")
	}
	if o.Name == "" {
		panic("controller: Options.Name is required")
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	o.MaxBackoff = max(o.MaxBackoff, o.BaseBackoff)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := o.Metrics
	if m == nil {
		m = newMetrics()
	}
	c := &Controller{
		r:       r,
		o:       o,
		log:     log.With("controller", o.Name),
		metrics: m.forController(o.Name),
		jitter:  rand.Float64,
	}
	c.q = newQueue(c.backoff, func(n int) { c.metrics.depth.Set(float64(n)) })
	return c
}

func (c *Controller) backoff(n int) time.Duration {
	return backoff(n, c.o.BaseBackoff, c.o.MaxBackoff, c.jitter())
}

// Enqueue asks for a reconcile of key now. A key already due is not queued
// twice, and a key being reconciled is reconciled once more afterwards, so
// that the change that caused this call is seen. Enqueue bypasses the key's
// backoff: it means something changed. After Run has returned it does
// nothing.
func (c *Controller) Enqueue(key string) { c.q.add(key) }

// EnqueueAfter asks for a reconcile of key no later than d from now. It
// merges with other requests: if a reconcile of key is already due, or due
// sooner, that one answers this request too.
func (c *Controller) EnqueueAfter(key string, d time.Duration) { c.q.addAfter(key, d) }

// Run reconciles keys until ctx is cancelled, then waits until every
// in-flight reconcile (whose context is cancelled too) has returned, and
// returns nil. A Controller runs once; a second Run returns an error.
func (c *Controller) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return fmt.Errorf("controller %s: Run called twice", c.o.Name)
	}
	c.log.Info("controller started", "workers", c.o.Workers)
	var wg sync.WaitGroup
	// One dispatcher per controller, and a goroutine per reconcile while
	// it runs: an idle server parks one goroutine per controller, not
	// Workers of them (191 across the server's controllers). A slot is
	// taken before a key leaves the queue, so keys wait there, merging,
	// while every worker is busy.
	slots := make(chan struct{}, c.o.Workers)
	wg.Go(func() {
		for {
			slots <- struct{}{}
			key, ok := c.q.get()
			if !ok {
				return
			}
			wg.Go(func() {
				defer func() { <-slots }()
				c.reconcile(ctx, key)
			})
		}
	})
	if c.o.Resync != nil {
		wg.Go(func() { c.resyncLoop(ctx) })
	}
	<-ctx.Done()
	c.q.shutDown()
	wg.Wait()
	c.log.Info("controller stopped")
	return nil
}

type loggerKey struct{}

// Logger is the logger of the reconcile running in ctx, with the controller
// name, the key and a reconcile id attached. Outside a reconcile it discards.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// reconcile runs one reconcile of key, reports it and schedules what comes
// next.
func (c *Controller) reconcile(ctx context.Context, key string) {
	log := c.log.With("key", key, "reconcile_id", c.nextID.Add(1))
	rctx := context.WithValue(ctx, loggerKey{}, log)
	if c.o.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(rctx, c.o.Timeout)
		defer cancel()
	}
	start := time.Now()
	c.metrics.inFlight.Inc()
	res, stack, err := c.safeReconcile(rctx, key)
	c.metrics.inFlight.Dec()
	took := time.Since(start)
	c.metrics.duration.Observe(took.Seconds())

	var o outcome
	var result string
	switch {
	case stack != nil:
		result, o.retry = resultPanic, true
	case IsTerminal(err):
		result = resultTerminal
	case err != nil:
		result, o.retry = resultError, true
		if res.RequeueAfter > 0 {
			log.Warn("reconcile returned both an error and RequeueAfter; retrying on backoff instead", "requeue_after", res.RequeueAfter)
		}
	case res.RequeueAfter > 0:
		result, o.after = resultRequeue, res.RequeueAfter
	default:
		result = resultSuccess
	}
	failures, next := c.q.finish(key, o)
	c.metrics.reconciles[result].Inc()
	if err != nil {
		c.metrics.errors.Inc()
	}

	attrs := []any{"result", result, "duration", took}
	switch {
	case result == resultPanic:
		log.Error("reconcile panicked", append(attrs, "err", err, "failures", failures, "retry_in", next, "stack", string(stack))...)
	case err != nil && ctx.Err() != nil:
		// Cancelled by shutdown: expected, and picked up again by the
		// next process's resync.
		log.Info("reconcile interrupted by shutdown", append(attrs, "err", err)...)
	case result == resultTerminal:
		log.Error("reconcile failed, not retrying", append(attrs, "err", err)...)
	case err != nil:
		log.Error("reconcile failed", append(attrs, "err", err, "failures", failures, "retry_in", next)...)
	case result == resultRequeue:
		log.Debug("reconciled", append(attrs, "requeue_after", next)...)
	default:
		log.Debug("reconciled", attrs...)
	}
}

// safeReconcile turns a panic into an error plus the panicking goroutine's
// stack, so one bad key costs a retry rather than the server.
func (c *Controller) safeReconcile(ctx context.Context, key string) (res Result, stack []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			stack = debug.Stack()
			err = fmt.Errorf("reconcile panicked: %v", p)
		}
	}()
	res, err = c.r.Reconcile(ctx, key)
	return res, nil, err
}

// resyncLoop lists and enqueues every key now and then every ResyncEvery.
// It waits after a listing ends rather than ticking, so a slow listing
// cannot pile up behind itself.
func (c *Controller) resyncLoop(ctx context.Context) {
	failures := 0
	for {
		wait := c.o.ResyncEvery
		start := time.Now()
		n, err := c.resync(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			failures++
			retry := c.backoff(failures)
			if wait <= 0 || retry < wait {
				wait = retry
			}
			c.log.Error("resync failed", "err", err, "failures", failures, "retry_in", wait)
		default:
			failures = 0
			c.log.Debug("resynced", "keys", n, "duration", time.Since(start))
		}
		if wait <= 0 {
			return // a single listing was asked for, and it is done
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (c *Controller) resync(ctx context.Context) (n int, err error) {
	if c.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.Timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("resync panicked: %v\n%s", p, debug.Stack())
		}
	}()
	keys, err := c.o.Resync(ctx)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		c.q.addResync(k)
	}
	return len(keys), nil
}
