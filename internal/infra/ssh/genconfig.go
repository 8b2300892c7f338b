package ssh

import (
	"strings"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
)

// WriteSSHConfig writes the entries `<cluster>` (the head, nodes[0]) and
// `<cluster>-worker1`, … for nodes reached on port 22 as user with key,
// and makes sure ~/.ssh/config includes them (infra.WriteSSHConfigHosts).
func WriteSSHConfig(home, cluster string, nodes []provision.NodeInfo, user, key string) error {
	hosts := make([]infra.GeneratedHost, len(nodes))
	for i, n := range nodes {
		addr := n.ExternalIP
		if addr == "" {
			addr = n.InternalIP
		}
		hosts[i] = withKnownHosts(home, infra.GeneratedHost{Alias: infra.NodeAlias(cluster, i), HostName: addr, Port: 22, User: user, IdentityFile: key})
	}
	return infra.WriteSSHConfigHosts(home, cluster, hosts)
}

// withKnownHosts checks host keys against SkyGo's ~/.sky/skygo/known_hosts
// (where our own connections recorded them) and the user's file.
func withKnownHosts(home string, g infra.GeneratedHost) infra.GeneratedHost {
	g.KnownHosts = DefaultKnownHosts(home).Files()
	g.StrictHostKeyChecking = "accept-new"
	return g
}

// GeneratedHosts returns the entries for a cluster of this provisioner,
// with each host's real port, user, key and jump hosts.
func (p *Provisioner) GeneratedHosts(home string, info *provision.ClusterInfo) ([]infra.GeneratedHost, error) {
	rs, err := p.runners(info.Name, info.Nodes, DefaultPgidDir)
	if err != nil {
		return nil, err
	}
	out := make([]infra.GeneratedHost, len(rs))
	for i, r := range rs {
		ep := r.ep
		g := infra.GeneratedHost{Alias: infra.NodeAlias(info.Name, i), HostName: ep.Addr, Port: ep.Port, User: ep.User}
		if len(ep.IdentityFiles) > 0 {
			g.IdentityFile = ep.IdentityFiles[0]
		}
		if n := len(ep.Jumps); n > 0 {
			hop := ep.Jumps[n-1]
			hop.Jumps = ep.Jumps[:n-1]
			g.ProxyCommand = strings.Join(quoteAll(append(SSHCommand(hop, p.Dialer.KnownHosts), "-W", "%h:%p", hop.Addr)), " ")
		}
		out[i] = withKnownHosts(home, g)
	}
	return out, nil
}
