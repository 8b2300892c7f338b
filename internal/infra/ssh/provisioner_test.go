package ssh

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/testutil"
)

// newTestProvisioner builds a provisioner the way `sky` would: the pool
// from the ssh_node_pools.yaml that testinfra wrote, a private HOME.
func newTestProvisioner(t *testing.T, h *testHosts, home string) *Provisioner {
	t.Helper()
	pools, err := LoadPools(filepath.Join(h.State, "ssh-hosts", "ssh_node_pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pool := pools["testpool"]
	if pool == nil || len(pool.Hosts) != numTestHosts {
		t.Fatalf("testpool: %+v", pool)
	}
	res, err := NewResolver(home)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDialer(DefaultKnownHosts(home))
	t.Cleanup(func() { d.Close() })
	// The claims live in a real state database, as in the API server; one
	// per HOME, shared by every provisioner of that HOME.
	st, err := state.OpenSQLite(context.Background(), paths.StateDB(home))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return NewProvisioner(home, pool, res, d, st)
}

func TestProvisionClaimsHostsExclusively(t *testing.T) {
	h := sshHosts(t)
	home := t.TempDir()
	ctx := context.Background()

	// Two launches at once (two provisioners, as two processes would
	// be) each want 2 of the 3 hosts: exactly one gets them.
	p1, p2 := newTestProvisioner(t, h, home), newTestProvisioner(t, h, home)
	var wg sync.WaitGroup
	infos := make([]*provision.ClusterInfo, 2)
	errs := make([]error, 2)
	for i, p := range []*Provisioner{p1, p2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			infos[i], errs[i] = p.Provision(ctx, provision.ClusterSpec{Name: []string{"c1", "c2"}[i], NumNodes: 2})
		}()
	}
	wg.Wait()
	winner, loser := 0, 1
	if errs[0] != nil {
		winner, loser = 1, 0
	}
	if errs[winner] != nil {
		t.Fatalf("both launches failed: %v / %v", errs[0], errs[1])
	}
	var ce *provision.CapacityError
	if !errors.As(errs[loser], &ce) || !strings.Contains(ce.Error(), "2 busy") || !strings.Contains(ce.Error(), "ssh/testpool") {
		t.Fatalf("second launch: got %v, want a CapacityError saying 2 hosts are busy", errs[loser])
	}
	name := infos[winner].Name
	info := infos[winner]
	if len(info.Nodes) != 2 || info.Cloud != "SSH" || info.Region != "ssh-testpool" {
		t.Fatalf("info: %+v", info)
	}
	for i, n := range info.Nodes {
		if n.InternalIP != h.IPs[i] || n.ID != h.IPs[i] || n.Home != "/root" || n.CPUs < 1 || n.MemoryGB <= 0 || n.Index != i {
			t.Fatalf("node %d: %+v", i, n)
		}
	}
	// Idempotent: the same launch again returns the same hosts.
	again, err := p1.Provision(ctx, provision.ClusterSpec{Name: name, NumNodes: 2})
	if err != nil || again.Nodes[0].InternalIP != info.Nodes[0].InternalIP {
		t.Fatalf("re-provision: %+v %v", again, err)
	}
	if _, err := p1.Provision(ctx, provision.ClusterSpec{Name: name, NumNodes: 3}); !errors.As(err, new(*provision.ConfigError)) {
		t.Fatalf("re-provision with another size: %v", err)
	}
	// The remaining host is free for a 1-node cluster, which does not fit
	// when it asks for more CPUs than the host has.
	if _, err := p1.Provision(ctx, provision.ClusterSpec{Name: "big", NumNodes: 1, Resources: provision.Resources{CPUs: 10000}}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "10000 CPUs requested") {
		t.Fatalf("too big: %v", err)
	}
	if _, err := p1.Provision(ctx, provision.ClusterSpec{Name: "gpu", NumNodes: 1, Resources: provision.Resources{GPUs: map[string]float64{"A100": 1}}}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "A100:1 requested, host has 0") {
		t.Fatalf("gpu: %v", err)
	}

	if err := p1.Stop(ctx, name); !errors.As(err, new(*provision.NotSupportedError)) || !strings.Contains(err.Error(), "use sky down") {
		t.Fatalf("Stop: %v", err)
	}
	if st, err := p1.Query(ctx, name); err != nil || len(st) != 2 || st[0].Status != provision.NodeUp || st[1].Status != provision.NodeUp {
		t.Fatalf("Query: %+v %v", st, err)
	}
	if st, err := p1.Query(ctx, "nope"); err != nil || len(st) != 0 {
		t.Fatalf("Query of a missing cluster: %+v %v", st, err)
	}

	// Processes the cluster started: a running command on each node and,
	// on the head, a daemon in its own session that recorded its pid the
	// way the agent does.
	runners, err := p1.Runners(info)
	if err != nil {
		t.Fatal(err)
	}
	if runners[0].NodeIP() != h.IPs[0] || runners[0].Home() != "/root" {
		t.Fatalf("runner: %s %s", runners[0].NodeIP(), runners[0].Home())
	}
	res, err := runners[0].Run(ctx, `mkdir -p ~/.sky/agent ~/sky_workdir; setsid bash -c 'echo $$ > ~/.sky/agent/daemon.pid; exec sleep 602' </dev/null >/dev/null 2>&1 & sleep 0.3; cat ~/.sky/agent/daemon.pid`, provision.RunOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("starting daemon: %v %s", err, res.Stderr)
	}
	daemonPid := strings.TrimSpace(string(res.Stdout))
	streams := make(chan error, len(runners))
	for _, r := range runners {
		go func() {
			_, err := r.Stream(ctx, "sleep 600", nil, nil)
			streams <- err
		}()
	}
	check := NewRunner(p1.Dialer, runners[0].(*Runner).Endpoint(), "", "~/.sky/run-check", "")
	waitFor(t, "recorded commands", func() bool {
		res, _ := runners[1].Run(ctx, "ls "+PgidDir(name)+" | wc -l", provision.RunOptions{})
		// the ls itself is recorded too
		return strings.TrimSpace(string(res.Stdout)) == "2"
	})

	if err := p2.Terminate(ctx, name); err != nil {
		t.Fatal(err)
	}
	for range runners {
		select {
		case <-streams:
		case <-time.After(15 * time.Second):
			t.Fatal("a running command survived Terminate")
		}
	}
	res, _ = check.Run(ctx, "ps -e -o pid=,sid=,stat= | awk -v s="+daemonPid+" '$2==s && $3 !~ /^Z/'; ls -d ~/.sky/clusters/"+name+" ~/.sky/agent ~/sky_workdir 2>&1 | grep -vc 'No such'", provision.RunOptions{})
	if got := string(res.Stdout); got != "0\n" {
		t.Fatalf("after Terminate, daemon session or cluster dirs left: %q", got)
	}
	// Released: the loser can have its hosts now.
	other := []string{"c1", "c2"}[loser]
	if _, err := p2.Provision(ctx, provision.ClusterSpec{Name: other, NumNodes: 2}); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if err := p2.Terminate(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := p2.Terminate(ctx, other); err != nil {
		t.Fatalf("second Terminate: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testutil.WaitFor(10*time.Second, 100*time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestGeneratedSSHConfigWorksWithSystemSSH(t *testing.T) {
	h := sshHosts(t)
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	userCfg := "Host other\n  HostName 192.0.2.99\n"
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(userCfg), 0o644)

	p := newTestProvisioner(t, h, home)
	ctx := context.Background()
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "web", NumNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(ctx, "web")
	if err := WriteSSHConfig(home, "web", info.Nodes, "root", h.Key); err != nil {
		t.Fatal(err)
	}
	if err := WriteSSHConfig(home, "web", info.Nodes, "root", h.Key); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(home, ".ssh", "config"))
	if !strings.HasPrefix(string(b), "# Added by SkyGo") || strings.Count(string(b), infra.IncludeLine) != 1 || !strings.HasSuffix(string(b), userCfg) {
		t.Fatalf("~/.ssh/config:\n%s", b)
	}
	if st, _ := os.Stat(infra.GeneratedConfigPath(home, "web")); st.Mode().Perm() != 0o600 {
		t.Fatalf("generated file mode %v", st.Mode())
	}
	// OpenSSH finds ~/.ssh/config through the passwd entry, not $HOME:
	// give ssh a private mount namespace where /root is our HOME.
	sshAs := func(alias string) (string, error) {
		c := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" /root && HOME=/root exec ssh -o BatchMode=yes "$2" hostname`, "_", home, alias)
		out, err := c.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	for i, alias := range []string{"web", "web-worker1"} {
		out, err := sshAs(alias)
		if err != nil || out != h.Names[i] {
			t.Fatalf("ssh %s hostname: %q %v", alias, out, err)
		}
	}
	if err := infra.RemoveSSHConfig(home, "web"); err != nil {
		t.Fatal(err)
	}
	if out, err := sshAs("web-worker1"); err == nil {
		t.Fatalf("ssh still works after RemoveSSHConfig: %q", out)
	}
}

func TestWriteSSHConfigCreatesUserConfig(t *testing.T) {
	home := t.TempDir()
	nodes := []provision.NodeInfo{{InternalIP: "10.0.0.1"}, {InternalIP: "10.0.0.2", ExternalIP: "1.2.3.4"}}
	if err := WriteSSHConfig(home, "c", nodes, "u", "/k ey"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(home, ".ssh", "config"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("created config: %v %v", st, err)
	}
	b, _ := os.ReadFile(infra.GeneratedConfigPath(home, "c"))
	for _, want := range []string{"Host c\n  HostName 10.0.0.1\n  User u\n  Port 22\n  IdentityFile \"/k ey\"", "Host c-worker1\n  HostName 1.2.3.4\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("generated config lacks %q:\n%s", want, b)
		}
	}
	c, err := LoadConfig(filepath.Join(home, ".ssh", "config"), home)
	if err != nil {
		t.Fatal(err)
	}
	if hc := c.Lookup("c-worker1", home); hc.HostName != "1.2.3.4" || hc.User != "u" {
		t.Fatalf("our own parser through the Include: %+v", hc)
	}
	if err := WriteSSHConfig(home, "../evil", nodes, "u", "k"); err == nil {
		t.Fatal("a path-like cluster name was accepted")
	}
}

// A pool host that stopped answering does not hold a launch the others
// can serve: once enough hosts answered and fit, Provision waits
// probeGrace more, not the whole probe timeout.
func TestProvisionDoesNotWaitForSilentHost(t *testing.T) {
	h := sshHosts(t)
	home := t.TempDir()
	p := newTestProvisioner(t, h, home)
	veth := h.Name + "v1" // the root-namespace end of the first host's link
	if out, err := exec.Command("ip", "link", "set", veth, "down").CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s down: %v %s", veth, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "set", veth, "up").Run() })
	ctx := context.Background()
	start := time.Now()
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "quick", NumNodes: 1})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(ctx, "quick") })
	if got := info.Nodes[0].ID; got == p.Pool.Hosts[0].Name {
		t.Errorf("the cluster got the silent host %s", got)
	}
	if took > probeGrace+3*time.Second {
		t.Errorf("Provision took %s with one silent host, want within probeGrace (%s) of the others' answers", took.Round(time.Millisecond), probeGrace)
	}
}
