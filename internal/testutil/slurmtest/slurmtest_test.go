package slurmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	skyssh "github.com/skygo/skygo/internal/infra/ssh"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// TestSlurmClusterWorks checks, as the test user on the login node, what
// the Slurm infra's tests rely on: the nodes are idle, a 2-node GPU job
// runs on 2 distinct nodes with CUDA_VISIBLE_DEVICES set by Slurm, and
// accounting answers for it.
func TestSlurmClusterWorks(t *testing.T) {
	c := Get(t)
	if got := strings.TrimSpace(c.Run(t, "echo $SLURM_CONF")); got != c.SlurmConf {
		t.Fatalf("SLURM_CONF on the login node = %q, want %q", got, c.SlurmConf)
	}
	if got := strings.TrimSpace(c.Run(t, "whoami")); got != c.User {
		t.Fatalf("login user = %q, want %q", got, c.User)
	}

	var nodes []string
	for _, l := range strings.Split(strings.TrimSpace(c.Run(t, "sinfo -h -N -p cpu -o '%N %t %c %m %G'")), "\n") {
		f := strings.Fields(l)
		want := fmt.Sprintf("idle %d %d gpu:%s:%d", c.CPUsPerNode, c.MemMBPerNode, c.GPUType, c.GPUsPerNode)
		if len(f) < 5 || strings.Join(f[1:], " ") != want {
			t.Fatalf("sinfo line %q, want \"<node> %s\"", l, want)
		}
		nodes = append(nodes, f[0])
	}
	if !slices.Equal(nodes, c.Nodes) {
		t.Fatalf("sinfo nodes %v, want %v", nodes, c.Nodes)
	}

	dir := c.TempDir(t)
	out := filepath.Join(dir, "out")
	job := strings.TrimSpace(c.Run(t, fmt.Sprintf(
		`sbatch --parsable -D %s -o %s -N2 --gres=gpu:%s:2 -p gpu --wrap 'srun bash -c "echo node=\$(hostname) cvd=\$CUDA_VISIBLE_DEVICES"'`,
		dir, out, c.GPUType)))
	if job == "" {
		t.Fatal("sbatch printed no job id")
	}

	// sacct answers from slurmdbd, which hears of the job's end a moment
	// after slurmctld does.
	var acct string
	for deadline := time.Now().Add(60 * time.Second); ; {
		acct = strings.TrimSpace(c.Run(t, "sacct -n -X -P -j "+job+" -o State,NNodes,AllocTRES"))
		if strings.HasPrefix(acct, "COMPLETED|") {
			break
		}
		if strings.HasPrefix(acct, "FAILED") || strings.HasPrefix(acct, "CANCELLED") || time.Now().After(deadline) {
			o, _ := c.Exec("cat " + out)
			t.Fatalf("job %s: sacct %q; output:\n%s", job, acct, o)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if f := strings.Split(acct, "|"); f[1] != "2" || !strings.Contains(f[2], "gres/gpu=4") {
		t.Errorf("sacct of job %s = %q, want 2 nodes and gres/gpu=4", job, acct)
	}

	local, err := os.ReadFile(filepath.Join(c.LocalHome, strings.TrimPrefix(out, c.Home)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Run(t, "cat "+out); got != string(local) {
		t.Errorf("%s on the login node %q, from the machine %q", out, got, local)
	}
	lines := strings.Split(strings.TrimSpace(string(local)), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		var node, cvd string
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "node="); ok {
				node = v
			}
			if v, ok := strings.CutPrefix(f, "cvd="); ok {
				cvd = v
			}
		}
		if !slices.Contains(c.Nodes, node) || cvd == "" {
			t.Errorf("job output line %q: want node=<one of %v> and a CUDA_VISIBLE_DEVICES", l, c.Nodes)
		}
		seen[node] = true
	}
	if len(lines) != 2 || len(seen) != 2 {
		t.Errorf("job output %q: want one line from each of 2 distinct nodes", lines)
	}

	// SkyGo's model: an allocation that sleeps, and commands reaching one
	// of its nodes through srun --overlap from the login node.
	alloc := strings.TrimSpace(c.Run(t, fmt.Sprintf("sbatch --parsable -D %s -o /dev/null -N2 -p gpu --gres=gpu:%s:2 --wrap 'sleep 600'", dir, c.GPUType)))
	for deadline := time.Now().Add(30 * time.Second); ; {
		st := strings.TrimSpace(c.Run(t, "squeue -h -j "+alloc+" -o %T"))
		if st == "RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocation %s is %q after 30s", alloc, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	allocNodes := strings.Fields(c.Run(t, "scontrol show hostnames $(squeue -h -j "+alloc+" -o %N)"))
	if len(allocNodes) != 2 {
		t.Fatalf("allocation %s nodes %q", alloc, allocNodes)
	}
	step := strings.Fields(c.Run(t, fmt.Sprintf(
		`srun --overlap --jobid=%s --nodelist=%s --nodes=1 --ntasks=1 --quiet bash -c 'hostname; echo "$CUDA_VISIBLE_DEVICES"'`, alloc, allocNodes[1])))
	if len(step) != 2 || step[0] != allocNodes[1] || step[1] == "" {
		t.Errorf("srun --overlap on %s printed %q, want its hostname and CUDA_VISIBLE_DEVICES", allocNodes[1], step)
	}
	// Each node has its own /tmp, as a job sees it and as ssh to the node does.
	c.Run(t, fmt.Sprintf("srun --overlap --jobid=%s --nodelist=%s --nodes=1 --ntasks=1 --quiet bash -c 'echo %s > /tmp/slurmtest-%s'", alloc, allocNodes[1], alloc, alloc))
	i := slices.Index(c.Nodes, allocNodes[1])
	if got := strings.TrimSpace(c.RunOn(t, i, "cat /tmp/slurmtest-"+alloc)); got != alloc {
		t.Errorf("/tmp/slurmtest-%s on %s = %q", alloc, allocNodes[1], got)
	}
	if out, err := c.sshExec("root", c.NodeAddrs[(i+1)%len(c.Nodes)], "test -e /tmp/slurmtest-"+alloc+" && echo shared"); err == nil && strings.Contains(out, "shared") {
		t.Errorf("/tmp/slurmtest-%s written on %s is also on another node", alloc, allocNodes[1])
	}

	// The commands a test runs do not show in the machine's process table,
	// so a pgrep for leftovers does not find itself.
	if out := c.Run(t, "pgrep -af slurmtest-pgrep-marker || true"); strings.TrimSpace(out) != "" {
		t.Errorf("pgrep found the test's own command: %s", out)
	}

	// An allocation left behind is cancelled.
	c.CancelAll(t)
	if out := c.Run(t, "squeue -h"); out != "" {
		t.Errorf("squeue after CancelAll: %s", out)
	}
}

// TestWriteSlurmConfig checks that SkyGo's own SSH code (the OpenSSH
// config reader, the Dialer with ~/.sky's known_hosts) reaches the login
// node from the files WriteSlurmConfig writes, trusting the recorded host
// key rather than accepting a new one.
func TestWriteSlurmConfig(t *testing.T) {
	c := Get(t)
	home := t.TempDir()
	if err := c.WriteSlurmConfig(home, "testcluster"); err != nil {
		t.Fatal(err)
	}
	cfg, err := skyssh.LoadConfig(filepath.Join(home, ".slurm", "config"), home)
	if err != nil {
		t.Fatal(err)
	}
	hc := cfg.Lookup("testcluster", home)
	if hc.HostName != c.LoginAddr || hc.User != c.User || hc.Port != "22" || !slices.Equal(hc.IdentityFiles, []string{c.Key}) {
		t.Fatalf("~/.slurm/config says %+v", hc)
	}
	kh := skyssh.DefaultKnownHosts(home)
	before, err := os.ReadFile(kh.File)
	if err != nil {
		t.Fatal(err)
	}
	d := skyssh.NewDialer(kh)
	defer d.Close()
	ep := skyssh.Endpoint{Name: "testcluster", Addr: hc.HostName, Port: 22, User: hc.User, IdentityFiles: hc.IdentityFiles}
	cl, err := d.Client(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Output("sinfo -h -o %P")
	if err != nil {
		t.Fatalf("sinfo over SkyGo's ssh: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{"cpu*", "gpu"}) {
		t.Errorf("sinfo partitions over SkyGo's ssh = %q", got)
	}
	if after, _ := os.ReadFile(kh.File); string(after) != string(before) {
		t.Errorf("the Dialer appended to %s, so the recorded key did not match:\n%s", kh.File, after)
	}
}
