package backend

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// The agent command on a node that runs its own copy of the node runtime
// (an SSH host, with $HOME expanded remotely) uses that copy; on a local
// node this machine's build beside the sky binary, quoted; without one,
// the error says how to build it.
func TestAgentCommandPerTransport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sky dir")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &Backend{Sky: filepath.Join(dir, "sky")}
	sshRunner := ssh.NewRunner(nil, ssh.Endpoint{Addr: "10.0.0.1", Port: 22, User: "u"}, "", "", "/home/u")
	if got, err := b.agentCommand(sshRunner, "status", "--json"); err != nil || got != `"$HOME"/.sky/bin/sky-node agent status --json` {
		t.Errorf("ssh agent command = %q, %v", got, err)
	}
	var lr provision.CommandRunner = proc.NewRunner(t.TempDir(), "127.0.0.1")
	if _, err := b.agentCommand(lr, "logs", "--job", "3"); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("local agent command without a node runtime: err = %v, want one saying to run make build", err)
	}
	node := filepath.Join(dir, infra.NodeBinaryName(runtime.GOARCH))
	if err := os.WriteFile(node, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := b.agentCommand(lr, "logs", "--job", "3"); err != nil || got != provision.Quote(node)+` agent logs --job 3` {
		t.Errorf("local agent command = %q, %v", got, err)
	}
}

// A handle names its infrastructure by ID; the backend reaches it only
// through the registry, and an unknown kind says what this build has.
func TestProvisionerByHandle(t *testing.T) {
	home := t.TempDir()
	env := infra.Env{Home: home}
	lo, err := local.Open(env)
	if err != nil {
		t.Fatal(err)
	}
	sh, _ := ssh.Open(env)
	b := &Backend{Home: home, Infras: infra.NewSet(lo, sh)}
	for _, c := range []struct{ infra, want string }{
		{ssh.Kind + "/none", "ssh_node_pools.yaml"},
		{ssh.Kind, "ssh/<pool>"},
		{"aws/us-east-1", "cannot provision on aws yet (it can on: local, ssh)"},
		{local.Kind + "/somewhere", "no regions or zones"},
	} {
		if _, err := b.provisioner(&Handle{Infra: c.infra}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("provisioner(%q): err = %v, want it to say %q", c.infra, err, c.want)
		}
	}
	if p, err := b.provisioner(&Handle{Infra: local.Kind}); err != nil || p != lo.(*local.Infra).P {
		t.Errorf("provisioner(local) = %v, %v", p, err)
	}
}
