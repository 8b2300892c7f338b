package slurm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/infra"
	slurmnode "github.com/skygo/skygo/internal/infra/slurm/node"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/provision"
)

var _ infra.SSHAccess = (*Infra)(nil)

// WriteSSHConfig implements infra.SSHAccess: `ssh <cluster>` (and
// `<cluster>-worker<N>`, scp, rsync) reach a node through a ProxyCommand
// that logs into the login node and runs `sky agent ssh-stdio` on the node
// inside the allocation (srun --overlap): the node agent speaks SSH on that
// stream, and the session runs as the node's jobs do. SkyGo's client key
// is authorized in each node's home, and each node's host key is pinned
// in the cluster's known_hosts.
func (in *Infra) WriteSSHConfig(info *provision.ClusterInfo) error {
	p := &Provisioner{in: in, cluster: firstNonEmpty(info.Meta[metaCluster], info.Region)}
	runners, err := p.Runners(info)
	if err != nil {
		return err
	}
	key, pub, err := infra.ClientKey(in.env.Home)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hostKeys := make([]string, len(runners))
	err = parallelNodes(len(runners), func(i int) error {
		r := runners[i].(*Runner)
		hk, err := infra.NodeHostKey(ctx, r, pub, r.SkyCommand(), "")
		if err != nil {
			return fmt.Errorf("node %s: preparing ssh access: %w", r.node, err)
		}
		hostKeys[i] = hk
		return nil
	})
	if err != nil {
		return err
	}
	lines := make([]string, len(runners))
	for i, r := range runners {
		lines[i] = r.NodeIP() + " " + hostKeys[i]
	}
	kh, err := infra.WriteKnownHosts(in.env.Home, info.Name, lines)
	if err != nil {
		return err
	}
	hosts := make([]infra.GeneratedHost, len(runners))
	for i, cr := range runners {
		r := cr.(*Runner)
		ep := r.login.Endpoint()
		hosts[i] = infra.GeneratedHost{Alias: infra.NodeAlias(info.Name, i), HostName: r.NodeIP(), User: ep.User,
			IdentityFile: key, KnownHosts: []string{kh}, StrictHostKeyChecking: "yes", ProxyCommand: r.proxyCommand(p.in.sshDialer().KnownHosts)}
	}
	return infra.WriteSSHConfigHosts(in.env.Home, info.Name, hosts)
}

// proxyCommand is the shell command line (for ssh_config's ProxyCommand)
// that carries an SSH connection to the node: the system ssh to the login
// node, srun into the allocation, the node agent's ssh-stdio there.
func (r *Runner) proxyCommand(kh *ssh.KnownHosts) string {
	ep := r.login.Endpoint()
	// --unbuffered: without it slurmstepd forwards the task's output a
	// line at a time, and the SSH stream has no lines to end.
	inner := slurmnode.NodeShell(r.home, "exec "+r.SkyCommand()+" agent ssh-stdio")
	remote := provision.Join(append(slurmnode.SrunArgs(r.job, r.node), "--unbuffered")...) + " bash -c " + provision.Quote(inner)
	words := append(ssh.SSHCommand(ep, kh), ep.User+"@"+ep.Addr, "--", remote)
	q := make([]string, len(words))
	for i, w := range words {
		// ssh_config expands %-tokens in a ProxyCommand; a literal % is %%.
		q[i] = strings.ReplaceAll(provision.Quote(w), "%", "%%")
	}
	return strings.Join(q, " ")
}

// RemoveSSHConfig implements infra.SSHAccess.
func (in *Infra) RemoveSSHConfig(cluster string) error {
	return infra.RemoveSSHConfig(in.env.Home, cluster)
}
