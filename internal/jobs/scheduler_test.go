package jobs

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/state"
)

func TestSchedulerSkipsOnlyAfterAnExhaustivePassOverTheSameRows(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	fp := state.ManagedFingerprint{Count: 10001, MaxID: 10001, Versions: 10005}
	seen := schedMemo{fingerprint: fp, scannedAt: t0, exhaustive: true}
	withDeadline := seen
	withDeadline.deadline = float64(t0.Unix()) + 5
	for _, c := range []struct {
		name string
		memo schedMemo
		fp   state.ManagedFingerprint
		at   time.Time
		want bool
	}{
		{"first pass (no memo)", schedMemo{}, fp, at(0), true},
		{"nothing changed", seen, fp, at(1), false},
		{"nothing changed, just before a full pass is due", seen, fp, at(29.9), false},
		{"a full pass is due however quiet", seen, fp, at(30), true},
		{"clock went back", seen, fp, at(-1), true},
		{"a job was added", seen, state.ManagedFingerprint{Count: 10002, MaxID: 10002, Versions: 10006}, at(1), true},
		{"a job (a dependency) changed", seen, state.ManagedFingerprint{Count: 10001, MaxID: 10001, Versions: 10006}, at(1), true},
		{"a job was removed", seen, state.ManagedFingerprint{Count: 10000, MaxID: 10001, Versions: 10004}, at(1), true},
		{"the last pass ran out of slots", schedMemo{fingerprint: fp, scannedAt: t0}, fp, at(1), true},
		{"before a passed-over job's scheduling deadline", withDeadline, fp, at(4), false},
		{"a passed-over job's scheduling deadline came", withDeadline, fp, at(5), true},
	} {
		if got := c.memo.mustScan(c.fp, c.at); got != c.want {
			t.Errorf("%s: mustScan = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSchedMemoKeepsTheSoonestDeadline(t *testing.T) {
	var m schedMemo
	for _, d := range []float64{0, 50, 20, 0, 30} {
		m.noteDeadline(&state.ManagedJob{SchedulingDeadline: d})
	}
	if m.deadline != 20 {
		t.Fatalf("deadline = %v, want 20 (the soonest; 0 means none)", m.deadline)
	}
}

// TestSchedulerPassesOverAnUnchangedQueueOnce: jobs waiting on a running
// dependency, more than one page of them, are read once; the next pass
// over the same rows is skipped; once the dependency succeeds every one
// of them is claimed, across the pages.
func TestSchedulerPassesOverAnUnchangedQueueOnce(t *testing.T) {
	ctx := context.Background()
	st, err := state.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = schedPage + 44
	e := &Env{Store: st, Limits: Limits{Launches: 1000, Running: 1000}, inflight: map[int]context.CancelFunc{}}
	dep := &state.ManagedJob{Name: "dep", ScheduleState: api.ScheduleAlive,
		Tasks: []*state.ManagedTask{{Name: "dep", Status: api.ManagedRunning}}}
	if err := st.CreateManagedJobs(ctx, []*state.ManagedJob{dep}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	var waiting []*state.ManagedJob
	for i := range n {
		waiting = append(waiting, &state.ManagedJob{Name: "w", ScheduleState: api.ScheduleWaiting, Priority: i % 3, DependsOn: []int{dep.JobID},
			Tasks: []*state.ManagedTask{{Name: "w", Status: api.ManagedPending}}})
	}
	if err := st.CreateManagedJobs(ctx, waiting, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	pass := func() schedMemo {
		t.Helper()
		if _, err := e.reconcileScheduler(ctx, schedulerKey); err != nil {
			t.Fatal(err)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.schedMemo
	}
	first := pass()
	if !first.exhaustive || first.scannedAt.IsZero() {
		t.Fatalf("first pass: %+v, want an exhaustive scan", first)
	}
	if again := pass(); again.scannedAt != first.scannedAt {
		t.Fatalf("a pass over the same rows read them again (%v, then %v)", first.scannedAt, again.scannedAt)
	}
	if _, err := st.UpdateManagedJob(ctx, dep.JobID, func(j *state.ManagedJob) ([]state.ManagedEventIn, error) {
		j.ScheduleState = api.ScheduleDone
		j.Tasks[0].Status = api.ManagedSucceeded
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if after := pass(); after.scannedAt == first.scannedAt {
		t.Fatal("the dependency succeeded, and the next pass did not look")
	}
	counts, err := st.CountManagedBySchedule(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[api.ScheduleLaunching] != n || counts[api.ScheduleWaiting] != 0 {
		t.Fatalf("after the dependency succeeded: %v, want all %d LAUNCHING", counts, n)
	}
}

func TestSlotsOf(t *testing.T) {
	counts := map[string]int{api.ScheduleWaiting: 500, api.ScheduleLaunching: 3, api.ScheduleAlive: 10,
		api.ScheduleAliveWaiting: 2, api.ScheduleAliveBackoff: 1, api.ScheduleDone: 99}
	for _, c := range []struct {
		limits        Limits
		want          slots
		launch, start bool
	}{
		{Limits{Launches: 8, Running: 100}, slots{free: 5, holding: 16, running: 100}, true, true},
		{Limits{Launches: 3, Running: 100}, slots{free: 0, holding: 16, running: 100}, false, false}, // every launch slot taken
		{Limits{Launches: 8, Running: 16}, slots{free: 5, holding: 16, running: 16}, true, false},    // a recovery may launch, a new job may not
		{Limits{Launches: 8, Running: 17}, slots{free: 5, holding: 16, running: 17}, true, true},
	} {
		s := slotsOf(counts, c.limits)
		if s != c.want || s.launch() != c.launch || s.start() != c.start {
			t.Errorf("limits %+v: slots %+v (launch %v, start %v), want %+v (launch %v, start %v)",
				c.limits, s, s.launch(), s.start(), c.want, c.launch, c.start)
		}
	}
}

func TestAdmitLive(t *testing.T) {
	const now = 1000.0
	open, full := slots{free: 1, holding: 50, running: 10}, slots{free: 0, holding: 1, running: 10}
	backoff := func(next float64) *state.ManagedJob {
		return &state.ManagedJob{ScheduleState: api.ScheduleAliveBackoff, Tasks: []*state.ManagedTask{
			{Status: api.ManagedSucceeded, NextTryAt: now + 500}, // ended: its old backoff does not count
			{Status: api.ManagedPending, NextTryAt: next}}}
	}
	recovering := &state.ManagedJob{ScheduleState: api.ScheduleAliveWaiting, Tasks: []*state.ManagedTask{{Status: api.ManagedRecovering}}}
	cancelled := &state.ManagedJob{ScheduleState: api.ScheduleAliveWaiting, Cancel: &state.ManagedCancel{At: now},
		Tasks: []*state.ManagedTask{{Status: api.ManagedRecovering}}}
	for _, c := range []struct {
		name     string
		j        *state.ManagedJob
		s        slots
		want     admission
		wantNext float64
	}{
		{"a recovery is claimed past the running limit (it holds its slot)", recovering, open, admitClaim, 0},
		{"no launch slot ends the pass", recovering, full, admitNoSlot, 0},
		{"a cancelled job goes to the job controller", cancelled, open, admitCancelled, 0},
		{"a backoff not over waits until it is", backoff(now + 30), open, admitBackoff, now + 30},
		{"a backoff that ended now is claimed", backoff(now), open, admitClaim, 0},
		{"a backoff that ended is claimed", backoff(now - 1), open, admitClaim, 0},
		{"no launch slot goes before a backoff", backoff(now + 30), full, admitNoSlot, 0},
	} {
		if a, next := admitLive(c.j, c.s, now); a != c.want || next != c.wantNext {
			t.Errorf("%s: admitLive = (%v, %v), want (%v, %v)", c.name, a, next, c.want, c.wantNext)
		}
	}
}

func TestAdmitWaiting(t *testing.T) {
	const now = 1000.0
	open := slots{free: 2, holding: 5, running: 10}
	waiting := func(deadline float64, started bool) *state.ManagedJob {
		t := &state.ManagedTask{Status: api.ManagedPending}
		if started {
			t.StartAt = 10
		}
		return &state.ManagedJob{ScheduleState: api.ScheduleWaiting, SchedulingDeadline: deadline, Tasks: []*state.ManagedTask{t}}
	}
	cancelled := waiting(now-1, false)
	cancelled.Cancel = &state.ManagedCancel{At: now}
	for _, c := range []struct {
		name string
		j    *state.ManagedJob
		s    slots
		want admission
	}{
		{"a slot and room: claimed", waiting(0, false), open, admitClaim},
		{"no launch slot", waiting(0, false), slots{free: 0, holding: 5, running: 10}, admitNoSlot},
		{"the running limit is reached", waiting(0, false), slots{free: 2, holding: 10, running: 10}, admitNoSlot},
		{"a full queue goes before a passed deadline", waiting(now-1, false), slots{free: 2, holding: 10, running: 10}, admitNoSlot},
		{"a pending cancel", cancelled, open, admitCancelled},
		{"before its scheduling deadline", waiting(now+1, false), open, admitClaim},
		{"at its scheduling deadline", waiting(now, false), open, admitExpired},
		{"past its scheduling deadline", waiting(now-60, false), open, admitExpired},
		{"a job that started once is not expired (a recovery does not re-arm it)", waiting(now-60, true), open, admitClaim},
	} {
		if got := admitWaiting(c.j, c.s, now); got != c.want {
			t.Errorf("%s: admitWaiting = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDepsVerdict(t *testing.T) {
	job := func(id int, sched string, statuses ...string) *state.ManagedJob {
		j := &state.ManagedJob{JobID: id, ScheduleState: sched}
		for _, s := range statuses {
			j.Tasks = append(j.Tasks, &state.ManagedTask{Status: s})
		}
		return j
	}
	deps := map[int]*state.ManagedJob{
		1: job(1, api.ScheduleDone, api.ManagedSucceeded),
		2: job(2, api.ScheduleAlive, api.ManagedSucceeded, api.ManagedRunning),   // a pipeline half done
		3: job(3, api.ScheduleDone, api.ManagedSucceeded, api.ManagedFailed),     // its second task failed
		4: job(4, api.ScheduleAlive, api.ManagedSucceeded, api.ManagedSucceeded), // finished, not yet closed
		5: job(5, api.ScheduleDone, api.ManagedCancelled),
		6: nil, // gone
	}
	for _, c := range []struct {
		on         []int
		ready      bool
		cancelWith string
	}{
		{nil, true, ""},
		{[]int{1}, true, ""},
		{[]int{1, 2}, false, ""},
		{[]int{4}, false, ""}, // not DONE yet: the job is not over until it is
		{[]int{6}, false, ""},
		{[]int{1, 3}, false, "dependency job 3 ended FAILED"},
		{[]int{2, 5}, false, "dependency job 5 ended CANCELLED"},
		{[]int{6, 3}, false, "dependency job 3 ended FAILED"},
	} {
		ready, cancel := depsVerdict(&state.ManagedJob{DependsOn: c.on}, deps)
		if ready != c.ready || cancel != c.cancelWith {
			t.Errorf("depends on %v: (%v, %q), want (%v, %q)", c.on, ready, cancel, c.ready, c.cancelWith)
		}
	}
}

// TestSchedulerDecidesByItsClock: the scheduler reads time from the
// Env's clock, so a backoff ends and a scheduling deadline passes when
// the clock says, not the machine.
func TestSchedulerDecidesByItsClock(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	t0 := time.Unix(1_800_000_000, 0)
	clock := t0
	e := &Env{Home: t.TempDir(), Store: st, Limits: Limits{Launches: 10, Running: 1}, inflight: map[int]context.CancelFunc{},
		Clock: func() time.Time { return clock }}
	sec := float64(t0.Unix())
	backoff := &state.ManagedJob{Name: "b", ScheduleState: api.ScheduleAliveBackoff,
		Tasks: []*state.ManagedTask{{Name: "b", Status: api.ManagedRecovering, StartAt: sec - 100, NextTryAt: sec + 30}}}
	waiting := &state.ManagedJob{Name: "w", ScheduleState: api.ScheduleWaiting, SchedulingDeadline: sec + 60,
		Tasks: []*state.ManagedTask{{Name: "w", Status: api.ManagedPending}}}
	if err := st.CreateManagedJobs(ctx, []*state.ManagedJob{backoff, waiting}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	pass := func(at time.Duration) controller.Result {
		t.Helper()
		clock = t0.Add(at)
		res, err := e.reconcileScheduler(ctx, schedulerKey)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	get := func(id int) *state.ManagedJob {
		t.Helper()
		j, err := st.GetManagedJob(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	if res := pass(0); res.RequeueAfter != 30*time.Second {
		t.Errorf("a backoff 30 s away: requeue after %s, want 30s", res.RequeueAfter)
	}
	if b, w := get(backoff.JobID), get(waiting.JobID); b.ScheduleState != api.ScheduleAliveBackoff || w.Cancel != nil {
		t.Fatalf("at t0: backoff job %s, waiting job cancelled %v; want the backoff kept and the deadline not passed", b.ScheduleState, w.Cancel)
	}
	pass(31 * time.Second)
	if b := get(backoff.JobID); b.ScheduleState != api.ScheduleLaunching {
		t.Fatalf("the backoff ended at t0+30: the job is %s, want LAUNCHING", b.ScheduleState)
	}
	if w := get(waiting.JobID); w.Cancel != nil {
		t.Fatalf("t0+31 is before the deadline, and the waiting job was cancelled: %+v", w.Cancel)
	}
	pass(61 * time.Second)
	w := get(waiting.JobID)
	if w.Cancel == nil || !strings.Contains(w.Cancel.Reason, "wait_for_scheduling_timeout") || w.Cancel.At != sec+61 {
		t.Fatalf("the deadline passed at t0+60 (no running slot was free): cancel %+v, want one at t0+61 naming the timeout", w.Cancel)
	}
}
