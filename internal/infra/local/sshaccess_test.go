package local

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil"
)

// startAgents starts the node agents of a provisioned cluster with the
// node runtime, as the backend does.
func startAgents(t testing.TB, p *Provisioner, info *provision.ClusterInfo) {
	t.Helper()
	sky := testutil.NodeBinary(t, runtime.GOARCH)
	runners, err := p.Runners(info)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runners {
		cfg := agentapi.ConfigFromCluster(info, i, agentapi.TransportLocal)
		for j := range cfg.Nodes {
			cfg.Nodes[j].Sky = sky
		}
		b, _ := json.Marshal(cfg)
		res, err := r.Run(context.Background(), provision.Join(sky, "agent", "start", "--json"), provision.RunOptions{Stdin: strings.NewReader(string(b))})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("agent start on node %d: %v %s %s", i, err, res.Stdout, res.Stderr)
		}
	}
}

// TestSSHAccess: the generated entries reach every node of a local
// cluster through the head's agent with SkyGo's key and the cluster's
// host key; the port stays across stop and start unless someone took it;
// down removes the entries.
func TestSSHAccess(t *testing.T) {
	for _, m := range netModes(t) {
		t.Run(m.name, func(t *testing.T) { testSSHAccess(t, m.net) })
	}
}

func testSSHAccess(t *testing.T, mode *Network) {
	ctx := context.Background()
	home := t.TempDir()
	p, err := New(filepath.Join(home, "local"))
	if err != nil {
		t.Fatal(err)
	}
	p.StopGrace = 200 * time.Millisecond
	p.Net = mode
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "c1", NumNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(context.Background(), "c1") })
	cleanupNet(t, p.Root())
	port := info.Nodes[0].AgentSSHPort
	if port == 0 || info.Nodes[1].AgentSSHPort != port {
		t.Fatalf("ssh ports %d, %d: want one port for the cluster", port, info.Nodes[1].AgentSSHPort)
	}
	startAgents(t, p, info)
	in := &Infra{env: infra.Env{Home: home}, P: p}
	start := time.Now()
	if err := in.WriteSSHConfig(info); err != nil {
		t.Fatal(err)
	}
	t.Logf("WriteSSHConfig took %v", time.Since(start))
	if err := in.WriteSSHConfig(info); err != nil { // idempotent
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(info.Nodes[1].Home, ".ssh", "authorized_keys"))
	if strings.Count(string(b), "ssh-ed25519") != 1 {
		t.Errorf("authorized_keys after two writes:\n%s", b)
	}
	gen, _ := os.ReadFile(infra.GeneratedConfigPath(home, "c1"))
	for _, want := range []string{"Host c1\n  HostName " + info.Nodes[0].InternalIP + "\n", "Host c1-worker1\n", "  Port " + strconv.Itoa(port) + "\n", "StrictHostKeyChecking yes"} {
		if !strings.Contains(string(gen), want) {
			t.Errorf("generated config lacks %q:\n%s", want, gen)
		}
	}

	run := func(node int, key gossh.Signer, cmd string) (string, error) {
		hk, err := knownhosts.New(paths.GeneratedKnownHosts(home, "c1"))
		if err != nil {
			t.Fatal(err)
		}
		u, _ := user.Current()
		n := info.Nodes[node]
		c, err := gossh.Dial("tcp", net.JoinHostPort(n.InternalIP, strconv.Itoa(n.AgentSSHPort)),
			&gossh.ClientConfig{User: u.Username, Auth: []gossh.AuthMethod{gossh.PublicKeys(key)}, HostKeyCallback: hk, Timeout: 5 * time.Second})
		if err != nil {
			return "", err
		}
		defer c.Close()
		s, err := c.NewSession()
		if err != nil {
			return "", err
		}
		out, err := s.CombinedOutput(cmd)
		return string(out), err
	}
	kb, _ := os.ReadFile(paths.SSHKey(home))
	key, err := gossh.ParsePrivateKey(kb)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run(1, key, "echo $SKYPILOT_NODE_RANK:$HOME"); err != nil || out != "1:"+info.Nodes[1].Home+"\n" {
		t.Errorf("node 1: %q %v", out, err)
	}
	stranger, _ := gossh.ParsePrivateKey(testKey(t))
	if _, err := run(0, stranger, "true"); err == nil {
		t.Error("a key the node does not list logged in")
	}

	// Start of a running cluster keeps the port its agent serves.
	again, err := p.Start(ctx, "c1")
	if err != nil || again.Nodes[0].AgentSSHPort != port {
		t.Fatalf("start of a running cluster: port %d (%v), want %d", again.Nodes[0].AgentSSHPort, err, port)
	}
	// Stopped, and the port taken on a worker's address: a new one.
	if err := p.Stop(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	l, err := listenOn(info.Nodes[1], net.JoinHostPort(info.Nodes[1].InternalIP, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	moved, err := p.Start(ctx, "c1")
	if err != nil || moved.Nodes[0].AgentSSHPort == port || moved.Nodes[1].AgentSSHPort != moved.Nodes[0].AgentSSHPort {
		t.Fatalf("start with the port taken: %+v %v", moved, err)
	}

	if err := in.RemoveSSHConfig("c1"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{infra.GeneratedConfigPath(home, "c1"), paths.GeneratedKnownHosts(home, "c1")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s survived RemoveSSHConfig (%v)", f, err)
		}
	}
}

func testKey(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	_, pub, err := infra.ClientKey(dir)
	if err != nil || pub == "" {
		t.Fatal(err)
	}
	b, err := os.ReadFile(paths.SSHKey(dir))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkWriteSSHConfig is what `ssh <cluster>` adds to every launch of
// a 2-node local cluster: the entries, the keys and the check that the
// head serves them.
func BenchmarkWriteSSHConfig(b *testing.B) {
	home := b.TempDir()
	p, err := New(filepath.Join(home, "local"))
	if err != nil {
		b.Fatal(err)
	}
	info, err := p.Provision(context.Background(), provision.ClusterSpec{Name: "c1", NumNodes: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Terminate(context.Background(), "c1") })
	startAgents(b, p, info)
	in := &Infra{env: infra.Env{Home: home}, P: p}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := in.WriteSSHConfig(info); err != nil {
			b.Fatal(err)
		}
	}
}
