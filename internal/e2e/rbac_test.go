package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestRegularUserCannotReadOthersJobs: with basic auth, bob cannot read
// alice's job logs, status or queue by naming her cluster, and his
// `queue -u` lists every job on his own clusters but not hers; the admin
// reads both.
func TestRegularUserCannotReadOthersJobs(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	e := tm.skyEnv
	as, mustAs := tm.as, tm.mustAs
	// Each owner tears down their own cluster: the env's cleanup runs as
	// nobody in particular and would not see them.
	t.Cleanup(func() { as("alice", "down", "-y", "ca"); as("bob", "down", "-y", "cb") })
	mustAs("alice", "launch", "-y", "-c", "ca", "--", "echo alice-private-line")
	mustAs("bob", "launch", "-y", "-c", "cb", "--", "echo bob-line")
	if r := mustAs("alice", "logs", "ca", "1"); !strings.Contains(r.stdout, "alice-private-line") {
		t.Fatalf("alice cannot read her own log:\n%s", r)
	}

	for _, args := range [][]string{
		{"logs", "ca", "1"},
		{"logs", "--no-follow", "ca"},
		{"logs", "--status", "ca", "1"},
		{"queue", "ca"},
	} {
		r := as("bob", args...)
		if r.code == 0 || strings.Contains(r.out(), "alice-private-line") || !strings.Contains(r.out(), "another user's cluster") {
			t.Errorf("bob read alice's cluster: %s", r)
		}
	}
	queueU := func(user string) map[string][]job {
		t.Helper()
		var out map[string][]job
		r := mustAs(user, "queue", "-u", "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%s: queue -u -o json: %v\n%s", user, err, r)
		}
		return out
	}
	if q := queueU("bob"); len(q["cb"]) != 1 || q["ca"] != nil {
		t.Errorf("bob's queue -u: %+v, want his cluster cb alone", q)
	}
	if q := queueU("admin"); len(q["ca"]) != 1 || len(q["cb"]) != 1 {
		t.Errorf("admin's queue -u: %+v, want both users' clusters", q)
	}
	adminEnv := []string{fmt.Sprintf("SKYPILOT_API_SERVER_ENDPOINT=http://admin:adminpw@127.0.0.1:%d", e.port)}
	if r := e.exec(cmdTimeout, adminEnv, "logs", "ca", "1"); r.code != 0 || !strings.Contains(r.stdout, "alice-private-line") {
		t.Errorf("the admin cannot read alice's log: %s", r)
	}
	mustAs("alice", "down", "-y", "ca")
	mustAs("bob", "down", "-y", "cb")
}
