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
	s := slotsOf(counts, e.Limits)
	if err := e.expireWaiting(ctx, s); err != nil {
		return controller.Result{}, err
	}
	if !s.launch() {
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
		s.free--
		e.poke(j.JobID)
		return true, nil
	}
	// Live jobs wanting a launch: few (bounded by the running limit).
	live, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{
		ScheduleStates: []string{api.ScheduleAliveWaiting, api.ScheduleAliveBackoff}, Order: "sched"})
	if err != nil {
		return controller.Result{}, err
	}
live:
	for _, j := range live {
		switch a, next := admitLive(j, s, t0); a {
		case admitNoSlot:
			pass.exhaustive = false
			break live
		case admitCancelled:
			e.poke(j.JobID)
		case admitBackoff:
			if soonest == 0 || next < soonest {
				soonest = next
			}
		case admitClaim:
			if _, err := claim(j); err != nil {
				return controller.Result{}, err
			}
		}
	}
	// WAITING jobs, page by page in claim order; a dependency's status
	// is read once per pass however many jobs wait for it.
	deps := map[int]*state.ManagedJob{}
	var after *state.ClaimCursor
	for {
		if !s.start() {
			pass.exhaustive = false
			break
		}
		page, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{
			ScheduleStates: []string{api.ScheduleWaiting}, Order: "sched", Limit: schedPage, ClaimAfter: after})
		if err != nil {
			return controller.Result{}, err
		}
	waiting:
		for _, j := range page {
			switch admitWaiting(j, s, t0) {
			case admitNoSlot:
				pass.exhaustive = false
				break waiting
			case admitCancelled:
				continue // the cancel finishes it
			case admitExpired:
				if e.expire(ctx, j, t0) {
					continue // the cancel finishes it
				}
			}
			pass.noteDeadline(j)
			ok, err := e.depsReady(ctx, j, deps, t0)
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
				s.holding++
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

// slots is what the limits leave to one scheduler pass.
type slots struct {
	// free is how many more jobs may begin LAUNCHING.
	free int
	// holding is how many jobs hold a cluster slot (launching or alive),
	// of running, the running limit.
	holding, running int
}

// slotsOf counts the slots the jobs in each schedule state leave.
func slotsOf(counts map[string]int, l Limits) slots {
	launching := counts[api.ScheduleLaunching]
	return slots{free: l.Launches - launching, running: l.Running,
		holding: launching + counts[api.ScheduleAlive] + counts[api.ScheduleAliveWaiting] + counts[api.ScheduleAliveBackoff]}
}

// launch: a job that already holds a cluster slot may launch.
func (s slots) launch() bool { return s.free > 0 }

// start: a WAITING job may launch (and so take a cluster slot).
func (s slots) start() bool { return s.free > 0 && s.holding < s.running }

// admission is the scheduler's verdict on one job that wants to launch.
type admission int

const (
	// admitClaim: move it to LAUNCHING.
	admitClaim admission = iota
	// admitNoSlot: a limit is reached; the pass ends here.
	admitNoSlot
	// admitCancelled: a cancel is pending; the job controller finishes it.
	admitCancelled
	// admitBackoff: its last launch failed and its backoff has not ended.
	admitBackoff
	// admitExpired: it did not start by its scheduling deadline; it is
	// cancelled.
	admitExpired
)

// admitLive decides on a job that holds a cluster slot and wants to
// launch again (a recovery, a pipeline's next task, a retry): it needs a
// launch slot and its backoff over (next: when it ends).
func admitLive(j *state.ManagedJob, s slots, now float64) (a admission, next float64) {
	switch {
	case !s.launch():
		return admitNoSlot, 0
	case j.Cancel != nil:
		return admitCancelled, 0
	}
	if next := nextTry(j); next > now {
		return admitBackoff, next
	}
	return admitClaim, 0
}

// admitWaiting decides on a WAITING job, before its dependencies: it
// needs a launch slot and room under the running limit, and expires if
// it has not started by its job.wait_for_scheduling_timeout.
func admitWaiting(j *state.ManagedJob, s slots, now float64) admission {
	switch {
	case !s.start():
		return admitNoSlot
	case j.Cancel != nil:
		return admitCancelled
	case deadlinePassed(j, now):
		return admitExpired
	}
	return admitClaim
}

// deadlinePassed says whether a job has not started by its
// job.wait_for_scheduling_timeout (a later recovery does not re-arm it).
func deadlinePassed(j *state.ManagedJob, now float64) bool {
	return j.SchedulingDeadline != 0 && !j.Started() && now >= j.SchedulingDeadline && j.Cancel == nil
}

// depsVerdict says whether every job j depends on (in deps, nil: gone)
// has succeeded; cancel is why j is cancelled instead, when one ended
// otherwise (as the reference says). A job that is gone never runs, so
// j waits.
func depsVerdict(j *state.ManagedJob, deps map[int]*state.ManagedJob) (ready bool, cancel string) {
	ready = true
	for _, id := range j.DependsOn {
		d := deps[id]
		if d == nil {
			ready = false
			continue
		}
		st := d.JobStatus()
		switch {
		case st == api.ManagedSucceeded && d.ScheduleState == api.ScheduleDone:
		case api.ManagedTerminal(st) && st != api.ManagedSucceeded:
			return false, fmt.Sprintf("dependency job %d ended %s", d.JobID, st)
		default:
			ready = false
		}
	}
	return ready, ""
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

// depsReady reads the jobs j depends on into cache (once per pass) and
// says whether j may run (depsVerdict), cancelling it if it never will.
func (e *Env) depsReady(ctx context.Context, j *state.ManagedJob, cache map[int]*state.ManagedJob, now float64) (bool, error) {
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
	ready, cancel := depsVerdict(j, cache)
	if cancel != "" {
		return false, e.requestCancel(ctx, j.JobID, state.ManagedCancel{At: now, Reason: cancel})
	}
	return ready, nil
}

// deadlineScanEvery is how often WAITING jobs the scheduler does not
// reach (no slot is free) are checked for a passed scheduling deadline.
const deadlineScanEvery = 5 * time.Second

// expireWaiting cancels the WAITING jobs whose scheduling deadline has
// passed while every running slot was taken (the claim loop, which also
// checks it, does not run then).
func (e *Env) expireWaiting(ctx context.Context, s slots) error {
	if s.holding < s.running {
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
