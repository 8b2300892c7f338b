package backend

import (
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

func TestInfraName(t *testing.T) {
	for _, c := range []struct{ cloud, region, want string }{
		{"ssh", "ssh-gpus", "ssh/gpus"},
		{"ssh", "gpus", "ssh/gpus"},
		{"SSH", "ssh-my-pool", "ssh/my-pool"},
		{"ssh", "", "ssh"},
		{"local", "", "local"},
		{"aws", "us-east-1", "aws/us-east-1"},
	} {
		if got := InfraName(c.cloud, c.region); got != c.want {
			t.Errorf("InfraName(%q, %q) = %q, want %q", c.cloud, c.region, got, c.want)
		}
	}
}

func TestSSHPoolOf(t *testing.T) {
	for in, want := range map[string]string{
		"ssh/gpus": "gpus", "ssh/ssh-gpus": "gpus", "SSH/a": "a", "local": "", "aws/us-east-1": "", "ssh": "",
	} {
		if got := SSHPoolOf(in); got != want {
			t.Errorf("SSHPoolOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// The agent command on an SSH host runs the bootstrapped copy (with
// $HOME expanded remotely); on a local node the server's own binary,
// quoted.
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

func TestSSHProvisionerErrors(t *testing.T) {
	home := t.TempDir()
	b := &Backend{Home: home}
	if _, err := b.provisioner("ssh/none"); err == nil || !strings.Contains(err.Error(), "ssh_node_pools.yaml") {
		t.Errorf("missing pools file: err = %v, want it to name ssh_node_pools.yaml", err)
	}
	if _, err := b.provisioner("ssh"); err == nil || !strings.Contains(err.Error(), "ssh/<pool>") {
		t.Errorf("no pool named: err = %v", err)
	}
}
