package proc

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Command is exec.CommandContext for work that must not outlive its
// context: the child gets its own process group, and cancelling ctx kills
// that whole group (SIGKILL), so a cancelled request leaves no
// grandchildren running.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The child leads its group, so -pid addresses the whole group.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// ExitCode maps a finished process to a shell-style code: 128+signal when
// it was killed by a signal.
func ExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
