package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/provision"
)

// SSH node pools (`infra: ssh/<pool>`): the hosts are the user's own, so
// bootstrap copies the sky binary to ~/.sky/bin/sky on each (only when its
// hash differs), gives the head the key it needs to reach the workers, and
// starts the agents from that copy.

// sshKeyOnHead is where the head keeps the private key it uses to reach
// the workers' agents (mode 0600). A second distinct key (hosts of one
// pool with different identity files) gets a numbered sibling.
const sshKeyOnHead = ".sky/ssh/cluster-key"

// sshState is the backend's shared SSH machinery: one Dialer for the life
// of the server, so connections to pool hosts are cached and reused.
type sshState struct {
	once   sync.Once
	dialer *ssh.Dialer
}

// SSHDialer is the server's shared SSH dialer (cached connections,
// ~/.sky/known_hosts with accept-new).
func (b *Backend) SSHDialer() *ssh.Dialer {
	b.ssh.once.Do(func() {
		b.ssh.dialer = ssh.NewDialer(ssh.DefaultKnownHosts(b.Home))
	})
	return b.ssh.dialer
}

// InfraName is the one place where an optimizer candidate (Cloud "ssh",
// Region "<pool>" or "ssh-<pool>") becomes the infra recorded in a
// handle: "ssh/<pool>", "local", "aws/us-east-1".
func InfraName(cloud, region string) string {
	cloud = strings.ToLower(cloud)
	if cloud == "ssh" {
		if pool := SSHPoolOf("ssh/" + region); pool != "" {
			return "ssh/" + pool
		}
		return "ssh"
	}
	if region == "" {
		return cloud
	}
	return cloud + "/" + region
}

// SSHPoolOf is the pool name of an infra string "ssh/<pool>" or
// "ssh/ssh-<pool>" (the resources form), "" for other infras.
func SSHPoolOf(infra string) string {
	cloud, rest, _ := strings.Cut(infra, "/")
	if !strings.EqualFold(cloud, "ssh") {
		return ""
	}
	return strings.TrimPrefix(rest, "ssh-")
}

// LoadSSHPools reads ~/.sky/ssh_node_pools.yaml of the server's user.
func (b *Backend) LoadSSHPools() (map[string]*ssh.Pool, error) {
	return ssh.LoadPools(ssh.DefaultPoolsPath(b.Home))
}

// SSHProvisioner returns the provisioner of one node pool, read afresh
// from the pools file (so edits apply without a server restart) and
// sharing the server's dialer.
func (b *Backend) SSHProvisioner(pool string) (*ssh.Provisioner, error) {
	if pool == "" {
		return nil, &provision.ConfigError{Where: "ssh", Msg: "no node pool named; use infra: ssh/<pool> with a pool of ~/.sky/ssh_node_pools.yaml"}
	}
	pools, err := b.LoadSSHPools()
	if err != nil {
		return nil, &provision.ConfigError{Where: "ssh/" + pool, Err: err}
	}
	p, ok := pools[pool]
	if !ok {
		return nil, &provision.ConfigError{Where: "ssh/" + pool, Msg: fmt.Sprintf("no node pool %q in %s (pools: %s)", pool,
			ssh.DefaultPoolsPath(b.Home), strings.Join(ssh.PoolNames(pools), ", "))}
	}
	res, err := ssh.NewResolver(b.Home)
	if err != nil {
		return nil, &provision.ConfigError{Where: "ssh/" + pool, Msg: "reading ~/.ssh/config", Err: err}
	}
	return ssh.NewProvisioner(b.Home, p, res, b.SSHDialer(), b.Store), nil
}

// isSSH says whether a handle's cluster lives on an SSH node pool.
func isSSH(h *Handle) bool { return SSHPoolOf(h.Infra) != "" }

// skyWord is the shell word that runs the sky binary on the node r
// reaches: the API server's own binary for local nodes, the copy that
// bootstrap installed for SSH hosts ("$HOME" expands on the host).
func (b *Backend) skyWord(r provision.CommandRunner) string {
	if _, ok := r.(*ssh.Runner); ok {
		return `"$HOME"/.sky/bin/sky`
	}
	return provision.Quote(b.Sky)
}

// bootstrapSSH prepares every host of an SSH cluster before its agents
// start: the sky binary (copied only when its hash differs) and, for a
// multi-node cluster, the private keys the head uses to reach the
// workers. It returns the agent config of each node.
func (b *Backend) bootstrapSSH(ctx context.Context, h *Handle, runners []provision.CommandRunner, log io.Writer) ([]agentapi.Node, error) {
	var mu sync.Mutex
	err := parallel(len(runners), func(i int) error {
		copied, err := ssh.EnsureBinary(ctx, runners[i], b.Sky)
		if err != nil {
			return fmt.Errorf("node %d (%s): %w", i, runners[i].NodeIP(), err)
		}
		state := "up to date"
		if copied {
			state = "copied"
		}
		mu.Lock()
		fmt.Fprintf(log, "sky binary on node %d (%s): %s\n", i, runners[i].NodeIP(), state)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	nodes := make([]agentapi.Node, len(h.Info.Nodes))
	headHome := h.Info.Nodes[0].Home
	keys := map[string]string{} // local key file -> path on the head
	for i, n := range h.Info.Nodes {
		nodes[i] = agentapi.Node{IP: n.InternalIP, Home: n.Home, Transport: "ssh", Sky: n.Home + "/.sky/bin/sky",
			CPUs: n.CPUs, GPUs: n.GPUs}
		if i == 0 {
			continue
		}
		sr, ok := runners[i].(*ssh.Runner)
		if !ok {
			return nil, fmt.Errorf("node %d of an SSH cluster has no SSH runner", i)
		}
		ep := sr.Endpoint()
		if len(ep.IdentityFiles) == 0 {
			return nil, fmt.Errorf("host %s: the head node reaches workers with an SSH key, and this host has none; set identity_file for it in %s",
				ep.Name, ssh.DefaultPoolsPath(b.Home))
		}
		local := ep.IdentityFiles[0]
		remote, ok := keys[local]
		if !ok {
			remote = sshKeyOnHead
			if len(keys) > 0 {
				remote = fmt.Sprintf("%s-%d", sshKeyOnHead, len(keys)+1)
			}
			if err := uploadKey(ctx, runners[0], local, remote); err != nil {
				return nil, err
			}
			keys[local] = remote
		}
		nodes[i].SSHUser, nodes[i].SSHPort, nodes[i].SSHKey = ep.User, ep.Port, headHome+"/"+remote
	}
	return nodes, nil
}

// uploadKey copies a private key to the head with mode 0600, whatever
// the local file's mode.
func uploadKey(ctx context.Context, head provision.CommandRunner, local, remote string) error {
	f, err := os.Open(local)
	if err != nil {
		return fmt.Errorf("reading SSH key %s for the head node: %w", local, err)
	}
	defer f.Close()
	sr, ok := head.(*ssh.Runner)
	if !ok {
		return errors.New("the head node of an SSH cluster has no SSH runner")
	}
	if err := sr.UploadReader(ctx, f, "~/"+remote, 0o600); err != nil {
		return fmt.Errorf("giving the head node the key %s: %w", filepath.Base(local), err)
	}
	return nil
}

// writeSSHConfig writes ~/.sky/generated/ssh/<cluster> so that
// `ssh <cluster>` and `ssh <cluster>-worker1` work from the user's shell.
func (b *Backend) writeSSHConfig(h *Handle) error {
	p, err := b.SSHProvisioner(SSHPoolOf(h.Infra))
	if err != nil {
		return err
	}
	hosts, err := p.GeneratedHosts(h.Info)
	if err != nil {
		return err
	}
	return ssh.WriteSSHConfigHosts(b.Home, h.Info.Name, hosts)
}
