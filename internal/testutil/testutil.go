// Package testutil holds helpers shared by tests: the project's testdata,
// the optional shared corpus, the built sky binary, free ports, a private
// HOME.
package testutil

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// RepoRoot is the module root (the directory holding go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	return Root()
}

// Root is RepoRoot for code without a testing.TB.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Testdata is a path under the project's own testdata directory, which
// holds what the tests need from a plain checkout: task, config and volume
// YAMLs and a cut-down price catalog.
func Testdata(elem ...string) string {
	return filepath.Join(append([]string{Root(), "testdata"}, elem...)...)
}

// CatalogDir is the test catalog: a few hundred rows per cloud cut out of
// SkyPilot's v8 price catalog (testdata/catalog/README.md).
func CatalogDir() string { return Testdata("catalog", "v8") }

// SharedPath is the shared folder of the development environment: the
// SkyPilot corpus (YAMLs, configs, volume specs, invalid files) and the
// full v8 catalog. It is ../shared beside the checkout, or SKYGO_SHARED. A
// plain clone has no such folder; ok is false then.
func SharedPath() (dir string, ok bool) {
	d := os.Getenv("SKYGO_SHARED")
	if d == "" {
		_, file, _, _ := runtime.Caller(0)
		d = filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", "shared"))
	}
	st, err := os.Stat(filepath.Join(d, "corpus"))
	return d, err == nil && st.IsDir()
}

// CorpusSkipped is the one line a test suite over the shared folder gives
// when the folder is missing. The Makefile prints it too, because go test
// shows nothing of a passing package.
const CorpusSkipped = "SkyPilot corpus compatibility suite skipped: ../shared/corpus not found (set SKYGO_SHARED to a folder holding corpus/ and catalog/)"

// Shared returns a path under the shared folder for a suite that runs
// only where that folder exists (the SkyPilot corpus compatibility suite);
// elsewhere it skips the calling test with CorpusSkipped. Call it once, in
// the suite's parent test, so that a skip is one line, not one per file.
func Shared(t testing.TB, elem ...string) string {
	t.Helper()
	d, ok := SharedPath()
	if !ok {
		if os.Getenv("SKYGO_SHARED") != "" {
			t.Fatalf("SKYGO_SHARED=%s has no corpus/ folder", d)
		}
		t.Skip(CorpusSkipped)
	}
	p := filepath.Join(append([]string{d}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shared folder %s is incomplete: %v", d, err)
	}
	return p
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// SkyBinary returns the path of a built sky binary: SKYGO_TEST_BINARY when
// set (the Makefile builds it once), else a build into a temp dir, once per
// test process: sky-server, sky-lb and the node runtime builds beside it
// (see NodeBinary), as `make build` lays them out. That sky embeds no
// runtime: it is linked to use that directory (internal/bundle.linkedDir).
func SkyBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SKYGO_TEST_BINARY"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "skygo-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sky")
		builds := [][]string{
			{"", filepath.Join(dir, "sky-server"), "./cmd/sky-server"},
			{"", filepath.Join(dir, "sky-lb"), "./cmd/sky-lb"},
			{"", binPath, "./cmd/sky", "-ldflags", "-X github.com/skygo/skygo/internal/bundle.linkedDir=" + dir},
		}
		for _, a := range nodeArchs {
			builds = append(builds, []string{a, filepath.Join(dir, "sky-node-linux-"+a), "./cmd/sky-node"})
		}
		for _, b := range builds {
			args := append([]string{"build"}, b[3:]...)
			cmd := exec.Command("go", append(args, "-o", b[1], b[2])...)
			cmd.Dir = RepoRoot(t)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if b[0] != "" {
				cmd.Env = append(cmd.Env, "GOOS=linux", "GOARCH="+b[0])
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{out: string(out), err: err}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("building sky: %v", buildErr)
	}
	return binPath
}

// nodeArchs are the node runtime builds (the Makefile's NODE_ARCHS,
// infra.NodeArchs).
var nodeArchs = []string{"amd64", "arm64"}

// NodeBinary returns the node runtime built for linux/goarch
// (cmd/sky-node): the file sky-node-linux-<goarch> beside SkyBinary's.
// With SKYGO_TEST_BINARY set, `make build` made it; a missing one fails
// the test saying so.
func NodeBinary(t testing.TB, goarch string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(SkyBinary(t)), "sky-node-linux-"+goarch)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the node runtime for linux/%s is not beside the sky binary (%v); run `make build`, which builds bin/sky-node-linux-<arch> beside bin/sky", goarch, err)
	}
	return p
}

// LBBinary returns the load balancer (cmd/sky-lb) beside SkyBinary's.
func LBBinary(t testing.TB) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(SkyBinary(t)), "sky-lb")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the load balancer is not beside the sky binary (%v); run `make build`, which builds bin/sky-lb beside bin/sky", err)
	}
	return p
}

// RuntimeDir is the directory of SkyBinary, which holds the node runtime
// builds (for SKYGO_RUNTIME_DIR or infra.NodeBinariesBeside).
func RuntimeDir(t testing.TB) string {
	t.Helper()
	return filepath.Dir(NodeBinary(t, runtime.GOARCH))
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TempHome makes a private HOME for one test and returns it; the CLI and
// server keep everything under $HOME/.sky, so tests never share state.
func TempHome(t testing.TB) string {
	t.Helper()
	h := t.TempDir()
	t.Setenv("HOME", h)
	return h
}
