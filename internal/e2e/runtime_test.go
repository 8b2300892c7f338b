package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/paths"
)

// TestLoneSkyExtractsItsRuntime is what a user who copies the one sky
// file somewhere sees: with no runtime beside it, sky extracts the
// gzipped programs it carries into the user cache once, the API server
// runs from there, and a local cluster's agent is the node runtime
// extracted beside that server.
func TestLoneSkyExtractsItsRuntime(t *testing.T) {
	parallel(t)
	built := os.Getenv("SKYGO_TEST_BINARY")
	if built == "" {
		t.Skip("needs the sky of `make build` (SKYGO_TEST_BINARY), which carries its runtime")
	}
	e := newEnv(t)
	// In the HOME, which outlives the cleanup that runs this sky.
	lone := filepath.Join(e.home, "lone", "sky")
	if err := os.MkdirAll(filepath.Dir(lone), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	e.bin = lone
	cache := filepath.Join(e.home, "cache")
	e.env = append(e.env, "XDG_CACHE_HOME="+cache)

	e.launchOK(t, "-c", "lone", "echo from-the-extracted-runtime")
	dirs, err := filepath.Glob(filepath.Join(cache, "skygo", "runtime", "*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("want one extracted runtime directory, got %v (%v)", dirs, err)
	}
	for _, name := range []string{"sky-server", "sky-lb", "sky-node-linux-amd64", "sky-node-linux-arm64"} {
		if st, err := os.Stat(filepath.Join(dirs[0], name)); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("extracted %s: %v %v", name, st, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "server.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || exe != filepath.Join(dirs[0], "sky-server") {
		t.Errorf("the API server runs %q (%v), want the extracted %s", exe, err, filepath.Join(dirs[0], "sky-server"))
	}
	if out, _, code := e.run("logs", "lone", "1"); code != 0 || !strings.Contains(out, "from-the-extracted-runtime") {
		t.Errorf("the job's log: exit %d\n%s", code, out)
	}
}
