package slurmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/paths"
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

	lines := strings.Split(strings.TrimSpace(c.Run(t, "cat "+out)), "\n")
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

	// An allocation left behind is cancelled.
	c.Run(t, "sbatch -N3 -p cpu --wrap 'sleep 600'")
	c.CancelAll(t)
}

// TestWriteSlurmConfig checks the client-side files a SkyGo test HOME gets.
func TestWriteSlurmConfig(t *testing.T) {
	c := Get(t)
	home := t.TempDir()
	if err := c.WriteSlurmConfig(home, "testcluster"); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(home, ".slurm", "config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Host testcluster\n", "HostName " + c.LoginAddr + "\n", "User sky\n", "IdentityFile " + c.Key + "\n"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("~/.slurm/config lacks %q:\n%s", want, cfg)
		}
	}
	// The known_hosts line must let the system ssh in with strict checking.
	x := *c
	x.KnownHosts = paths.KnownHosts(home)
	if got := strings.TrimSpace(x.Run(t, "hostname")); got != c.Nodes[0] {
		t.Errorf("login node hostname = %q, want %q", got, c.Nodes[0])
	}
}
