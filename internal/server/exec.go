package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/state"
)

// job is the in-memory handle of a request this process is executing.
type job struct {
	cancel context.CancelFunc
	done   chan struct{}
	// For an op that is cancelled when unfollowed: how many clients
	// stream or wait on the request now, and whether one ever did.
	// Guarded by executor.mu.
	cancelUnfollowed bool
	followers        int
	followed         bool
}

// executor runs requests on its pools. The database record is the
// truth; the job map only holds cancel funcs, completion signals and
// follower counts.
type executor struct {
	store   *state.Store
	log     *slog.Logger
	logDir  string
	metrics *metrics
	long    *pool
	short   *pool
	follow  *pool
	// writes admits request-record writes (create, start, finish) to the
	// database, fairly between users (see writeRecord).
	writes  *pool
	baseCtx context.Context
	// unfollowed cancels a request nobody follows any more, saying why.
	// It must record the outcome before cancelling (see Server.cancel).
	unfollowed func(id, why string)
	// attachGrace is how long a request cancelled when unfollowed waits
	// for its first follower: a client killed between submitting and
	// streaming never closes a stream the server could notice.
	attachGrace time.Duration

	mu   sync.Mutex
	jobs map[string]*job
	wg   sync.WaitGroup
}

// defaultAttachGrace is far more than a live client needs between its
// POST and its GET /api/stream, and short enough that a forgotten log
// tail does not hold its node process for long.
const defaultAttachGrace = 30 * time.Second

// defaultWorkers sizes the pools from CPUs and memory as SkyPilot does:
// about 0.4 GB per long worker and 0.3 GB per short one. SkyGo's workers
// are goroutines, not processes, so the memory figures are a budget for
// what operations may do rather than our own overhead. A local server
// caps long workers at 4 so a laptop stays usable.
func defaultWorkers(deploy bool) (long, short int) {
	cpus := runtime.NumCPU()
	memGB := availableMemoryGB()
	long = min(2*cpus, int(memGB*0.6/0.4))
	short = min(8*cpus, int(memGB*0.4/0.3))
	if !deploy {
		long = min(long, 4)
		short = min(short, 16)
	}
	return max(long, 1), max(short, 2)
}

// defaultFollowers sizes the pool of log followers. A follower mostly
// waits on a node process, so it costs a goroutine and that process, not
// a worker's memory budget; the bound only keeps a runaway client from
// exhausting processes.
func defaultFollowers(deploy bool) int {
	if deploy {
		return 256
	}
	return 64
}

// availableMemoryGB reads MemAvailable from /proc/meminfo; 4 GB if unknown.
func availableMemoryGB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 4
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				return kb / (1 << 20)
			}
		}
	}
	return 4
}

func (e *executor) jobFor(id string) *job {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.jobs[id]
}

// submit starts the request's goroutine; it waits for a worker slot.
func (e *executor) submit(rec *api.Request, o op.Op, req *op.Request, logFile *os.File) {
	ctx, cancel := context.WithCancel(e.baseCtx)
	j := &job{cancel: cancel, done: make(chan struct{}), cancelUnfollowed: o.CancelWhenUnfollowed}
	e.mu.Lock()
	e.jobs[rec.RequestID] = j
	e.mu.Unlock()
	p := e.short
	switch o.Schedule {
	case op.Long:
		p = e.long
	case op.Follow:
		p = e.follow
	}
	if o.CancelWhenUnfollowed {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			t := time.NewTimer(e.attachGrace)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
				e.mu.Lock()
				lonely := !j.followed
				e.mu.Unlock()
				if lonely {
					e.unfollowed(rec.RequestID, fmt.Sprintf("no client followed it within %s of its submission", e.attachGrace))
				}
			}
		}()
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer func() {
			cancel()
			logFile.Close()
			e.mu.Lock()
			delete(e.jobs, rec.RequestID)
			e.mu.Unlock()
			close(j.done)
		}()
		if p.acquire(ctx, rec.UserID) != nil {
			return // cancelled while queued
		}
		defer p.release(rec.UserID)
		e.run(ctx, rec, o, req, p)
	}()
}

func (e *executor) run(ctx context.Context, rec *api.Request, o op.Op, req *op.Request, p *pool) {
	pid := os.Getpid()
	// The DB may be shared with other goroutines' slow writes; use a
	// context that survives cancellation so status writes still land.
	bg := context.WithoutCancel(ctx)
	var ok bool
	err := e.writeRecord(bg, rec.UserID, func() (err error) {
		ok, err = e.store.SetRequestStatus(bg, rec.RequestID, []api.RequestStatus{api.RequestPending}, api.RequestRunning, state.RequestUpdate{PID: &pid})
		return err
	})
	if err != nil || !ok {
		if err != nil {
			e.log.Error("start request", "request_id", rec.RequestID, "err", err)
		}
		return // cancelled before it started
	}
	p.busy.Add(1)
	defer p.busy.Add(-1)
	start := time.Now()
	e.log.Info("request started", "request_id", rec.RequestID, "name", rec.Name, "user", rec.UserName, "pool", p.name)
	result, runErr := safeRun(ctx, o, req)

	to, upd := api.RequestSucceeded, state.RequestUpdate{}
	switch {
	case runErr == nil:
		b, err := json.Marshal(result)
		if err != nil {
			runErr = fmt.Errorf("encode result of %s: %w", rec.Name, err)
		} else {
			s := string(b)
			upd.ReturnValue = &s
		}
	}
	if runErr != nil {
		to = api.RequestFailed
		if ctx.Err() != nil && errors.Is(runErr, context.Canceled) {
			to = api.RequestCancelled
		}
		s := encodeError(runErr)
		upd.Error = &s
		// A failure's message lives in the request record, not the log:
		// clients print it on stderr after the log ends (`sky api status
		// -v` shows it too), so it is not printed twice or on stdout.
		if to == api.RequestCancelled {
			fmt.Fprintln(req.Log, "Request cancelled.")
		}
	}
	var moved bool
	err = e.writeRecord(bg, rec.UserID, func() (err error) {
		moved, err = e.store.SetRequestStatus(bg, rec.RequestID, []api.RequestStatus{api.RequestRunning}, to, upd)
		return err
	})
	if err != nil {
		e.log.Error("finish request", "request_id", rec.RequestID, "err", err)
	}
	final := to
	if !moved {
		// Someone else (cancel, shutdown) already decided the outcome.
		if r, err := e.store.GetRequest(bg, rec.RequestID); err == nil {
			final = r.Status
		}
	}
	e.metrics.finished(rec.Name, string(final), time.Since(start))
	e.log.Info("request finished", "request_id", rec.RequestID, "name", rec.Name, "status", final, "duration", time.Since(start).Round(time.Millisecond).String())
}

// recordWriteSlots is how many request-record writes may wait for the
// database at once. SQLite has one writer; database/sql hands its
// connection to a random waiter, so with a storm's hundreds of writes
// waiting, another user's write waited for a random share of them (about
// half a second each, three writes per request, on the benchmark's
// CPU-starved server). Through a small fair pool, a user waits behind a
// few writes at most; a few keep the writer busy.
const recordWriteSlots = 4

// writeRecord runs write (a request-record write) within the fair write
// pool.
func (e *executor) writeRecord(ctx context.Context, user string, write func() error) error {
	if err := e.writes.acquire(ctx, user); err != nil {
		return err
	}
	defer e.writes.release(user)
	return write()
}

// safeRun turns a panic in an operation into a FAILED request instead of
// a dead server.
func safeRun(ctx context.Context, o op.Op, req *op.Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &op.Error{Type: "InternalError", Message: fmt.Sprintf("operation %s panicked: %v", o.Name, p)}
		}
	}()
	if err := o.Permit(req); err != nil {
		return nil, err
	}
	return o.Run(ctx, req)
}

// encodeError is the request record's error field: {type, message, object}.
func encodeError(err error) string {
	typ := "SkyGoError"
	var te interface{ ErrorType() string }
	switch {
	case errors.As(err, &te):
		typ = te.ErrorType()
	case errors.Is(err, context.Canceled):
		typ = "RequestCancelled"
	}
	b, _ := json.Marshal(map[string]any{"type": typ, "message": err.Error(), "object": nil})
	return string(b)
}

// cancel stops a job of this process and waits (bounded) until its Run
// has returned, so that its processes are gone when the caller hears back.
func (e *executor) cancelAndWait(id string, wait time.Duration) {
	j := e.jobFor(id)
	if j == nil {
		return
	}
	j.cancel()
	select {
	case <-j.done:
	case <-time.After(wait):
		e.log.Warn("cancelled request still running", "request_id", id, "waited", wait)
	}
}

// followRequest registers a client that streams or waits on request id
// until it calls the returned func, saying whether the client went away
// (rather than seeing the request end). When the last follower of a
// request cancelled when unfollowed goes away, the request is cancelled:
// nobody is left to read what it produces.
func (e *executor) followRequest(id string) (leave func(gone bool)) {
	e.mu.Lock()
	j := e.jobs[id]
	if j == nil || !j.cancelUnfollowed {
		e.mu.Unlock()
		return func(bool) {}
	}
	j.followers++
	j.followed = true
	e.mu.Unlock()
	var once sync.Once
	return func(gone bool) {
		once.Do(func() {
			e.mu.Lock()
			j.followers--
			last := j.followers == 0
			e.mu.Unlock()
			if gone && last {
				e.unfollowed(id, "the client following it went away")
			}
		})
	}
}

// active lists the ids of jobs in this process.
func (e *executor) active() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.jobs))
	for id := range e.jobs {
		ids = append(ids, id)
	}
	return ids
}
