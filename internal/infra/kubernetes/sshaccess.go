package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
)

// WriteSSHConfig implements infra.SSHAccess: `ssh <cluster>` (and
// `<cluster>-worker<N>`, scp, rsync -e ssh) reach a pod through a
// ProxyCommand that opens an exec stream into it and runs the pod's
// agent in ssh-stdio mode there, as SkyPilot tunnels SSH through the API
// server. SkyGo's client key is authorized in each pod and each pod's
// host key is pinned in the cluster's known_hosts.
func (in *Infra) WriteSSHConfig(info *provision.ClusterInfo) error {
	p := &Provisioner{in: in, context: info.Meta[metaContext]}
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
	users := make([]string, len(runners))
	err = forEach(len(runners), 16, func(i int) error {
		r := runners[i].(*Runner)
		home, user, err := r.identity(ctx)
		if err != nil {
			return err
		}
		hk, err := infra.NodeHostKey(ctx, r, pub, provision.Quote(skyInPod(home)), "")
		if err != nil {
			return fmt.Errorf("pod %s: preparing ssh access: %w", r.pod, err)
		}
		hostKeys[i], users[i] = hk, user
		return nil
	})
	if err != nil {
		return err
	}
	lines := make([]string, len(runners))
	for i, r := range runners {
		lines[i] = r.(*Runner).pod + " " + hostKeys[i]
	}
	kh, err := infra.WriteKnownHosts(in.env.Home, info.Name, lines)
	if err != nil {
		return err
	}
	hosts := make([]infra.GeneratedHost, len(runners))
	for i, cr := range runners {
		r := cr.(*Runner)
		proxy := provision.Join(in.env.Sky, ExecCommand, "--context", r.c.context, "--namespace", r.namespace,
			r.pod, skyInPod(r.Home()), "agent", "ssh-stdio")
		hosts[i] = infra.GeneratedHost{Alias: infra.NodeAlias(info.Name, i), HostName: r.pod, User: users[i],
			IdentityFile: key, KnownHosts: []string{kh}, StrictHostKeyChecking: "yes", ProxyCommand: proxy}
	}
	return infra.WriteSSHConfigHosts(in.env.Home, info.Name, hosts)
}

// RemoveSSHConfig implements infra.SSHAccess.
func (in *Infra) RemoveSSHConfig(cluster string) error {
	return infra.RemoveSSHConfig(in.env.Home, cluster)
}

// skyInPod is where EnsureBinary put the node runtime in a pod.
func skyInPod(home string) string {
	return home + "/" + strings.TrimPrefix(infra.BinaryPath, "~/")
}
