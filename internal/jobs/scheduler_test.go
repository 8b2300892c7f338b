package jobs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
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
