package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestAliveSeesZombiesAsGone(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Fatalf("running child %d not Alive", pid)
	}
	// Killed but not yet reaped: a zombie, which must count as gone.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !WaitGone(pid, 3*time.Second) {
		t.Errorf("killed child %d (a zombie until reaped) still Alive", pid)
	}
	_ = cmd.Wait()
	if Alive(pid) {
		t.Errorf("reaped child %d still Alive", pid)
	}
}

func TestAliveRejectsGroupPids(t *testing.T) {
	for _, pid := range []int{0, -1} {
		if Alive(pid) {
			t.Errorf("Alive(%d) = true; kill(%d, 0) addresses a group, not a process", pid, pid)
		}
	}
}
