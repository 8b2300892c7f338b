package proc

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two commands of one node share the node's PID namespace, whose /proc
// lists them and its pid 1 only: not this test process (the stand-in for
// the API server) nor any other process of the machine.
func TestNodeCommandsShareAPIDNamespaceOfTheirOwn(t *testing.T) {
	if err := SandboxAvailable(); err != nil {
		t.Skipf("this machine allows no node sandbox: %v", err)
	}
	if err := PIDNamespaceAvailable(); err != nil {
		t.Skipf("no PID namespace per node here: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), ".sky", "skygo", "local", "clusters", "c", "node-0")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	marker := EnvNode + "=" + home
	t.Cleanup(func() {
		if err := KillProcsWithEnvNow(marker); err != nil {
			t.Error(err)
		}
	})
	env := []string{"PATH=" + os.Getenv("PATH"), marker, "SECRET_OF_JOB_A=a-secret"}

	sleeper := SandboxCommand(exe, home, []string{"/bin/sleep", "300"})
	sleeper.Env = env
	if err := StartNode(sleeper, home, ""); err != nil {
		t.Fatal(err)
	}
	go func() { _ = sleeper.Wait() }()

	// What a second job of the node sees: every pid in its /proc, pid 1's
	// command, whether anything there shows the first job's secret or
	// this process's environment, and its open-files limit.
	script := `ls /proc | grep -E '^[0-9]+$' | tr '\n' ' '; echo
tr '\0' ' ' < /proc/1/cmdline; echo
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c SECRET_OF_JOB_A
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c ` + "PIDNS_TEST_PARENT" + `
ulimit -n`
	probe := SandboxCommand(exe, home, []string{"/bin/bash", "-c", script})
	probe.Env = env[:2]
	var out strings.Builder
	probe.Stdout, probe.Stderr = &out, &out
	if err := StartNode(probe, home, ""); err != nil {
		t.Fatal(err)
	}
	if err := probe.Wait(); err != nil && !strings.Contains(err.Error(), "exit status") {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 5 {
		t.Fatalf("probe printed %q", out.String())
	}
	pids := strings.Fields(lines[0])
	if !slices.Contains(pids, "1") || slices.Contains(pids, strconv.Itoa(os.Getpid())) && len(pids) > 8 {
		t.Errorf("the node's /proc lists %v; want its pid 1 and a few of its own processes", pids)
	}
	// pid 1, the sleeper, bash and its pipeline: a handful, not the
	// hundreds of this machine.
	if len(pids) > 8 {
		t.Errorf("the node's /proc lists %d processes (%v); want only the node's", len(pids), pids)
	}
	if !strings.Contains(lines[1], PIDInitVerb) {
		t.Errorf("pid 1 of the node is %q; want sky agent %s", lines[1], PIDInitVerb)
	}
	if strings.TrimSpace(lines[2]) != "1" {
		t.Errorf("the other job's secret appears %s times in the node's /proc; want once (its own sleeper)", lines[2])
	}
	if strings.TrimSpace(lines[3]) != "0" {
		t.Errorf("the test process's environment is readable from the node (%s hits)", lines[3])
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatUint(min(1<<20, lim.Max), 10); strings.TrimSpace(lines[4]) != want {
		t.Errorf("ulimit -n in the node = %s, want %s", lines[4], want)
	}

	// Stopping the node ends its pid 1 with everything else.
	if err := KillProcsWithEnvNow(marker); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(NodeInitFile(home))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("no pid-init recorded in %s", NodeInitFile(home))
	}
	if !WaitGone(pid, 10*time.Second) {
		t.Errorf("the node's pid 1 (%d) outlived the node", pid)
	}
}
