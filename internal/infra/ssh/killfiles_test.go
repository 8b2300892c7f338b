package ssh

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil"
)

// startTime is field 22 of /proc/PID/stat (clock ticks since boot).
func startTime(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndex(s, ")")+2:])[19]
}

// session starts `sleep` as the leader of a new session, as the runner's
// commands and the agent's ranks are.
// The returned channel gives the signal that ended it.
func session(t *testing.T) (*exec.Cmd, <-chan syscall.Signal) {
	t.Helper()
	c := exec.Command("sleep", "300")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan syscall.Signal, 1)
	go func() {
		_ = c.Wait()
		ws, _ := c.ProcessState.Sys().(syscall.WaitStatus)
		ended <- ws.Signal()
	}()
	t.Cleanup(func() { _ = c.Process.Kill() })
	return c, ended
}

func runKillFiles(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", killFilesScript(provision.Quote(dir)+"/*")).CombinedOutput(); err != nil {
		t.Fatalf("kill script: %v: %s", err, out)
	}
}

// A recorded session id is signalled only while it still names the
// recorded process: a pid whose start time differs from the recorded one,
// or whose process started after a pid-only file was written, belongs to
// someone else now (pid reuse) and is left alone.
func TestKillFilesChecksIdentity(t *testing.T) {
	cases := []struct {
		name   string
		record func(pid int, start string) string
		mtime  time.Duration // how long ago the file was written
		killed bool
	}{
		{"pid and its start time", func(pid int, st string) string { return strconv.Itoa(pid) + " " + st }, 0, true},
		{"pid with another start time", func(pid int, st string) string {
			n, _ := strconv.Atoi(st)
			return strconv.Itoa(pid) + " " + strconv.Itoa(n+1)
		}, 0, false},
		{"pid alone, written after the start", func(pid int, _ string) string { return strconv.Itoa(pid) }, 0, true},
		{"pid alone, written before the start", func(pid int, _ string) string { return strconv.Itoa(pid) }, time.Hour, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, ended := session(t)
			f := filepath.Join(dir, "rec.pid")
			if err := os.WriteFile(f, []byte(tc.record(c.Process.Pid, startTime(t, c.Process.Pid))+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.mtime > 0 {
				old := time.Now().Add(-tc.mtime)
				if err := os.Chtimes(f, old, old); err != nil {
					t.Fatal(err)
				}
			}
			runKillFiles(t, dir)
			if _, err := os.Stat(f); err == nil {
				t.Errorf("the file is still there")
			}
			// The script has ended, so any SIGKILL it sent is pending or
			// done: the first fatal signal is the one the process dies of.
			_ = c.Process.Signal(syscall.SIGTERM)
			var sig syscall.Signal
			select {
			case sig = <-ended:
			case <-time.After(10 * time.Second):
				t.Fatalf("process %d outlived SIGTERM", c.Process.Pid)
			}
			if got := sig == syscall.SIGKILL; got != tc.killed {
				t.Errorf("process %d ended by %v; killed by the script: %v, want %v", c.Process.Pid, sig, got, tc.killed)
			}
		})
	}
}

// The runner's wrapper records its session's id with the start time, and
// the kill script ends that session.
func TestWrapRecordsIdentity(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pg")
	c := exec.Command("sh", "-c", wrap(f, "sleep 300"))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	t.Cleanup(func() { _ = c.Process.Kill() })
	var rec []string
	if !testutil.WaitFor(10*time.Second, 10*time.Millisecond, func() bool {
		b, _ := os.ReadFile(f)
		rec = strings.Fields(string(b))
		return len(rec) == 2
	}) {
		t.Fatalf("no \"PID START\" in %s: %q", f, rec)
	}
	pid, err := strconv.Atoi(rec[0])
	if err != nil {
		t.Fatal(err)
	}
	if st := startTime(t, pid); st != rec[1] {
		t.Fatalf("recorded start time %s, process %d started at %s", rec[1], pid, st)
	}
	runKillFiles(t, dir)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the wrapped command still runs after its session was killed")
	}
}
