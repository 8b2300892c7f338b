package backend

import (
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// The agent command on a node that runs its own copy of sky (an SSH host,
// with $HOME expanded remotely) uses that copy; on a local node the
// server's own binary, quoted.
func TestAgentCommandPerTransport(t *testing.T) {
	b := &Backend{Sky: "/opt/sky dir/sky"}
	sshRunner := ssh.NewRunner(nil, ssh.Endpoint{Addr: "10.0.0.1", Port: 22, User: "u"}, "", "", "/home/u")
	if got, want := b.agentCommand(sshRunner, "status", "--json"), `"$HOME"/.sky/bin/sky agent status --json`; got != want {
		t.Errorf("ssh agent command = %q, want %q", got, want)
	}
	var lr provision.CommandRunner = proc.NewRunner(t.TempDir(), "127.0.0.1")
	if got := b.agentCommand(lr, "logs", "--job", "3"); got != `'/opt/sky dir/sky' agent logs --job 3` {
		t.Errorf("local agent command = %q", got)
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
