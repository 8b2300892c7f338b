package slurm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/infra"
	slurmnode "github.com/skygo/skygo/internal/infra/slurm/node"
	"github.com/skygo/skygo/internal/optimizer"
)

// testInfra is an Infra over a temporary HOME whose ~/.slurm/config names
// the clusters, with the inventory of "testc" taken from the real
// outputs under testdata (so nothing dials a login node).
func testInfra(t *testing.T, slurmConfig, skyConfig string) *Infra {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".slurm"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".slurm", "config"), []byte(slurmConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if skyConfig != "" {
		if err := os.MkdirAll(filepath.Join(home, ".sky"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".sky", "config.yaml"), []byte(skyConfig), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	in, err := Open(infra.Env{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	s := in.(*Infra)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	parts, err := ParsePartitions(read("partitions-testcluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := ParseSinfoNodes(read("sinfo-testcluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.inv["testc"] = &inventory{partitions: parts, partsAt: now, nodes: nodes, nodesAt: now, selectMemory: true}
	return s
}

const twoClusters = "Host testc\n  HostName 10.0.0.1\n  User sky\nHost other\n  HostName 10.0.0.2\n  User sky\nHost *\n  Port 22\n"

func TestFeasibleFromInventory(t *testing.T) {
	in := testInfra(t, twoClusters, "slurm:\n  allowed_clusters: [testc]\n  pricing:\n    cpu: 0.5\n    accelerators: {fake: 2}\n")
	c := in.Capacity()
	ctx := context.Background()

	cands, why := c.Feasible(ctx, optimizer.Request{CPUs: catalog.Bound{Value: 2}}, 2)
	if len(cands) != 2 || cands[0].Zone != "cpu" || cands[1].Zone != "gpu" {
		t.Fatalf("2 CPUs on 2 nodes: want the default partition first, then gpu; got %+v (%s)", cands, why)
	}
	if cands[0].Region != "testc" || cands[0].InstanceType != "2CPU--2GB" || cands[0].HourlyPrice != 1 {
		t.Fatalf("candidate: %+v", cands[0])
	}

	cands, _ = c.Feasible(ctx, optimizer.Request{AccName: "fake", AccCount: 2, CPUs: catalog.Bound{Value: 1}, Memory: catalog.Bound{Value: 1}}, 1)
	if len(cands) != 2 || cands[0].InstanceType != "1CPU--1GB--fake:2" || cands[0].HourlyPrice != 4 {
		t.Fatalf("fake:2: %+v", cands)
	}

	_, why = c.Feasible(ctx, optimizer.Request{AccName: "H100", AccCount: 1}, 1)
	if !strings.Contains(why, "No GPU nodes matching 'H100' (count>=1) found on Slurm cluster 'testc'") || !strings.Contains(why, "Discovered GPU types on cluster: ['fake']") {
		t.Fatalf("unknown GPU: %q", why)
	}
	if _, why = c.Feasible(ctx, optimizer.Request{CPUs: catalog.Bound{Value: 2}}, 4); !strings.Contains(why, "needed") && !strings.Contains(why, "fit") {
		t.Fatalf("4 nodes of a 3-node cluster: %q", why)
	}
	if _, why = c.Feasible(ctx, optimizer.Request{Zone: "gpu"}, 1); why != "Cannot specify partition (zone) without specifying cluster (region) for Slurm." {
		t.Fatalf("zone without region: %q", why)
	}
	if _, why = c.Feasible(ctx, optimizer.Request{Region: "other"}, 1); !strings.Contains(why, `no Slurm cluster "other"`) {
		t.Fatalf("a cluster outside allowed_clusters: %q", why)
	}
	if _, why = c.Feasible(ctx, optimizer.Request{Region: "testc", Zone: "nope"}, 1); !strings.Contains(why, `no partition "nope"`) {
		t.Fatalf("unknown partition: %q", why)
	}
	for _, r := range []optimizer.Request{{UseSpot: true}, {Ports: []string{"8080"}}, {InstanceType: "m5.large"}} {
		if cands, why := c.Feasible(ctx, r, 1); len(cands) != 0 || why == "" {
			t.Fatalf("%+v should be refused, got %v %q", r, cands, why)
		}
	}
	cands, why = c.Feasible(ctx, optimizer.Request{InstanceType: "2CPU--1GB--fake:1"}, 1)
	if len(cands) != 2 || cands[0].VCPUs != 2 {
		t.Fatalf("a virtual instance type: %+v %q", cands, why)
	}
}

func TestPlaceAndJobName(t *testing.T) {
	in := testInfra(t, twoClusters, "")
	if got := in.Place("testc", "gpu").String(); got != "slurm/testc/gpu" {
		t.Fatalf("Place: %s", got)
	}
	if got := in.Place("", "").String(); got != "slurm" {
		t.Fatalf("Place: %s", got)
	}
	a, b := in.JobName("dev"), in.JobName("dev")
	if a != b || !strings.HasPrefix(a, "dev-") || len(a) != len("dev-")+8 {
		t.Fatalf("job name %q / %q", a, b)
	}
	other := testInfra(t, twoClusters, "")
	if other.JobName("dev") == a {
		t.Fatal("two servers (homes) got the same Slurm job name for a cluster")
	}
	if n := in.JobName(strings.Repeat("x", 200)); len(n) != 120 {
		t.Fatalf("job names are capped at 120: %d", len(n))
	}
}

func TestLoginConfigErrors(t *testing.T) {
	in := testInfra(t, "Host nohost\n  User sky\nHost nouser\n  HostName 10.0.0.3\n", "")
	if _, err := in.login("nohost"); err == nil || !strings.Contains(err.Error(), "HostName is missing, please check your ~/.slurm/config and try again.") {
		t.Fatalf("no HostName: %v", err)
	}
	if _, err := in.login("nouser"); err == nil || !strings.Contains(err.Error(), "User is missing") {
		t.Fatalf("no User: %v", err)
	}
	if _, err := in.login("ghost"); err == nil || !strings.Contains(err.Error(), "no Host ghost") {
		t.Fatalf("unknown cluster: %v", err)
	}
	empty := &Infra{env: infra.Env{Home: t.TempDir()}, inv: map[string]*inventory{}}
	if _, _, err := empty.clusters(); err == nil || !strings.Contains(err.Error(), "Slurm configuration file ~/.slurm/config does not exist.") {
		t.Fatalf("no config: %v", err)
	}
}

func TestRunnerCommandAndScripts(t *testing.T) {
	r := NewRunner(nil, nil, "42", "n1", "10.0.0.1", "/tmp/dev-1234", "/home/u/.sky/bin/sky-node")
	cmd := r.command("echo 'hi there'")
	for _, want := range []string{"srun --overlap --jobid=42 --nodelist=n1 --nodes=1 --ntasks=1 --quiet bash -c ", "export HOME=/tmp/dev-1234"} {
		if !strings.Contains(cmd, want) {
			t.Fatalf("command lacks %q: %s", want, cmd)
		}
	}
	out, err := exec.Command("bash", "-n", "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("the wrapped command is not valid bash: %v %s", err, out)
	}
	if err := exec.Command("bash", "-n", "-c", KillHomeProcsScript("/tmp/a b'c")).Run(); err != nil {
		t.Fatalf("the kill script is not valid bash: %v", err)
	}
	if r.SkyCommand() != "/home/u/.sky/bin/sky-node" || r.Home() != "/tmp/dev-1234" || r.NodeIP() != "10.0.0.1" {
		t.Fatalf("runner facts: %s %s %s", r.SkyCommand(), r.Home(), r.NodeIP())
	}
	for _, c := range []struct{ stderr, want string }{
		{"srun: error: Unable to create step for job 42: Invalid job id specified\n", "the allocation is gone"},
		{"srun: error: Unable to confirm allocation for job 42: Invalid job id specified\n", "the allocation is gone"},
		{"bash: foo: command not found\n", ""},
		{"srun: error: n1: task 0: Exited with exit code 3\n", ""},
	} {
		if got := slurmnode.SrunStepFailure(c.stderr); !strings.HasPrefix(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("stepError(%q) = %q", c.stderr, got)
		}
	}
}

// TestKillHomeProcsScript runs the kill snippet for real: a process with
// the given HOME dies, one with another HOME and the snippet's own shell
// live.
func TestKillHomeProcsScript(t *testing.T) {
	home := filepath.Join(t.TempDir(), "node home")
	victim := exec.Command("sleep", "300")
	victim.Env = []string{"HOME=" + home}
	bystander := exec.Command("sleep", "300")
	bystander.Env = []string{"HOME=" + home + "-other"}
	for _, c := range []*exec.Cmd{victim, bystander} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = bystander.Process.Kill(); _ = victim.Process.Kill() })
	sh := exec.Command("bash", "-c", KillHomeProcsScript(home))
	sh.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("kill script: %v %s", err, out)
	}
	done := make(chan error, 1)
	go func() { done <- victim.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the process with the node's HOME survived")
	}
	if err := syscall.Kill(bystander.Process.Pid, 0); err != nil {
		t.Fatalf("the process with another HOME died: %v", err)
	}
}
