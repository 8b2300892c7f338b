package jobs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

func TestClusterNameIsSkyPilots(t *testing.T) {
	for _, c := range []struct {
		task string
		id   int
		want string
	}{
		{"train", 3, "train-3"},
		{"My_Job.v2", 12, "my-job-v2-12"},
		{"7up", 1, "sky-7up-1"},
	} {
		if got := clusterName(c.task, c.id); got != c.want {
			t.Errorf("clusterName(%q, %d) = %q, want %q", c.task, c.id, got, c.want)
		}
	}
	long := clusterName("a-very-long-task-name-that-goes-on-and-on", 5)
	if base := strings.TrimSuffix(long, "-5"); len(base) > 25 || !strings.HasPrefix(base, "a-very-long-task-name-") || len(base) != len("a-very-long-task-name")+3 {
		t.Errorf("long name = %q, want the first 22 characters without a trailing '-', '-', 2 hash characters, then -5", long)
	}
	if clusterName("a-very-long-task-name-that-goes-on-and-on", 5) != long {
		t.Error("the name of a task's cluster must not change between calls: a relaunch finds its cluster by it")
	}
}

func TestRetryGapGrowsToItsCap(t *testing.T) {
	for _, c := range []struct {
		first time.Duration
		want  map[int]time.Duration
	}{
		{10 * time.Second, map[int]time.Duration{1: 10 * time.Second, 2: 16 * time.Second, 3: 25600 * time.Millisecond, 10: 50 * time.Second}},
		{0, map[int]time.Duration{1: time.Minute, 2: 96 * time.Second, 10: 5 * time.Minute}}, // SkyPilot's
	} {
		e := &Env{Timings: Timings{RetryGap: c.first}}
		for tries, want := range c.want {
			got := e.retryGap(tries)
			if got < time.Duration(float64(want)*0.6)-time.Millisecond || got > time.Duration(float64(want)*1.4)+time.Millisecond {
				t.Errorf("first gap %s: retryGap(%d) = %s, want %s ±40%%", c.first, tries, got, want)
			}
		}
	}
}

func TestTerminationDelay(t *testing.T) {
	m := map[string]string{"default": "30s", "eval": "5m", "bare": "12"}
	for task, want := range map[string]time.Duration{"eval": 5 * time.Minute, "other": 30 * time.Second, "bare": 12 * time.Second} {
		if got := terminationDelay(m, task); got != want {
			t.Errorf("terminationDelay(%s) = %s, want %s", task, got, want)
		}
	}
	if terminationDelay(nil, "x") != 0 {
		t.Error("no termination_delay means none")
	}
}

func TestJobStatusIsFirstUnfinishedTask(t *testing.T) {
	j := &state.ManagedJob{Tasks: []*state.ManagedTask{{Status: api.ManagedSucceeded}, {Status: api.ManagedRunning}, {Status: api.ManagedPending}}}
	if s := j.JobStatus(); s != api.ManagedRunning {
		t.Errorf("pipeline status = %s, want RUNNING", s)
	}
	j.Tasks[1].Status, j.Tasks[2].Status = api.ManagedFailed, api.ManagedCancelled
	if s := j.JobStatus(); s != api.ManagedFailed {
		t.Errorf("failed pipeline status = %s, want FAILED", s)
	}
	yes, no := true, false
	g := &state.ManagedJob{Tasks: []*state.ManagedTask{{Status: api.ManagedSucceeded, Primary: &yes}, {Status: api.ManagedCancelled, Primary: &no}}}
	if s := g.JobStatus(); s != api.ManagedSucceeded {
		t.Errorf("group whose primary succeeded and auxiliary was ended = %s, want SUCCEEDED", s)
	}
}

func TestDetails(t *testing.T) {
	task := &state.ManagedTask{Status: api.ManagedPending}
	j := &state.ManagedJob{ScheduleState: api.ScheduleWaiting, Priority: 1, Tasks: []*state.ManagedTask{task}}
	if d := details(j, task, 5); d != "Waiting for higher priority jobs to launch" {
		t.Errorf("details = %q", d)
	}
	if d := details(j, task, 1); d != "Waiting for other jobs to launch" {
		t.Errorf("details = %q", d)
	}
	j.ScheduleState = api.ScheduleAliveBackoff
	if d := details(j, task, 0); d != "In backoff, waiting for resources" {
		t.Errorf("details = %q", d)
	}
	j.ScheduleState, task.Status, task.FailureReason = api.ScheduleDone, api.ManagedFailed, "To see the details, run: sky jobs logs --controller 1"
	if d := details(j, task, 0); d != "Failure: To see the details, run: sky jobs logs --controller 1" {
		t.Errorf("details = %q", d)
	}
	task.Status, task.FailureReason, task.RecoverReason, j.ScheduleState = api.ManagedRecovering, "", "Cluster  c-1 was\nlost", api.ScheduleLaunching
	if d := details(j, task, 0); d != "Recovering: Cluster c-1 was lost" {
		t.Errorf("details = %q", d)
	}
	j.Cancel = &state.ManagedCancel{By: "alice", RequestID: "r-1"}
	if d := details(j, task, 0); d != "Cancellation requested by alice (request r-1)" {
		t.Errorf("details = %q", d)
	}
}

func TestPriorityMustAgree(t *testing.T) {
	one, two := map[string]any{"priority": 1}, map[string]any{"priority": 2}
	if p, _, err := priorityOf([]api.TaskSpec{{Resources: mustSpec(one)}, {}}); err != nil || p != 1 {
		t.Errorf("priorityOf = %d, %v; want 1", p, err)
	}
	if _, _, err := priorityOf([]api.TaskSpec{{Resources: mustSpec(one)}, {Resources: mustSpec(two)}}); err == nil {
		t.Error("tasks with different priorities were accepted")
	}
}

// TestSchedulerClaimsByPriorityThenAge: with room for two launches, the
// scheduler claims the highest priority first, then the oldest, and
// passes over a job whose dependency has not succeeded.
func TestSchedulerClaimsByPriorityThenAge(t *testing.T) {
	ctx := context.Background()
	st, err := state.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := &Env{Store: st, Limits: Limits{Launches: 2, Running: 100}, inflight: map[int]context.CancelFunc{}}
	mk := func(prio int, deps ...int) int {
		j := &state.ManagedJob{Name: "j", ScheduleState: api.ScheduleWaiting, Priority: prio, DependsOn: deps,
			Tasks: []*state.ManagedTask{{Name: "j", Status: api.ManagedPending}}}
		if err := st.CreateManagedJobs(ctx, []*state.ManagedJob{j}, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		return j.JobID
	}
	low, old, blocker := mk(0), mk(5), mk(-10)
	dependent := mk(100, blocker)
	young := mk(5)
	if _, err := e.reconcileScheduler(ctx, schedulerKey); err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, id := range []int{low, old, blocker, dependent, young} {
		j, err := st.GetManagedJob(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		got[id] = j.ScheduleState
	}
	if got[old] != api.ScheduleLaunching || got[young] != api.ScheduleLaunching {
		t.Errorf("the two priority-5 jobs were not claimed first: %v", got)
	}
	if got[low] != api.ScheduleWaiting || got[blocker] != api.ScheduleWaiting || got[dependent] != api.ScheduleWaiting {
		t.Errorf("jobs beyond the launch limit, or waiting for a dependency, were claimed: %v", got)
	}
}

// TestGCRemovesOldLogsOnly: logs of a job that ended longer ago than the
// retention go, a recent job's stay, and a negative retention keeps all.
func TestGCRemovesOldLogsOnly(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, err := state.OpenSQLite(ctx, filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := &Env{Home: home, Store: st}
	ended := func(ago time.Duration) int {
		j := &state.ManagedJob{Name: "j", ScheduleState: api.ScheduleDone, EndAt: float64(time.Now().Add(-ago).Unix()),
			Tasks: []*state.ManagedTask{{Name: "j", Status: api.ManagedSucceeded}}}
		if err := st.CreateManagedJobs(ctx, []*state.ManagedJob{j}, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{TaskLogPath(home, j.JobID, 0), ControllerLogPath(home, j.JobID)} {
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("log\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return j.JobID
	}
	old, recent := ended(200*time.Hour), ended(time.Hour)
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if _, err := e.reconcileGC(ctx, gcKey); err != nil {
		t.Fatal(err)
	}
	if exists(TaskLogPath(home, old, 0)) || exists(ControllerLogPath(home, old)) {
		t.Error("logs of a job that ended 200 h ago are still there (retention 168 h)")
	}
	if !exists(TaskLogPath(home, recent, 0)) || !exists(ControllerLogPath(home, recent)) {
		t.Error("logs of a job that ended an hour ago were removed")
	}
	if err := os.MkdirAll(filepath.Join(home, ".sky"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "jobs:\n  controller:\n    task_logs_gc_retention_hours: -1\n    controller_logs_gc_retention_hours: 0\n"
	if err := os.WriteFile(filepath.Join(home, ".sky", "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reconcileGC(ctx, gcKey); err != nil {
		t.Fatal(err)
	}
	if !exists(TaskLogPath(home, recent, 0)) {
		t.Error("task_logs_gc_retention_hours: -1 did not keep the task logs")
	}
	if exists(ControllerLogPath(home, recent)) {
		t.Error("controller_logs_gc_retention_hours: 0 kept a controller log")
	}
}

func TestRequestedColumn(t *testing.T) {
	for _, c := range []struct {
		t    api.TaskSpec
		want string
	}{
		{api.TaskSpec{NumNodes: 1}, "1x[CPU:1+]"},
		{api.TaskSpec{NumNodes: 2, Resources: mustSpec(map[string]any{"cpus": "4+", "memory": 16})}, "2x[CPU:4+, mem=16]"},
		{api.TaskSpec{NumNodes: 1, Resources: mustSpec(map[string]any{"accelerators": "A100:8", "use_spot": true})}, "1x[A100:8, spot]"},
	} {
		if got := backend.RequestedResources(c.t); got != c.want {
			t.Errorf("backend.RequestedResources(%v) = %q, want %q", c.t.Resources, got, c.want)
		}
	}
}

// TestPrintTailLeavesTheClosingLineOut: --tail N of a saved task log is
// the job's last N lines, then the stream's closing line, as on a
// cluster.
func TestPrintTailLeavesTheClosingLineOut(t *testing.T) {
	p := filepath.Join(t.TempDir(), "task-0.log")
	if err := os.WriteFile(p, []byte("a\nb\nc\n\x1b[32m✓ Job finished (status: SUCCEEDED).\x1b[0m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := ux.PrintTail(p, 2, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "b\nc\n\x1b[32m✓ Job finished (status: SUCCEEDED).\x1b[0m\n" {
		t.Errorf("tail 2 = %q", got)
	}
}

// mustSpec is resources m, which the test wrote valid.
func mustSpec(m map[string]any) resources.Spec {
	s, err := resources.ParseSpec(m)
	if err != nil {
		panic(err)
	}
	return s
}
