package all_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/testutil"
)

// omittable is every skygo_omit_* tag and what must vanish from every
// binary of a build that sets it: the SDK it brings, or the package.
var omittable = []struct {
	tag      string
	prefixes []string
}{
	{"skygo_omit_aws", []string{"github.com/aws/", "github.com/skygo/skygo/internal/infra/aws", "github.com/skygo/skygo/internal/awsx"}},
	{"skygo_omit_kubernetes", []string{"k8s.io/", "sigs.k8s.io/", "github.com/skygo/skygo/internal/infra/kubernetes"}},
	{"skygo_omit_slurm", []string{"github.com/skygo/skygo/internal/infra/slurm"}},
}

// TestOmitTagsBuildAndDrop builds every combination of the omit tags and
// checks that each left-out infrastructure is really out of every binary
// under cmd/ (a tag that only unregistered a kind while its SDK stayed
// linked would promise a smaller binary and not deliver it).
func TestOmitTagsBuildAndDrop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every tag combination: not in -short")
	}
	root := testutil.RepoRoot(t)
	for mask := 0; mask < 1<<len(omittable); mask++ {
		var tags []string
		for i, o := range omittable {
			if mask&(1<<i) != 0 {
				tags = append(tags, o.tag)
			}
		}
		name := strings.Join(tags, ",")
		if name == "" {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			tagArg := "-tags=" + strings.Join(tags, ",")
			out := filepath.Join(t.TempDir(), "bin") + string(filepath.Separator)
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			run(t, root, "go", "build", tagArg, "-o", out, "./cmd/...")
			deps := run(t, root, "go", "list", tagArg, "-deps", "./cmd/...")
			for i, o := range omittable {
				if mask&(1<<i) == 0 {
					continue
				}
			deps:
				for _, p := range strings.Fields(deps) {
					for _, prefix := range o.prefixes {
						if strings.HasPrefix(p, prefix) && !light(p) {
							t.Errorf("with %s a binary under cmd/ still links %s", o.tag, p)
							break deps
						}
					}
				}
			}
		})
	}
}

// light reports whether a package of a plug-in's directory is one that
// stays when the plug-in is left out: its descriptor, which keeps the kind
// known (and marks it omitted), its command-line extras and its node
// side, which link no SDK (internal/layering_test.go holds them so).
func light(p string) bool {
	for _, sub := range []string{"/kind", "/cliext", "/node"} {
		if strings.HasSuffix(p, sub) {
			return true
		}
	}
	return p == "github.com/skygo/skygo/internal/infra/slurm/convert"
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return string(out)
}
