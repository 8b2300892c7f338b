package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

func newProv(t *testing.T) *Provisioner {
	t.Helper()
	p, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p.CPUs, p.MemoryGB, p.StopGrace = 4, 8, 200*time.Millisecond
	// Loopback addresses, whatever the machine allows: these tests are
	// about the records; netns_test.go covers namespaces.
	p.Net = &Network{Why: "test"}
	return p
}

func TestProvisionAllocatesDistinctLoopbackAddresses(t *testing.T) {
	ctx := context.Background()
	p := newProv(t)
	a, err := p.Provision(ctx, provision.ClusterSpec{Name: "a", NumNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Provision(ctx, provision.ClusterSpec{Name: "b", NumNodes: 1, Resources: provision.Resources{CPUs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{a.Nodes[0].InternalIP, a.Nodes[1].InternalIP, b.Nodes[0].InternalIP}
	if want := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("IPs = %v, want %v", got, want)
	}
	if a.Nodes[0].CPUs != 4 || b.Nodes[0].CPUs != 2 {
		t.Errorf("advertised CPUs = %g, %g; want machine's 4 and requested 2", a.Nodes[0].CPUs, b.Nodes[0].CPUs)
	}
	for _, n := range a.Nodes {
		if st, err := os.Stat(n.Home); err != nil || !st.IsDir() {
			t.Errorf("node home %s missing: %v", n.Home, err)
		}
	}
	// Idempotent: same nodes again.
	again, err := p.Provision(ctx, provision.ClusterSpec{Name: "a", NumNodes: 2})
	if err != nil || again.Nodes[1].InternalIP != "127.0.0.3" {
		t.Fatalf("re-provision = %+v, %v", again, err)
	}
	// A different shape of an existing cluster is a config error.
	_, err = p.Provision(ctx, provision.ClusterSpec{Name: "a", NumNodes: 3})
	var cfgErr *provision.ConfigError
	if !errors.As(err, &cfgErr) {
		t.Fatalf("3 nodes on a 2-node cluster: %v, want ConfigError", err)
	}
	// Freed addresses are reused.
	if err := p.Terminate(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, err := p.Provision(ctx, provision.ClusterSpec{Name: "c"})
	if err != nil || c.Nodes[0].InternalIP != "127.0.0.2" {
		t.Fatalf("after terminate, new cluster got %+v, %v; want 127.0.0.2", c, err)
	}
}

func TestProvisionCapacityAndConfigErrors(t *testing.T) {
	p := newProv(t)
	tests := []struct {
		spec    provision.ClusterSpec
		capac   bool
		mention string
	}{
		{provision.ClusterSpec{Name: "x", Resources: provision.Resources{CPUs: 64}}, true, "this machine has 4"},
		{provision.ClusterSpec{Name: "x", Resources: provision.Resources{MemoryGB: 1000}}, true, "GB of memory"},
		{provision.ClusterSpec{Name: "x", Resources: provision.Resources{GPUs: map[string]float64{"A100": 1}}}, true, "no GPUs"},
		{provision.ClusterSpec{Name: "../etc"}, false, "cluster name"},
	}
	for _, tt := range tests {
		_, err := p.Provision(context.Background(), tt.spec)
		var ce *provision.CapacityError
		var cfg *provision.ConfigError
		if tt.capac && !errors.As(err, &ce) || !tt.capac && !errors.As(err, &cfg) {
			t.Errorf("%+v: error %T %v", tt.spec, err, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%+v: %q does not mention %q", tt.spec, err, tt.mention)
		}
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	if !proc.WaitGone(pid, 3*time.Second) {
		t.Fatalf("process %d still alive", pid)
	}
}

func TestStopKillsNodeProcessesStartKeepsTerminateRemoves(t *testing.T) {
	ctx := context.Background()
	p := newProv(t)
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "s", NumNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	runners, _ := p.Runners(info)
	var pids []int
	for _, r := range runners {
		// A detached process in its own session: only the env marker ties it to the node.
		res, err := r.Run(ctx, "mkdir -p sky_workdir; echo data > sky_workdir/f; setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!", provision.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		pids = append(pids, pid)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := p.Stop(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
	states, _ := p.Query(ctx, "s")
	if len(states) != 2 || states[0].Status != provision.NodeStopped {
		t.Fatalf("after stop: %+v", states)
	}
	if err := p.Stop(ctx, "s"); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := p.Start(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(info.Nodes[1].Home, "sky_workdir", "f")); err != nil || string(b) != "data\n" {
		t.Fatalf("workdir after stop/start: %q %v", b, err)
	}
	if err := p.Terminate(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.ClusterDir("s")); !os.IsNotExist(err) {
		t.Fatalf("cluster dir still there: %v", err)
	}
	if states, err := p.Query(ctx, "s"); err != nil || len(states) != 0 {
		t.Fatalf("query after terminate: %+v %v", states, err)
	}
	if err := p.Terminate(ctx, "s"); err != nil {
		t.Fatalf("second terminate: %v", err)
	}
}
