package ssh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	_ "github.com/skygo/skygo/internal/infra/ssh/kind" // what ssh is: the registry knows it wherever the plug-in is linked
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
)

// Kind is the infra kind of SSH node pools: `infra: ssh/<pool>`.
const Kind = "ssh"

func init() { infra.Register(Kind, Open) }

// Infra is the SSH node pools of one server: one Dialer for the life of
// the server, so connections to pool hosts are cached and reused.
type Infra struct {
	env    infra.Env
	once   sync.Once
	dialer *Dialer
}

// Open opens the SSH node pools for a server.
func Open(env infra.Env) (infra.Infra, error) { return &Infra{env: env}, nil }

var (
	_ infra.Capacity       = (*Infra)(nil)
	_ infra.Placer         = (*Infra)(nil)
	_ infra.Bootstrapper   = (*Infra)(nil)
	_ infra.NoCallback     = (*Infra)(nil)
	_ infra.NoStop         = (*Infra)(nil)
	_ infra.SSHAccess      = (*Infra)(nil)
	_ infra.Operations     = (*Infra)(nil)
	_ infra.CheckDescriber = (*Infra)(nil)
)

// Kind implements infra.Infra.
func (in *Infra) Kind() string { return Kind }

// Dialer is the server's shared SSH dialer (cached connections,
// SkyGo's known_hosts with accept-new).
func (in *Infra) Dialer() *Dialer {
	in.once.Do(func() { in.dialer = NewDialer(DefaultKnownHosts(in.env.Home)) })
	return in.dialer
}

// Place implements infra.Placer: the optimizer names a pool as region
// "ssh-<pool>" (SkyPilot's form); the ID is ssh/<pool>.
func (in *Infra) Place(region, _ string) infra.ID {
	if pool := strings.TrimPrefix(region, sshRegionPrefix); pool != "" {
		return infra.ID{Kind: Kind, Parts: []string{pool}}
	}
	return infra.ID{Kind: Kind}
}

const sshRegionPrefix = "ssh-"

// PoolOf is the pool an ID names, also in its resources form "ssh-<pool>".
func PoolOf(id infra.ID) string { return strings.TrimPrefix(id.Part(0), sshRegionPrefix) }

// LoadPools reads ~/.sky/ssh_node_pools.yaml of the server's user.
func (in *Infra) LoadPools() (map[string]*Pool, error) {
	return LoadPools(DefaultPoolsPath(in.env.Home))
}

// Provisioner implements infra.Infra: the provisioner of one node pool,
// read afresh from the pools file (so edits apply without a server
// restart) and sharing the server's dialer and claims.
func (in *Infra) Provisioner(id infra.ID) (provision.Provisioner, error) {
	return in.provisioner(id)
}

func (in *Infra) provisioner(id infra.ID) (*Provisioner, error) {
	pool := PoolOf(id)
	if pool == "" {
		return nil, &provision.ConfigError{Where: Kind, Msg: "no node pool named; use infra: ssh/<pool> with a pool of ~/.sky/ssh_node_pools.yaml"}
	}
	pools, err := in.LoadPools()
	if err != nil {
		return nil, &provision.ConfigError{Where: "ssh/" + pool, Err: err}
	}
	p, ok := pools[pool]
	if !ok {
		return nil, &provision.ConfigError{Where: "ssh/" + pool, Msg: fmt.Sprintf("no node pool %q in %s (pools: %s)", pool,
			DefaultPoolsPath(in.env.Home), strings.Join(PoolNames(pools), ", "))}
	}
	res, err := NewResolver(in.env.Home)
	if err != nil {
		return nil, &provision.ConfigError{Where: "ssh/" + pool, Msg: "reading ~/.ssh/config", Err: err}
	}
	return NewProvisioner(in.env.Home, p, res, in.Dialer(), in.env.Settings), nil
}

// NoAutostopCallback implements infra.NoCallback: the head is another
// machine, so the server's autostop controller acts for it.
func (in *Infra) NoAutostopCallback() {}

// CannotStop implements infra.NoStop.
func (in *Infra) CannotStop() string {
	return "hosts of an SSH node pool are never stopped; tear the cluster down with `sky down` (or use autostop with --down)"
}

// allowedPools is the pools file filtered by ssh.allowed_node_pools.
func (in *Infra) allowedPools() (map[string]*Pool, error) {
	pools, err := in.LoadPools()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(config.LoadOptions{Home: in.env.Home})
	if err != nil {
		return nil, err
	}
	kept, _ := FilterAllowed(pools, cfg.GetStringSlice("ssh.allowed_node_pools", nil))
	return kept, nil
}

// sshKeyOnHead is where the head keeps the private key it uses to reach
// the workers' agents (mode 0600). A second distinct key (hosts of one
// pool with different identity files) gets a numbered sibling.
const sshKeyOnHead = ".sky/ssh/cluster-key"

// Bootstrap implements infra.Bootstrapper: the hosts are the user's own,
// so the node runtime for each host's architecture is copied to
// ~/.sky/bin/sky-node (only when its hash differs) and the head gets the keys it needs to reach the workers'
// agents over SSH.
func (in *Infra) Bootstrap(ctx context.Context, info *provision.ClusterInfo, runners []provision.CommandRunner, log io.Writer) ([]agentapi.Node, error) {
	return BootstrapHosts(ctx, in.env.NodeBinaries(), info, runners, log, "set identity_file for it in "+DefaultPoolsPath(in.env.Home))
}

// BootstrapHosts prepares nodes reached over SSH, whatever made them (a
// pool's hosts, cloud VMs): the node runtime for its architecture at
// ~/.sky/bin/sky-node on each (infra.EnsureBinary), and
// on the head the private keys its agent needs to reach the workers'.
// runners must be *Runner; keyHint says how to give a host a key.
func BootstrapHosts(ctx context.Context, bins infra.NodeBinaries, info *provision.ClusterInfo, runners []provision.CommandRunner, log io.Writer, keyHint string) ([]agentapi.Node, error) {
	var mu sync.Mutex
	errs := make([]error, len(runners))
	var wg sync.WaitGroup
	for i := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			copied, err := infra.EnsureBinary(ctx, runners[i], bins)
			if err != nil {
				errs[i] = fmt.Errorf("node %d (%s): %w", i, runners[i].NodeIP(), err)
				return
			}
			st := "up to date"
			if copied {
				st = "copied"
			}
			mu.Lock()
			fmt.Fprintf(log, "node runtime on node %d (%s): %s\n", i, runners[i].NodeIP(), st)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	nodes := make([]agentapi.Node, len(info.Nodes))
	headHome := info.Nodes[0].Home
	keys := map[string]string{} // local key file -> path on the head
	for i, n := range info.Nodes {
		nodes[i] = agentapi.Node{IP: n.InternalIP, Home: n.Home, Transport: agentapi.TransportSSH, Sky: n.Home + "/" + strings.TrimPrefix(infra.BinaryPath, "~/"),
			CPUs: n.CPUs, GPUs: n.GPUs}
		if i == 0 {
			continue
		}
		sr, ok := runners[i].(*Runner)
		if !ok {
			return nil, fmt.Errorf("node %d of the cluster has no SSH runner", i)
		}
		ep := sr.Endpoint()
		if len(ep.IdentityFiles) == 0 {
			return nil, fmt.Errorf("host %s: the head node reaches workers with an SSH key, and this host has none; %s", ep.Name, keyHint)
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
	sr, ok := head.(*Runner)
	if !ok {
		return errors.New("the head node of an SSH cluster has no SSH runner")
	}
	if err := sr.UploadReader(ctx, f, "~/"+remote, 0o600); err != nil {
		return fmt.Errorf("giving the head node the key %s: %w", filepath.Base(local), err)
	}
	return nil
}

// WriteSSHConfig implements infra.SSHAccess: `ssh <cluster>` and `ssh
// <cluster>-worker1` work from the user's shell. The cluster's pool is
// found from its claims.
func (in *Infra) WriteSSHConfig(info *provision.ClusterInfo) error {
	pool, err := in.poolOfCluster(context.Background(), info.Name)
	if err != nil {
		return err
	}
	p, err := in.provisioner(infra.ID{Kind: Kind, Parts: []string{pool}})
	if err != nil {
		return err
	}
	hosts, err := p.GeneratedHosts(in.env.Home, info)
	if err != nil {
		return err
	}
	return infra.WriteSSHConfigHosts(in.env.Home, info.Name, hosts)
}

// RemoveSSHConfig implements infra.SSHAccess.
func (in *Infra) RemoveSSHConfig(cluster string) error {
	return infra.RemoveSSHConfig(in.env.Home, cluster)
}

// poolOfCluster is the pool whose hosts a cluster holds.
func (in *Infra) poolOfCluster(ctx context.Context, cluster string) (string, error) {
	var pool string
	err := readClaims(ctx, in.env.Settings, func(c *claims) {
		if cc := c.Clusters[cluster]; cc != nil {
			pool = cc.Pool
		}
	})
	if err == nil && pool == "" {
		err = fmt.Errorf("cluster %s holds no SSH hosts", cluster)
	}
	return pool, err
}

// readClaims reads the claims document without changing it.
func readClaims(ctx context.Context, store ClaimStore, fn func(c *claims)) error {
	return store.UpdateDocument(ctx, claimsKey, func(cur []byte) ([]byte, bool, error) {
		c := &claims{Clusters: map[string]*clusterClaim{}}
		if cur != nil {
			if err := json.Unmarshal(cur, c); err != nil {
				return nil, false, fmt.Errorf("the SSH host claims are corrupt (%v)", err)
			}
		}
		fn(c)
		return nil, false, nil
	})
}
