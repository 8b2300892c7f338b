package slurm

import (
	"context"
	"fmt"
	_ "github.com/skygo/skygo/internal/infra/slurm/kind" // what slurm is: the registry knows it wherever the plug-in is linked
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	slurmnode "github.com/skygo/skygo/internal/infra/slurm/node"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/provision"
)

// Kind is the infra kind of Slurm clusters: `infra: slurm[/<cluster>[/<partition>]]`.
const Kind = "slurm"

// CloudName is the display name in SKYPILOT_CLUSTER_INFO and status.
const CloudName = "Slurm"

func init() { infra.Register(Kind, Open) }

// Infra is the Slurm clusters of one server: one SSH dialer for the life
// of the server (one cached connection per login node) and the inventory
// caches.
type Infra struct {
	env    infra.Env
	once   sync.Once
	dialer *ssh.Dialer

	mu  sync.Mutex
	inv map[string]*inventory // by cluster alias
}

// Open opens the Slurm infrastructure for a server.
func Open(env infra.Env) (infra.Infra, error) {
	return &Infra{env: env, inv: map[string]*inventory{}}, nil
}

var (
	_ infra.Capacity       = (*Infra)(nil)
	_ infra.Placer         = (*Infra)(nil)
	_ infra.Bootstrapper   = (*Infra)(nil)
	_ infra.NoCallback     = (*Infra)(nil)
	_ infra.NoStop         = (*Infra)(nil)
	_ infra.CheckDescriber = (*Infra)(nil)
)

// Kind implements infra.Infra.
func (in *Infra) Kind() string { return Kind }

func (in *Infra) sshDialer() *ssh.Dialer {
	in.once.Do(func() { in.dialer = ssh.NewDialer(ssh.DefaultKnownHosts(in.env.Home)) })
	return in.dialer
}

// Place implements infra.Placer: region is the cluster, zone the partition.
func (in *Infra) Place(region, zone string) infra.ID {
	id := infra.ID{Kind: Kind}
	if region != "" {
		id.Parts = append(id.Parts, region)
		if zone != "" {
			id.Parts = append(id.Parts, zone)
		}
	}
	return id
}

// ConfigPath is ~/.slurm/config of the server's user.
func (in *Infra) ConfigPath() string { return filepath.Join(in.env.Home, ".slurm", "config") }

// hosts are the Host aliases of ~/.slurm/config, in file order.
func (in *Infra) hosts() ([]string, *ssh.Config, error) {
	path := in.ConfigPath()
	if _, err := os.Stat(path); err != nil {
		return nil, nil, &provision.ConfigError{Where: Kind, Msg: "Slurm configuration file ~/.slurm/config does not exist."}
	}
	cfg, err := ssh.LoadConfig(path, in.env.Home)
	if err != nil {
		return nil, nil, &provision.ConfigError{Where: Kind, Msg: "reading ~/.slurm/config", Err: err}
	}
	return cfg.Aliases(), cfg, nil
}

// serverConfig is the server user's merged ~/.sky/config.yaml.
func (in *Infra) serverConfig() (*config.Config, error) {
	return config.Load(config.LoadOptions{Home: in.env.Home})
}

// clusters are the allowed clusters (slurm.allowed_clusters) and the warnings of the filter.
func (in *Infra) clusters() ([]string, []string, error) {
	hosts, _, err := in.hosts()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := in.serverConfig()
	if err != nil {
		return nil, nil, err
	}
	kept, warns := AllowedClusters(cfg, hosts)
	return kept, warns, nil
}

// login is the runner of a cluster's login node.
func (in *Infra) login(cluster string) (*ssh.Runner, error) {
	_, cfg, err := in.hosts()
	if err != nil {
		return nil, err
	}
	hc := cfg.Lookup(cluster, in.env.Home)
	known := false
	for _, a := range cfg.Aliases() {
		if a == cluster {
			known = true
		}
	}
	switch {
	case !known:
		return nil, &provision.ConfigError{Where: Kind + "/" + cluster, Msg: fmt.Sprintf("no Host %s in ~/.slurm/config", cluster)}
	case hc.HostName == "":
		return nil, &provision.ConfigError{Where: Kind + "/" + cluster, Msg: "HostName is missing, please check your ~/.slurm/config and try again."}
	case hc.User == "":
		return nil, &provision.ConfigError{Where: Kind + "/" + cluster, Msg: "User is missing, please check your ~/.slurm/config and try again."}
	}
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	res := &ssh.Resolver{Home: in.env.Home, Config: cfg, LocalUser: name}
	ep, err := res.Resolve(nil, ssh.Host{Name: cluster, UseSSHConfig: true})
	if err != nil {
		return nil, &provision.ConfigError{Where: Kind + "/" + cluster, Err: err}
	}
	return ssh.NewRunner(in.sshDialer(), ep, ep.Addr, "~/.sky/slurm/pgids", ""), nil
}

// Provisioner implements infra.Infra.
func (in *Infra) Provisioner(id infra.ID) (provision.Provisioner, error) {
	return &Provisioner{in: in, cluster: id.Part(0), partition: id.Part(1)}, nil
}

// NoAutostopCallback implements infra.NoCallback: the head is a compute
// node, so the server's autostop controller acts for its clusters.
func (in *Infra) NoAutostopCallback() {}

// CannotStop implements infra.NoStop.
func (in *Infra) CannotStop() string {
	return "Slurm clusters cannot be stopped, only torn down (the allocation would be lost): use `sky down`, or autostop with --down; bound the wall-clock time with config.slurm.sbatch_options.time"
}

// Bootstrap implements infra.Bootstrapper: the node runtime goes once to
// the shared filesystem through the login node, every node gets the
// allocation's job-scoped variables in its home, and the head reaches
// the workers with srun.
func (in *Infra) Bootstrap(ctx context.Context, info *provision.ClusterInfo, runners []provision.CommandRunner, log io.Writer) ([]agentapi.Node, error) {
	if len(runners) == 0 {
		return nil, fmt.Errorf("cluster %s has no nodes", info.Name)
	}
	head, ok := runners[0].(*Runner)
	if !ok {
		return nil, fmt.Errorf("the head node of a Slurm cluster has no Slurm runner")
	}
	copied, err := infra.EnsureBinaryAt(ctx, head.login, in.env.NodeBinaries(), head.sky)
	if err != nil {
		return nil, fmt.Errorf("installing the node runtime on the login node: %w", err)
	}
	st := "up to date"
	if copied {
		st = "copied"
	}
	fmt.Fprintf(log, "node runtime on the shared filesystem (%s): %s\n", head.sky, st)
	envFile := head.jobEnv
	err = parallelNodes(len(runners), func(i int) error {
		r := runners[i].(*Runner)
		cmd := "mkdir -p ~/.sky && cp " + provision.Quote(envFile) + " ~/" + slurmnode.JobEnvFile
		if _, err := provision.RunChecked(ctx, r, cmd, provision.RunOptions{}); err != nil {
			return fmt.Errorf("node %s: copying the allocation's environment: %w", r.node, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	nodes := make([]agentapi.Node, len(info.Nodes))
	for i, n := range info.Nodes {
		r := runners[i].(*Runner)
		nodes[i] = agentapi.Node{IP: n.InternalIP, Home: n.Home, Transport: slurmnode.Transport, Sky: r.sky,
			CPUs: n.CPUs, GPUs: n.GPUs, Options: slurmnode.Options(r.job, r.node)}
	}
	return nodes, nil
}

func parallelNodes(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// inventory is what one cluster's login node said about its partitions
// and nodes, cached as the spec says (partitions 1 h, nodes 30 min).
type inventory struct {
	mu           sync.Mutex
	partitions   []Partition
	partsAt      time.Time
	nodes        []Node
	nodesAt      time.Time
	selectMemory bool
}

const (
	partitionsTTL = time.Hour
	nodesTTL      = 30 * time.Minute
)

// loginCommand runs cmd on a cluster's login node and returns its stdout.
func loginCommand(ctx context.Context, login *ssh.Runner, cmd string) (string, error) {
	res, err := login.Run(ctx, cmd, provision.RunOptions{})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = strings.TrimSpace(string(res.Stdout))
		}
		return "", fmt.Errorf("`%s` on the login node exited %d: %s", cmd, res.ExitCode, msg)
	}
	return string(res.Stdout), nil
}

// inventoryOf returns a cluster's partitions and nodes, asking the login
// node when the cache is stale (or fresh is set: a failed provision
// re-reads them).
func (in *Infra) inventoryOf(ctx context.Context, cluster string, fresh bool) ([]Partition, []Node, bool, error) {
	in.mu.Lock()
	iv := in.inv[cluster]
	if iv == nil {
		iv = &inventory{}
		in.inv[cluster] = iv
	}
	in.mu.Unlock()
	iv.mu.Lock()
	defer iv.mu.Unlock()
	now := time.Now()
	needParts := fresh || iv.partitions == nil || now.Sub(iv.partsAt) > partitionsTTL
	needNodes := fresh || iv.nodes == nil || now.Sub(iv.nodesAt) > nodesTTL
	if !needParts && !needNodes {
		return iv.partitions, iv.nodes, iv.selectMemory, nil
	}
	login, err := in.login(cluster)
	if err != nil {
		return nil, nil, false, err
	}
	if needParts {
		out, err := loginCommand(ctx, login, "scontrol show partitions -o")
		if err != nil {
			return nil, nil, false, err
		}
		parts, err := ParsePartitions(out)
		if err != nil {
			return nil, nil, false, fmt.Errorf("reading the partitions of %s: %w", cluster, err)
		}
		cfgOut, err := loginCommand(ctx, login, "scontrol show config")
		if err != nil {
			return nil, nil, false, err
		}
		iv.partitions, iv.partsAt, iv.selectMemory = parts, now, SelectMemory(cfgOut)
	}
	if needNodes {
		out, err := loginCommand(ctx, login, "sinfo -h --Node -o "+provision.Quote(SinfoNodeFormat))
		if err != nil {
			return nil, nil, false, err
		}
		nodes, err := ParseSinfoNodes(out)
		if err != nil {
			return nil, nil, false, fmt.Errorf("reading the nodes of %s: %w", cluster, err)
		}
		iv.nodes, iv.nodesAt = nodes, now
	}
	return iv.partitions, iv.nodes, iv.selectMemory, nil
}

// forget drops a cluster's cached nodes (after a failed provision the
// next attempt reads them again).
func (in *Infra) forget(cluster string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if iv := in.inv[cluster]; iv != nil {
		iv.mu.Lock()
		iv.nodes = nil
		iv.mu.Unlock()
	}
}
