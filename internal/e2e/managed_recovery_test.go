package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestManagedPreemption: 20 managed jobs run at once; each one's node is
// taken away as a cloud preemption would (every process SIGKILLed, the
// cluster's directory removed). Each is RECOVERING (or already RUNNING
// again) within 10 s, runs again, ends SUCCEEDED with recovery_count 1,
// and leaves no cluster. The job's SKYPILOT_* variables are the
// documented ones on both runs, and the task id survives the recovery.
func TestManagedPreemption(t *testing.T) {
	parallel(t)
	const trials = 20
	e := managedEnv(t)
	shared := sharedDir(t)
	yaml := writeFile(t, "preempt.yaml", `name: pre
envs:
  SHARED: `+shared+`
run: |
  id=$SKYPILOT_MANAGED_JOB_ID
  env | grep ^SKYPILOT_ | sort > $SHARED/env-$id-$(date +%s%N)
  if [ -e $SHARED/ran-$id ]; then echo second run; exit 0; fi
  touch $SHARED/ran-$id
  sleep 600
`)
	var ids []int
	for i := range trials {
		ids = append(ids, e.jobsLaunch("-n", fmt.Sprintf("pre%d", i), yaml)...)
	}
	q := e.waitManaged(ids, 60*time.Second, "RUNNING", func(m mjob) bool {
		_, err := os.Stat(filepath.Join(shared, fmt.Sprintf("ran-%d", m.JobID)))
		return m.Status == "RUNNING" && err == nil
	})
	killedAt := map[int]time.Time{}
	for _, id := range ids {
		c := q[mkey{id, 0}].Cluster
		if c == nil || *c == "" {
			t.Fatalf("job %d runs on no cluster: %v", id, q[mkey{id, 0}])
		}
		if n := e.preemptNode(*c); n == 0 {
			t.Fatalf("job %d: no process of node %s to kill", id, *c)
		}
		killedAt[id] = time.Now()
	}
	// Each job must show it noticed within 10 s of its own preemption.
	noticed := map[int]time.Duration{}
	for len(noticed) < trials {
		for k, m := range e.jobsQueue() {
			if _, ok := killedAt[k.job]; !ok || noticed[k.job] != 0 {
				continue
			}
			if m.Status == "RECOVERING" || (m.Status == "RUNNING" && m.RecoveryCount >= 1) || terminal(m.Status) {
				noticed[k.job] = time.Since(killedAt[k.job])
				if terminal(m.Status) && m.Status != "SUCCEEDED" {
					t.Errorf("preempted job went %s instead of RECOVERING: %v", m.Status, m)
				}
			}
		}
		for id, at := range killedAt {
			if noticed[id] == 0 && time.Since(at) > 10*time.Second {
				t.Fatalf("job %d: not RECOVERING 10 s after its node was preempted: %v\n%s", id, e.jobsQueue()[mkey{id, 0}], e.serverLogTail())
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var worst time.Duration
	for _, d := range noticed {
		worst = max(worst, d)
	}
	t.Logf("%d preemptions noticed, the slowest after %s", trials, worst.Round(time.Millisecond))

	final := e.waitManaged(ids, 90*time.Second, "ended", ended)
	recovered := 0
	for _, id := range ids {
		m := final[mkey{id, 0}]
		if m.Status != "SUCCEEDED" || m.RecoveryCount != 1 {
			t.Errorf("want SUCCEEDED with recovery_count 1: %v", m)
			continue
		}
		recovered++
	}
	t.Logf("%d of %d preempted jobs recovered and succeeded", recovered, trials)

	for _, id := range ids {
		dumps, _ := filepath.Glob(filepath.Join(shared, fmt.Sprintf("env-%d-*", id)))
		if len(dumps) != 2 {
			t.Errorf("job %d ran %d times, want 2 (before and after the preemption)", id, len(dumps))
			continue
		}
		first, second := readEnvDump(t, dumps[0]), readEnvDump(t, dumps[1])
		name := fmt.Sprintf("pre%d", indexOf(ids, id))
		for _, env := range []map[string]string{first, second} {
			tid := env["SKYPILOT_TASK_ID"]
			if !strings.HasPrefix(tid, "sky-managed-") || !strings.HasSuffix(tid, fmt.Sprintf("_%s_%d-0", name, id)) {
				t.Errorf("job %d: SKYPILOT_TASK_ID = %q, want sky-managed-<time>_%s_%d-0", id, tid, name, id)
			}
			if env["SKYPILOT_TASK_IDS"] != tid {
				t.Errorf("job %d: SKYPILOT_TASK_IDS = %q, want the one task's id %q", id, env["SKYPILOT_TASK_IDS"], tid)
			}
			if env["SKYPILOT_MANAGED_JOB_ID"] != fmt.Sprint(id) || env["SKYPILOT_JOB_RANK"] != "0" || env["SKYPILOT_NUM_JOBS"] != "1" {
				t.Errorf("job %d: SKYPILOT_MANAGED_JOB_ID=%q SKYPILOT_JOB_RANK=%q SKYPILOT_NUM_JOBS=%q, want %d, 0, 1",
					id, env["SKYPILOT_MANAGED_JOB_ID"], env["SKYPILOT_JOB_RANK"], env["SKYPILOT_NUM_JOBS"], id)
			}
		}
		if first["SKYPILOT_TASK_ID"] != second["SKYPILOT_TASK_ID"] {
			t.Errorf("job %d: the task id changed across the recovery: %q then %q", id, first["SKYPILOT_TASK_ID"], second["SKYPILOT_TASK_ID"])
		}
	}
	e.requireNoClusters()
}

// TestManagedDriverFailure: the head agent of a managed job's cluster is
// killed (the cluster stays up); the server restarts it and the job it
// was driving ends FAILED_DRIVER. The managed job looks at the cluster,
// finds it up, and applies the restart rules (managed-jobs.md, "UP,
// FAILED_DRIVER"): with max_restarts_on_errors it runs again and
// succeeds; without, it is FAILED_CONTROLLER saying the driver failed.
func TestManagedDriverFailure(t *testing.T) {
	parallel(t)
	e := managedEnv(t)
	shared := sharedDir(t)
	task := func(name, recovery string) string {
		return writeFile(t, name+".yaml", `name: `+name+`
resources:
  job_recovery:
    max_restarts_on_errors: `+recovery+`
envs:
  SHARED: `+shared+`
run: |
  id=$SKYPILOT_MANAGED_JOB_ID
  echo run >> $SHARED/runs-$id
  if [ -e $SHARED/ran-$id ]; then exit 0; fi
  touch $SHARED/ran-$id
  sleep 600
`)
	}
	plain := e.jobsLaunch(task("plain", "0"))[0]
	restarts := e.jobsLaunch(task("restarts", "1"))[0]
	ids := []int{plain, restarts}
	q := e.waitManaged(ids, 60*time.Second, "RUNNING", func(m mjob) bool {
		_, err := os.Stat(filepath.Join(shared, fmt.Sprintf("ran-%d", m.JobID)))
		return m.Status == "RUNNING" && err == nil
	})
	for _, id := range ids {
		c := q[mkey{id, 0}].Cluster
		if c == nil || *c == "" {
			t.Fatalf("job %d runs on no cluster: %v", id, q[mkey{id, 0}])
		}
		if err := syscall.Kill(e.headAgentPid(*c), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	final := e.waitManaged(ids, 90*time.Second, "ended", ended)
	runs := func(id int) int {
		b, _ := os.ReadFile(filepath.Join(shared, fmt.Sprintf("runs-%d", id)))
		return strings.Count(string(b), "\n")
	}
	m := final[mkey{plain, 0}]
	want := "The job driver on the remote cluster failed."
	if m.Status != "FAILED_CONTROLLER" || m.RecoveryCount != 0 || m.FailureReason == nil || !strings.HasPrefix(*m.FailureReason, want) || runs(plain) != 1 {
		t.Errorf("no restarts allowed: want FAILED_CONTROLLER after 1 run, its reason starting %q; got %v after %d runs\n%s", want, m, runs(plain), e.serverLogTail())
	}
	m = final[mkey{restarts, 0}]
	if m.Status != "SUCCEEDED" || m.RecoveryCount != 1 || runs(restarts) != 2 {
		t.Errorf("max_restarts_on_errors 1: want SUCCEEDED with recovery_count 1 after 2 runs; got %v after %d runs\n%s", m, runs(restarts), e.serverLogTail())
	}
	e.requireNoClusters()
}

func indexOf(ids []int, id int) int {
	for i, v := range ids {
		if v == id {
			return i
		}
	}
	return -1
}

// requireNoClusters waits for every managed job's cluster to be gone:
// from `sky status -o json` (the state database) and from the local
// infrastructure's directory.
func (e *skyEnv) requireNoClusters() {
	e.t.Helper()
	var st map[string]cluster
	ok := waitFor(30*time.Second, func() bool {
		st = e.status(false)
		return len(st) == 0 && len(e.localClusters()) == 0
	})
	if !ok {
		e.t.Errorf("clusters left behind: sky status has %v, the local infrastructure %v", keys(st), e.localClusters())
	}
}

// TestManagedRestarts: job_recovery's max_restarts_on_errors and
// recover_on_exit_codes, with each run counted in a shared file.
func TestManagedRestarts(t *testing.T) {
	parallel(t)
	e := managedEnv(t)
	shared := sharedDir(t)
	runs := func(id int) int {
		b, _ := os.ReadFile(filepath.Join(shared, fmt.Sprintf("runs-%d", id)))
		return strings.Count(string(b), "\n")
	}
	launch := func(name, recovery, run string) int {
		y := writeFile(t, name+".yaml", fmt.Sprintf(`name: %s
resources:
  job_recovery:
%s
envs:
  SHARED: %s
run: |
  f=$SHARED/runs-$SKYPILOT_MANAGED_JOB_ID
  echo run >> $f
  n=$(wc -l < $f)
%s
`, name, recovery, shared, run))
		return e.jobsLaunch(y)[0]
	}
	// Exit 1 every time, two restarts allowed: three runs, then FAILED.
	failing := launch("restarts", "    max_restarts_on_errors: 2", "  exit 1")
	// Exit 42 twice (not counted), then 0: three runs, SUCCEEDED, though
	// no restart on errors is allowed at all.
	exit42 := launch("exitcodes", "    recover_on_exit_codes: [42]", "  if [ $n -le 2 ]; then exit 42; fi\n  exit 0")
	// 42, 42, then 1 twice with one restart on errors: the 42s do not use
	// the budget, so four runs, then FAILED.
	mixed := launch("mixed", "    max_restarts_on_errors: 1\n    recover_on_exit_codes: [42]", "  if [ $n -le 2 ]; then exit 42; fi\n  exit 1")

	q := e.waitManaged([]int{failing, exit42, mixed}, 90*time.Second, "ended", ended)
	check := func(id int, status string, recoveries, wantRuns int) {
		m := q[mkey{id, 0}]
		if m.Status != status || m.RecoveryCount != recoveries || runs(id) != wantRuns {
			t.Errorf("want %s after %d runs with recovery_count %d; got %v after %d runs", status, wantRuns, recoveries, m, runs(id))
		}
		if status == "FAILED" {
			want := fmt.Sprintf("To see the details, run: sky jobs logs --controller %d", id)
			if m.FailureReason == nil || !strings.Contains(*m.FailureReason, want) {
				t.Errorf("job %d: failure_reason should say %q: %v", id, want, m)
			}
		} else if m.FailureReason != nil {
			t.Errorf("job %d succeeded with a failure_reason: %v", id, m)
		}
	}
	check(failing, "FAILED", 2, 3)
	check(exit42, "SUCCEEDED", 2, 3)
	check(mixed, "FAILED", 3, 4)

	// The controller log tells the restarts apart.
	// It exits as `sky jobs logs` does for the job: 100 for a failed one.
	ctl := e.jobsLogs(100, fmt.Sprint(failing), "--controller", "--no-follow").stdout
	if !strings.Contains(ctl, "restart 2 of max_restarts_on_errors 2") {
		t.Errorf("the controller log of job %d does not name its restarts:\n%s", failing, ctl)
	}
	ctl = e.jobsLogs(0, fmt.Sprint(exit42), "--controller", "--no-follow").stdout
	if !strings.Contains(ctl, "recover_on_exit_codes") {
		t.Errorf("the controller log of job %d does not say why it restarted:\n%s", exit42, ctl)
	}
	e.requireNoClusters()
}
