package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// A teardown cut short after the record file went (or one whose record is
// corrupt) still leaves a node's processes and directories: Remnants finds
// them by name, and Terminate removes all of them and says so only once
// they are gone.
func TestTerminateReapsWhatNoRecordLists(t *testing.T) {
	ctx := context.Background()
	p := newProv(t)
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "half", NumNodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	home := info.Nodes[0].Home
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), proc.EnvNode+"="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	for _, damage := range []func(){
		func() { _ = os.Remove(p.recordPath("half")) },
		func() { _ = os.WriteFile(p.recordPath("half"), []byte("{corrupt"), 0o644) },
	} {
		damage()
		names, err := p.Remnants()
		if err != nil || !slices.Contains(names, "half") {
			t.Fatalf("Remnants() = %v, %v; want half listed", names, err)
		}
		if len(p.remainsOf("half")) == 0 {
			t.Fatalf("remainsOf(half) is empty before the teardown")
		}
		if err := p.Terminate(ctx, "half"); err != nil {
			t.Fatalf("Terminate: %v", err)
		}
		select {
		case <-done:
		default:
			t.Fatalf("the node's process survived Terminate")
		}
		if left := p.remainsOf("half"); len(left) > 0 {
			t.Fatalf("left after Terminate: %v", left)
		}
		if names, _ := p.Remnants(); slices.Contains(names, "half") {
			t.Fatalf("Remnants() still lists half after Terminate: %v", names)
		}
		// Again, with only the directory left: nothing to kill.
		if err := os.MkdirAll(filepath.Join(p.ClusterDir("half"), "node-0"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// The lock of the local root is given up when the launch waiting for it
// is cancelled, so that `sky down` can interrupt a launch stuck there.
func TestLockWaitEndsWithContext(t *testing.T) {
	p := newProv(t)
	unlock, err := p.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		u, err := p.lock(ctx)
		if err == nil {
			u()
		}
		errc <- err
	}()
	cancel()
	if err := <-errc; err == nil {
		t.Fatalf("lock taken while held elsewhere")
	}
}
