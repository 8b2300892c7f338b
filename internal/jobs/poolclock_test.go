package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/state"
)

// TestDecideTargetIsDueByTheClock: the pool autoscaler decides the first
// time, then once its interval passed since the last decision (20 s, 5 s
// at a target of 0, or the Env's Timings), and counts its delays in
// those intervals; a fixed-size pool's target is its count at any time.
func TestDecideTargetIsDueByTheClock(t *testing.T) {
	auto := api.PoolPolicy{MinWorkers: intp(0), MaxWorkers: intp(3), QueueLengthThreshold: 1, UpscaleDelaySeconds: 40}
	fixed := api.PoolPolicy{Workers: intp(2)}
	for _, c := range []struct {
		name               string
		pol                api.PoolPolicy
		tm                 Timings
		target, up         int
		last, at           float64
		queued             int
		changed            bool
		wantTarget, wantUp int
		wantLast           float64
	}{
		{"never decided: at once, from zero", auto, Timings{}, 0, 0, 0, 1000, 2, true, 1, 0, 1000},
		{"19 s after: not due", auto, Timings{}, 1, 0, 1000, 1019, 3, false, 1, 0, 1000},
		{"20 s after: due, the upscale delay counts", auto, Timings{}, 1, 0, 1000, 1020, 3, true, 1, 1, 1020},
		{"third decision wanting more: > 40/20 taken", auto, Timings{}, 1, 2, 1000, 1020, 3, true, 2, 0, 1020},
		{"target 0: due after 5 s", auto, Timings{}, 0, 0, 1000, 1005, 1, true, 1, 0, 1005},
		{"target 0: not 4 s after", auto, Timings{}, 0, 0, 1000, 1004, 1, false, 0, 0, 1000},
		{"a 10 s interval: due 10 s after", auto, Timings{PoolDecideEvery: 10 * time.Second}, 1, 0, 1000, 1010, 3, true, 1, 1, 1010},
		{"a 10 s interval: 40 s of delay is > 4 decisions", auto, Timings{PoolDecideEvery: 10 * time.Second}, 1, 3, 1000, 1010, 3, true, 1, 4, 1010},
		{"a 10 s interval: the fifth is taken", auto, Timings{PoolDecideEvery: 10 * time.Second}, 1, 4, 1000, 1010, 3, true, 2, 0, 1010},
		{"a 1 s from-zero interval", auto, Timings{PoolDecideFromZero: time.Second}, 0, 0, 1000, 1001, 1, true, 1, 0, 1001},
		{"fixed size: its count, whenever", fixed, Timings{}, 0, 0, 1000, 1001, 0, true, 2, 0, 1000},
		{"fixed size at its count: nothing", fixed, Timings{}, 2, 0, 1000, 1001, 5, false, 2, 0, 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testPool(c.target, 1, "")
			p.Specs = map[int]*state.PoolSpecVersion{1: {Policy: c.pol}}
			p.UpCount, p.LastDecisionAt = c.up, c.last
			changed := decideTarget(p, c.queued, c.at, c.tm)
			if changed != c.changed || p.Target != c.wantTarget || p.UpCount != c.wantUp || p.LastDecisionAt != c.wantLast {
				t.Fatalf("changed %v target %d up %d last %v; want %v %d %d %v",
					changed, p.Target, p.UpCount, p.LastDecisionAt, c.changed, c.wantTarget, c.wantUp, c.wantLast)
			}
		})
	}
}

// poolFixture is a pool in a real store whose controller runs at the
// instant clock says.
type poolFixture struct {
	t     *testing.T
	ctx   context.Context
	st    *state.Store
	e     *Env
	clock time.Time
}

func newPoolFixture(t *testing.T, tm Timings, p *state.Pool) *poolFixture {
	t.Helper()
	f := &poolFixture{t: t, ctx: context.Background(), st: testStore(t), clock: time.Unix(1_800_000_000, 0)}
	f.e = &Env{Home: t.TempDir(), Store: f.st, Timings: tm, Clock: func() time.Time { return f.clock }}
	if err := f.st.CreatePool(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	return f
}

// queue adds n pool jobs waiting for a worker.
func (f *poolFixture) queue(pool string, n int) []*state.ManagedJob {
	f.t.Helper()
	var js []*state.ManagedJob
	for range n {
		js = append(js, &state.ManagedJob{Name: "j", Pool: pool, ScheduleState: api.ScheduleAliveBackoff,
			Tasks: []*state.ManagedTask{{Name: "j", Status: api.ManagedPending}}})
	}
	if err := f.st.CreateManagedJobs(f.ctx, js, []byte(`{}`)); err != nil {
		f.t.Fatal(err)
	}
	return js
}

// step runs the pool controller at t0+at and returns the pool after it.
func (f *poolFixture) step(name string, at time.Duration) (controller.Result, *state.Pool) {
	f.t.Helper()
	f.clock = time.Unix(1_800_000_000, 0).Add(at)
	res, err := f.e.reconcilePool(f.ctx, name)
	if err != nil {
		f.t.Fatalf("at +%s: %v", at, err)
	}
	p, err := f.st.GetPool(f.ctx, name)
	if err != nil {
		f.t.Fatalf("at +%s: %v", at, err)
	}
	return res, p
}

// TestPoolAutoscalerDecidesByItsClock: the pool controller's
// queue-length autoscaler takes its decisions when the Env's clock says
// one is due, and its upscale delay runs in decisions: a pool at zero
// with queued jobs gets a worker at once; with more queued than the
// threshold, the second worker comes on the second due decision wanting
// it (upscale_delay_seconds 20 = one interval), not on a look between.
func TestPoolAutoscalerDecidesByItsClock(t *testing.T) {
	t.Parallel()
	pol := api.PoolPolicy{MinWorkers: intp(0), MaxWorkers: intp(3), QueueLengthThreshold: 1, UpscaleDelaySeconds: 20}
	f := newPoolFixture(t, Timings{}, &state.Pool{RowMeta: state.RowMeta{Name: "p"}, SpecVersion: 1,
		Specs: map[int]*state.PoolSpecVersion{1: {Policy: pol}}})
	f.queue("p", 3)
	t0 := float64(f.clock.Unix())
	res, p := f.step("p", 0)
	if p.Target != 1 || len(p.Workers) != 1 || p.LastDecisionAt != t0 || p.Workers[0].CreatedAt != t0 {
		t.Fatalf("from zero with 3 queued: target %d, workers %d, decided at %v; want 1 worker at once, at %v", p.Target, len(p.Workers), p.LastDecisionAt, t0)
	}
	if res.RequeueAfter != 5*time.Second {
		t.Fatalf("requeue after %s, want the resync's 5s (under the 20 s interval)", res.RequeueAfter)
	}
	for _, c := range []struct {
		at           time.Duration
		target, up   int
		lastDecision time.Duration
	}{
		{19 * time.Second, 1, 0, 0},                // not due
		{20 * time.Second, 1, 1, 20 * time.Second}, // wanting more: 1 of > 1
		{39 * time.Second, 1, 1, 20 * time.Second}, // not due
		{40 * time.Second, 2, 0, 40 * time.Second}, // taken
		{45 * time.Second, 2, 0, 40 * time.Second}, // not due
	} {
		_, p = f.step("p", c.at)
		if p.Target != c.target || p.UpCount != c.up || p.LastDecisionAt != t0+c.lastDecision.Seconds() || len(p.Workers) != c.target {
			t.Fatalf("at +%s: target %d up %d decided at +%vs, %d workers; want %d, %d, +%s, %d workers",
				c.at, p.Target, p.UpCount, p.LastDecisionAt-t0, len(p.Workers), c.target, c.up, c.lastDecision, c.target)
		}
	}
}

// TestPoolDownWaitsForItsJobsByTheClock: `pool down` asks the pool's
// jobs to cancel, then waits for them until PoolDownJobsWait passed on
// the Env's clock (300 s by default) before the workers are retired.
func TestPoolDownWaitsForItsJobsByTheClock(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		tm      Timings
		at      time.Duration
		retired bool
	}{
		{"default: 299 s after, still waiting", Timings{}, 299 * time.Second, false},
		{"default: 300 s after, the workers go", Timings{}, 300 * time.Second, true},
		{"a 10 s wait: 9 s after, still waiting", Timings{PoolDownJobsWait: 10 * time.Second}, 9 * time.Second, false},
		{"a 10 s wait: 10 s after, the workers go", Timings{PoolDownJobsWait: 10 * time.Second}, 10 * time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newPoolFixture(t, c.tm, &state.Pool{RowMeta: state.RowMeta{Name: "p"}, SpecVersion: 1,
				Specs:   map[int]*state.PoolSpecVersion{1: {Policy: api.PoolPolicy{Workers: intp(1)}}},
				Workers: []*state.PoolWorker{worker(1, 1, api.WorkerReady)}, Down: &state.PoolDown{By: "alice"}})
			js := f.queue("p", 1)
			t0 := float64(f.clock.Unix())
			res, p := f.step("p", 0)
			if p.Down.JobsCancelledAt != t0 || p.Worker(1).Status != api.WorkerReady || res.RequeueAfter != 2*time.Second {
				t.Fatalf("first step: jobs cancelled at %v, worker %s, requeue %s; want t0, READY, 2s", p.Down.JobsCancelledAt, p.Worker(1).Status, res.RequeueAfter)
			}
			j, err := f.st.GetManagedJob(f.ctx, js[0].JobID, false)
			if err != nil || j.Cancel == nil || j.Cancel.At != t0 || j.Cancel.By != "alice" {
				t.Fatalf("the pool's job: %+v %v; want its cancel asked at t0 by alice", j, err)
			}
			_, p = f.step("p", c.at)
			if got := p.Worker(1).Status == api.WorkerShuttingDown; got != c.retired {
				t.Fatalf("at +%s: worker %s; retired %v, want %v", c.at, p.Worker(1).Status, got, c.retired)
			}
		})
	}
}

// TestWorkerRetryGapRunsOnTheClock: a worker whose launch failed waits
// out its retry gap on the Env's clock before its next attempt begins.
func TestWorkerRetryGapRunsOnTheClock(t *testing.T) {
	t.Parallel()
	w := worker(1, 1, api.WorkerPending)
	w.Tries, w.NextTryAt = 1, 1_800_000_030
	f := newPoolFixture(t, Timings{}, &state.Pool{RowMeta: state.RowMeta{Name: "p"}, SpecVersion: 1,
		Specs: map[int]*state.PoolSpecVersion{1: {Policy: api.PoolPolicy{Workers: intp(1)}}}, Workers: []*state.PoolWorker{w}})
	for _, at := range []time.Duration{0, 29 * time.Second} {
		f.clock = time.Unix(1_800_000_000, 0).Add(at)
		res, err := f.e.reconcileWorker(f.ctx, "p/1")
		if err != nil {
			t.Fatal(err)
		}
		p, err := f.st.GetPool(f.ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		if want := 30*time.Second - at; res.RequeueAfter != want || p.Worker(1).Status != api.WorkerPending || p.Worker(1).Attempt != 0 {
			t.Fatalf("at +%s: requeue after %s, worker %s attempt %d; want %s, still PENDING, no attempt", at, res.RequeueAfter, p.Worker(1).Status, p.Worker(1).Attempt, want)
		}
	}
}
