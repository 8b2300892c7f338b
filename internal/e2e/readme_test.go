package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/testutil"
)

// TestReadmeMainJob runs the sky command of README.md's first line (the
// project's main job) as written, so the README stays true.
func TestReadmeMainJob(t *testing.T) {
	parallel(t)
	root := testutil.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, "bin/sky ") {
			first = line
			break
		}
	}
	// "make build && bin/sky launch -y -c hello examples/hello.yaml   # ..."
	cmd := strings.TrimSpace(strings.SplitN(first, "#", 2)[0])
	_, skyCmd, ok := strings.Cut(cmd, "bin/sky ")
	if !ok {
		t.Fatalf("README's first command has no `bin/sky ...`: %q", first)
	}
	args := strings.Fields(skyCmd)
	for i, a := range args {
		if strings.HasSuffix(a, ".yaml") {
			args[i] = filepath.Join(root, a)
		}
	}
	e := newEnv(t)
	r := e.must(args...)
	for _, want := range []string{"rank 0 of 2", "rank 1 of 2", "SUCCEEDED"} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("README main job output lacks %q:\n%s", want, r.out())
		}
	}
	// Piped, it reads like SkyPilot's launch (VALIDATE_LAUNCH_OUTPUT's
	// checks that do not depend on the smoke test's own task).
	for _, c := range []struct {
		first  string
		within int
		next   []string
	}{
		{"Launching on", 1, []string{"Instances are up."}},
		{"Setup detached", 5, []string{"Job submitted"}},
		{"Job submitted, ID:", 1, []string{"Waiting for task resources on 2 nodes."}},
		{"Job started. Streaming logs...", 1, []string{"(setup pid=", "setup on node"}},
		{"Job finished (status: SUCCEEDED)", 5, []string{"Job ID: 1"}},
		{"Useful Commands", 1, []string{"Job ID:"}},
	} {
		if !lineAfter(r.stdout, c.first, c.within, c.next...) {
			t.Errorf("README main job: no line with %q within %d line(s) after %q:\n%s", c.next, c.within, c.first, r.stdout)
		}
	}
	if strings.Count(r.stdout, "(setup pid=") != 2 || r.stderr != "" {
		t.Errorf("README main job: want setup output from both nodes and nothing on stderr:\n%s", r)
	}
}
