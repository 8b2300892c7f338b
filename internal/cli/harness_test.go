package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/testutil"
)

// testIO is a buffer-backed IOStreams; tty sets both terminal flags.
func testIO(stdin string, tty bool) (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: strings.NewReader(stdin), Out: out, ErrOut: errOut, IsTTY: tty, InTTY: tty}, out, errOut
}

// testFactory is a Factory over buffers with a fixed environment.
func testFactory(io *IOStreams, env map[string]string) *Factory {
	return &Factory{
		IO:  io,
		Now: func() time.Time { return time.Unix(1_700_000_000, 0) },
		LookupEnv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		},
	}
}

// runInProcess runs sky with args in this process and returns its output
// and exit code.
func runInProcess(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	io, out, errOut := testIO("", false)
	code = run(testFactory(io, nil), args)
	return out.String(), errOut.String(), code
}

// runBinary runs the built sky binary with a private HOME and returns its
// output and exit code.
func runBinary(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(testutil.SkyBinary(t), args...)
	// A private HOME and port: a command that reaches for the API server
	// (validate does) starts its own, which is stopped when the test ends.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, fmt.Sprintf("SKYPILOT_API_SERVER_LOCAL_PORT=%d", testutil.FreePort(t)))
	cmd.Env = append(cmd.Env, env...)
	stopEnv := cmd.Env
	t.Cleanup(func() {
		if _, err := os.Stat(paths.ServerDir(home)); err != nil {
			return // no server was started
		}
		stop := exec.Command(testutil.SkyBinary(t), "api", "stop")
		stop.Env = stopEnv
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("stopping the API server the test started: %v\n%s", err, out)
		}
	})
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running sky %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// writeFile writes content to name under a fresh temp dir and returns the
// path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := t.TempDir() + "/" + name
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
