package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/state"
)

// schedPage is how many candidates one query of the scheduler reads.
const schedPage = 256

// reconcileScheduler grants launch slots. Jobs that already hold a
// cluster slot and want to launch again (a recovery, a pipeline's next
// task, a retry whose backoff is over) go first; then WAITING jobs, while
// fewer than the running limit hold one. Within each, higher priority
// first, then the older job. A WAITING job whose dependencies have not
// all succeeded is passed over; one whose dependency ended otherwise is
// cancelled.
func (e *Env) reconcileScheduler(ctx context.Context, _ string) (controller.Result, error) {
	counts, err := e.Store.CountManagedBySchedule(ctx)
	if err != nil {
		return controller.Result{}, err
	}
	launching := counts[api.ScheduleLaunching]
	holding := launching + counts[api.ScheduleAlive] + counts[api.ScheduleAliveWaiting] + counts[api.ScheduleAliveBackoff]
	if err := e.expireWaiting(ctx, holding); err != nil {
		return controller.Result{}, err
	}
	free := e.Limits.Launches - launching
	if free <= 0 {
		return controller.Result{}, nil // a launch that ends kicks the scheduler
	}
	// Read before the pass: a write during it makes the next pass differ.
	fp, err := e.Store.ManagedFingerprint(ctx)
	if err != nil {
		return controller.Result{}, err
	}
	e.mu.Lock()
	memo := e.schedMemo
	e.mu.Unlock()
	clk := e.clock()
	if !memo.mustScan(fp, clk) {
		return controller.Result{}, nil
	}
	pass := schedMemo{fingerprint: fp, scannedAt: clk, exhaustive: true}
	t0 := unixSeconds(clk)
	var soonest float64
	claim := func(j *state.ManagedJob) (bool, error) {
		from := j.ScheduleState
		n, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			if n.ScheduleState != from || n.Cancel != nil {
				return nil, state.ErrNoChange
			}
			n.ScheduleState = api.ScheduleLaunching
			return nil, nil
		})
		if err != nil {
			return false, err
		}
		if n.ScheduleState != api.ScheduleLaunching {
			return false, nil
		}
		free--
		e.poke(j.JobID)
		return true, nil
	}
	// Live jobs wanting a launch: few (bounded by the running limit).
	live, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{
		ScheduleStates: []string{api.ScheduleAliveWaiting, api.ScheduleAliveBackoff}, Order: "sched"})
	if err != nil {
		return controller.Result{}, err
	}
	for _, j := range live {
		if free <= 0 {
			pass.exhaustive = false
			break
		}
		if j.Cancel != nil {
			e.poke(j.JobID)
			continue
		}
		if next := nextTry(j); next > t0 {
			if soonest == 0 || next < soonest {
				soonest = next
			}
			continue
		}
		if _, err := claim(j); err != nil {
			return controller.Result{}, err
		}
	}
	// WAITING jobs, page by page in claim order; a dependency's status
	// is read once per pass however many jobs wait for it.
	deps := map[int]*state.ManagedJob{}
	var after *state.ClaimCursor
	for {
		if free <= 0 || holding >= e.Limits.Running {
			pass.exhaustive = false
			break
		}
		page, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{
			ScheduleStates: []string{api.ScheduleWaiting}, Order: "sched", Limit: schedPage, ClaimAfter: after})
		if err != nil {
			return controller.Result{}, err
		}
		for _, j := range page {
			if free <= 0 || holding >= e.Limits.Running {
				pass.exhaustive = false
				break
			}
			if j.Cancel != nil || e.pastSchedulingDeadline(ctx, j) {
				continue // the cancel finishes it
			}
			pass.noteDeadline(j)
			ok, err := e.depsReady(ctx, j, deps)
			if err != nil {
				return controller.Result{}, err
			}
			if !ok {
				continue
			}
			claimed, err := claim(j)
			if err != nil {
				return controller.Result{}, err
			}
			if claimed {
				holding++
			}
		}
		if len(page) < schedPage {
			break
		}
		after = state.ClaimCursorOf(page[len(page)-1])
	}
	if soonest > 0 {
		pass.exhaustive = false // a backoff ends: look again then
	}
	e.mu.Lock()
	e.schedMemo = pass
	e.mu.Unlock()
	if soonest > 0 {
		return controller.Result{RequeueAfter: time.Duration((soonest - t0) * float64(time.Second))}, nil
	}
	return controller.Result{}, nil
}

// nextTry is when a job in backoff may launch again (0: now).
func nextTry(j *state.ManagedJob) float64 {
	var next float64
	for _, t := range j.Tasks {
		if wantsLaunch(t) && t.NextTryAt > next {
			next = t.NextTryAt
		}
	}
	return next
}

// depsReady says whether every job j depends on has succeeded. One that
// ended otherwise cancels j, as the reference says.
func (e *Env) depsReady(ctx context.Context, j *state.ManagedJob, cache map[int]*state.ManagedJob) (bool, error) {
	if len(j.DependsOn) == 0 {
		return true, nil
	}
	var missing []int
	for _, id := range j.DependsOn {
		if _, ok := cache[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		found, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{IDs: missing})
		if err != nil {
			return false, err
		}
		for _, id := range missing {
			cache[id] = nil
		}
		for _, d := range found {
			cache[d.JobID] = d
		}
	}
	ready := true
	for _, id := range j.DependsOn {
		d := cache[id]
		if d == nil {
			ready = false // gone: never runs
			continue
		}
		st := d.JobStatus()
		switch {
		case st == api.ManagedSucceeded && d.ScheduleState == api.ScheduleDone:
		case api.ManagedTerminal(st) && st != api.ManagedSucceeded:
			reason := fmt.Sprintf("dependency job %d ended %s", d.JobID, st)
			return false, e.requestCancel(ctx, j.JobID, state.ManagedCancel{At: e.now(), Reason: reason})
		default:
			ready = false
		}
	}
	return ready, nil
}

// deadlineScanEvery is how often WAITING jobs the scheduler does not
// reach (no slot is free) are checked for a passed scheduling deadline.
const deadlineScanEvery = 5 * time.Second

// expireWaiting cancels the WAITING jobs whose scheduling deadline has
// passed while every running slot was taken (the claim loop, which also
// checks it, does not run then).
func (e *Env) expireWaiting(ctx context.Context, holding int) error {
	if holding < e.Limits.Running {
		return nil
	}
	e.mu.Lock()
	clk := e.clock()
	due := clk.Sub(e.lastDeadlineScan) >= deadlineScanEvery
	if due {
		e.lastDeadlineScan = clk
	}
	e.mu.Unlock()
	if !due {
		return nil
	}
	var after *state.ClaimCursor
	for {
		page, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{
			ScheduleStates: []string{api.ScheduleWaiting}, Order: "sched", Limit: schedPage, ClaimAfter: after})
		if err != nil {
			return err
		}
		for _, j := range page {
			e.pastSchedulingDeadline(ctx, j)
		}
		if len(page) < schedPage {
			return nil
		}
		after = state.ClaimCursorOf(page[len(page)-1])
	}
}

// schedFullPassEvery bounds how long the scheduler trusts an unchanged
// fingerprint: a full pass at least this often, whatever it says.
const schedFullPassEvery = 30 * time.Second

// schedMemo is what the scheduler's last pass saw, so that the next one
// can tell whether anything it would decide differently has happened.
// Without it, every pass (one a second, and one per kick) read and
// decoded every WAITING job: with 10,000 jobs waiting on a dependency
// that took the server's CPU whole.
type schedMemo struct {
	fingerprint state.ManagedFingerprint
	scannedAt   time.Time
	// exhaustive: the pass looked at every waiting job and claimed what
	// it could, rather than stopping for want of a slot or leaving a
	// backoff to end.
	exhaustive bool
	// deadline is the soonest scheduling deadline among the jobs it
	// passed over (unix seconds; 0: none).
	deadline float64
}

// mustScan decides whether a pass has to read the waiting jobs: it may
// skip them only after an exhaustive pass over the same rows (no job
// added, changed or removed since, and so no dependency either), before
// a passed-over job's scheduling deadline, and within
// schedFullPassEvery.
func (m schedMemo) mustScan(fp state.ManagedFingerprint, at time.Time) bool {
	switch {
	case !m.exhaustive, m.fingerprint != fp:
		return true
	case at.Sub(m.scannedAt) >= schedFullPassEvery, at.Before(m.scannedAt):
		return true
	case m.deadline > 0 && float64(at.UnixNano())/1e9 >= m.deadline:
		return true
	}
	return false
}

// noteDeadline keeps the soonest scheduling deadline of a job the pass
// looked at.
func (m *schedMemo) noteDeadline(j *state.ManagedJob) {
	if d := j.SchedulingDeadline; d > 0 && (m.deadline == 0 || d < m.deadline) {
		m.deadline = d
	}
}
