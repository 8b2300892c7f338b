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
}
