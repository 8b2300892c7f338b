package proc

import (
	"io"
	"os"
	"os/exec"
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
	if !slices.Contains(pids, "1") {
		t.Errorf("the node's /proc lists %v; want its pid 1 among them", pids)
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

// A stop's SIGTERM leaves pid 1 up while the node's processes finish, then
// it exits; the next command of the node gets a new namespace, not the
// dead one the record still names.
func TestNodePID1OutlastsTheNodesProcessesAndIsMadeAgain(t *testing.T) {
	if err := SandboxAvailable(); err != nil {
		t.Skipf("this machine allows no node sandbox: %v", err)
	}
	if err := PIDNamespaceAvailable(); err != nil {
		t.Skipf("no PID namespace per node here: %v", err)
	}
	exe, _ := os.Executable()
	home := filepath.Join(t.TempDir(), ".sky", "skygo", "local", "clusters", "c", "node-0")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	marker := EnvNode + "=" + home
	t.Cleanup(func() { _ = KillProcsWithEnvNow(marker) })
	start := func(stdout io.Writer, argv ...string) *exec.Cmd {
		c := SandboxCommand(exe, home, argv)
		c.Env = []string{"PATH=" + os.Getenv("PATH"), marker}
		c.Stdout = stdout
		if err := StartNode(c, home, ""); err != nil {
			t.Fatal(err)
		}
		return c
	}
	init1 := func() int {
		b, _ := os.ReadFile(NodeInitFile(home))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}

	job := start(nil, "/bin/sleep", "300")
	first := init1()
	if err := syscall.Kill(first, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// pid 1 handles the signal in its loop; the job is still there, so
	// it must still be there too once the job has been checked alive.
	if !Alive(job.Process.Pid) || !Alive(first) {
		t.Fatalf("SIGTERM to the node's pid 1 ended it (alive %v) or the job (alive %v)", Alive(first), Alive(job.Process.Pid))
	}
	_ = job.Process.Kill()
	_ = job.Wait()
	if !WaitGone(first, 10*time.Second) {
		t.Fatalf("the node's pid 1 (%d) stayed after its last process ended", first)
	}

	var out strings.Builder
	probe := start(&out, "/bin/sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline")
	_ = probe.Wait()
	if probe.ProcessState == nil || !probe.ProcessState.Success() {
		t.Fatalf("a command after pid 1 ended: %v", probe.ProcessState)
	}
	if second := init1(); second == first || second <= 0 || !strings.Contains(out.String(), PIDInitVerb) {
		t.Errorf("after pid 1 %d ended, the node's next command ran under %d (%q)", first, second, out.String())
	}
}
