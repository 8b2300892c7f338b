package agent

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/provision"
)

func TestSSHTransportRegisteredAndValidates(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, c := range []struct {
		name string
		node agentapi.Node
		want string // error substring; "" = ok
	}{
		{"no key", agentapi.Node{IP: "10.0.0.2", Transport: "ssh"}, "needs ssh_key"},
		{"no ip", agentapi.Node{Transport: "ssh", SSHKey: "/k"}, "no ip"},
		{"ok", agentapi.Node{IP: "10.0.0.2", Transport: "ssh", SSHKey: "/k", SSHUser: "ubuntu", SSHPort: 2200}, ""},
		{"unknown transport", agentapi.Node{IP: "10.0.0.2", Transport: "carrier-pigeon"}, "known: agent-ssh, local, ssh"},
	} {
		r, err := newNodeRunner(c.node)
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sr := r.(*sshNodeRunner)
		args := strings.Join(sr.command(context.Background(), "echo 'a b'").Args, " ")
		for _, want := range []string{"-i /k", "-p 2200", "ubuntu@10.0.0.2 -- bash -c 'echo '\"'\"'a b'\"'\"''", "StrictHostKeyChecking=accept-new", "BatchMode=yes"} {
			if !strings.Contains(args, want) {
				t.Errorf("%s: ssh command %q lacks %q", c.name, args, want)
			}
		}
	}
}

// A node nobody answers on is an error naming it, in bounded time, not a
// command result.
func TestSSHTransportUnreachableIsError(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	t.Setenv("HOME", t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	r, err := newNodeRunner(agentapi.Node{IP: "127.0.0.1", Transport: "ssh", SSHKey: "/nonexistent", SSHPort: port})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = r.Run(ctx, "true", provision.RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Errorf("err = %v, want an ssh error naming 127.0.0.1 and port %d", err, port)
	}
}
