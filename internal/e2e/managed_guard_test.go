package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestManagedJobNeverTakesAnotherCluster: a managed job's cluster is
// <name>-<job id>; when the user already has a cluster of that name, the
// job fails its prechecks and the user's cluster is left as it was.
func TestManagedJobNeverTakesAnotherCluster(t *testing.T) {
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
