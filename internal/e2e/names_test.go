package e2e

import (
	"strings"
	"testing"
)

// TestClusterNameOneRule: a name the CLI accepts is one the provisioner
// accepts (a..b launches and goes down), and a name the rule refuses is a
// usage error that leaves no cluster record behind.
func TestClusterNameOneRule(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	if r := e.must("launch", "-y", "-c", "a..b", "--", "echo dotted name ran"); !strings.Contains(r.stdout, "dotted name ran") {
		t.Errorf("launch of a..b did not run its job:\n%s", r)
	}
	if c := e.status(false)["a..b"]; c.Status != "UP" {
		t.Errorf("a..b is %q after its launch, want UP", c.Status)
	}
	e.must("down", "-y", "a..b")
	long := "x" + strings.Repeat("y", 63)
	for _, name := range []string{"1bad", "a/b", "bad-", long} {
		r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", name, "--", "echo never")
		if r.code != 2 || !strings.Contains(r.stderr, "invalid cluster name") {
			t.Errorf("launch -c %q: want usage error (exit 2) naming the rule\n%s", name, r)
		}
	}
	if st := e.status(false); len(st) != 0 {
		t.Errorf("refused names left records: %+v", st)
	}
}
