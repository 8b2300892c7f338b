package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestManagedJobNeverTakesAnotherCluster: a managed job's cluster is
// <name>-<job id>; when the user already has a cluster of that name, the
// job fails its prechecks and the user's cluster is left as it was.
func TestManagedJobNeverTakesAnotherCluster(t *testing.T) {
	parallel(t)
	e := managedEnv(t)
	defer e.cleanup()
	e.must("launch", "-y", "-c", "mine-1", "--", "echo own")
	ids := e.jobsLaunch("-n", "mine", "--", "echo managed")
	if ids[0] != 1 {
		t.Fatalf("first managed job has id %d, the test needs 1", ids[0])
	}
	q := e.waitManaged(ids, 60*time.Second, "ended", ended)
	got := q[mkey{1, 0}]
	if got.Status != "FAILED_PRECHECKS" || got.FailureReason == nil || !strings.Contains(*got.FailureReason, "mine-1") {
		t.Fatalf("job whose cluster name is taken: %s; want FAILED_PRECHECKS naming mine-1", got)
	}
	if c, ok := e.status(false)["mine-1"]; !ok || c.Status != "UP" {
		t.Fatalf("the user's cluster mine-1 is gone or not UP after the job: %+v", e.status(false))
	}
	e.must("down", "-y", "mine-1")
}

// TestManagedWaitForSchedulingTimeout: a job that has not started within
// its job.wait_for_scheduling_timeout of its submission ends CANCELLED
// (seeds/advanced-patterns.md §3.1); its controller log says why.
func TestManagedWaitForSchedulingTimeout(t *testing.T) {
	parallel(t)
	e := managedEnv(t)
	defer e.cleanup()
	long := e.jobsLaunch("-n", "long", "--", "sleep 60")
	yaml := writeFile(t, "wait.yaml", "name: waiter\njob:\n  wait_for_scheduling_timeout: 2s\nrun: echo never\n")
	w := e.jobsLaunch("--depends-on", strconv.Itoa(long[0]), yaml)
	start := time.Now()
	q := e.waitManaged(w, 30*time.Second, "ended", ended)
	if got := q[mkey{w[0], 0}]; got.Status != "CANCELLED" {
		t.Fatalf("job past its scheduling timeout: %s; want CANCELLED", got)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("cancelled after %s, before its 2 s timeout", d)
	}
	r := e.jobsLogs(103, strconv.Itoa(w[0]), "--controller", "--no-follow")
	if !strings.Contains(r.out(), "wait_for_scheduling_timeout") {
		t.Errorf("controller log does not say why the job was cancelled:\n%s", r.out())
	}
	if got := e.jobsQueue()[mkey{long[0], 0}]; got.Status != "RUNNING" && got.Status != "STARTING" {
		t.Errorf("the job it waited for was touched: %s", got)
	}
}
