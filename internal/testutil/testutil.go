// Package testutil holds helpers shared by tests: where the shared corpus
// is, the built sky binary, free ports, a private HOME.
package testutil

import (
	"fmt"
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
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SharedDir is ../shared beside the checkout (SKYGO_SHARED overrides).
// Tests that need it fail, not skip, when it is missing: CI always has it.
func SharedDir(t testing.TB) string {
	t.Helper()
	d, err := SharedPath()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// SharedPath is SharedDir for code without a testing.TB (TestMain).
func SharedPath() (string, error) {
	if d := os.Getenv("SKYGO_SHARED"); d != "" {
		return d, nil
	}
	_, file, _, _ := runtime.Caller(0)
	d := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", "shared"))
	if _, err := os.Stat(filepath.Join(d, "spec")); err != nil {
		return "", fmt.Errorf("shared folder not found at %s (set SKYGO_SHARED): %w", d, err)
	}
	return d, nil
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// SkyBinary returns the path of a built sky binary: SKYGO_TEST_BINARY when
// set (the Makefile builds it once), else a build into a temp dir, once per
// test process.
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
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/sky")
		cmd.Dir = RepoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatalf("building sky: %v", buildErr)
	}
	return binPath
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
