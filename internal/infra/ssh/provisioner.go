package ssh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/provision"
)

// CloudName is the display name in SKYPILOT_CLUSTER_INFO and status.
const CloudName = "SSH"

// HostClusterDir is the cluster's directory on each of its hosts.
func HostClusterDir(cluster string) string { return "~/.sky/clusters/" + cluster }

// PgidDir is where the cluster's runners record the process groups of the
// commands they run (one file per running command, holding its pgid).
// Long-lived processes that leave their session (daemons) should record
// theirs here too: Terminate kills every group recorded here.
func PgidDir(cluster string) string { return HostClusterDir(cluster) + "/pgids" }

// hostPaths are what a cluster leaves on a host besides HostClusterDir:
// removed by Terminate (the host served only this cluster). The agent's
// own pid files under ~/.sky/agent are killed first. ~/.sky/bin/sky-node stays
// (it belongs to `sky ssh up`, not to a cluster). The cluster-key files
// are the private keys the backend gives a head node to reach its workers.
var hostPaths = []string{"~/.sky/agent", "~/.sky/hooks", "~/sky_workdir", "~/sky_logs", "~/.sky/ssh/cluster-key*"}

// Provisioner implements provision.Provisioner for one SSH node pool
// (`infra: ssh/<pool>`). A host serves one cluster at a time: which host
// belongs to which cluster is one document in the API server's database,
// changed only by conditional read-modify-writes, so that concurrent
// launches — in one server or in two sharing a PostgreSQL — never claim
// the same host twice. Hosts are keyed by their resolved
// user@address:port, so a machine listed in two pools is still claimed
// once.
type Provisioner struct {
	Pool     *Pool
	Resolver *Resolver
	Dialer   *Dialer
	Claims   ClaimStore
	// LegacyClaimsPath is the claims file of earlier builds; its contents
	// seed the database document once.
	LegacyClaimsPath string
	// ProbeTimeout bounds probing one host during Provision (default 20 s).
	ProbeTimeout time.Duration
	Log          *slog.Logger
}

var _ provision.Provisioner = (*Provisioner)(nil)

// ClaimStore keeps the host claims document; the API server's
// *state.Store implements it.
type ClaimStore interface {
	UpdateDocument(ctx context.Context, key string, fn func(cur []byte) ([]byte, bool, error)) error
}

// claimsKey names the claims document.
const claimsKey = "ssh/host_claims"

// legacyClaimsPath is where builds before the database kept the claims.
func legacyClaimsPath(home string) string {
	return filepath.Join(home, ".sky", "ssh", "claims.json")
}

// NewProvisioner returns a provisioner for pool keeping claims in store.
func NewProvisioner(home string, pool *Pool, res *Resolver, d *Dialer, store ClaimStore) *Provisioner {
	return &Provisioner{Pool: pool, Resolver: res, Dialer: d, Claims: store, LegacyClaimsPath: legacyClaimsPath(home)}
}

func (p *Provisioner) where() string { return "ssh/" + p.Pool.Name }

func (p *Provisioner) logger() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// claims is the claims file: every cluster on every pool.
type claims struct {
	Clusters map[string]*clusterClaim `json:"clusters"`
	// Owed lists, by host key, the clusters whose processes and files a
	// teardown could not remove because the host did not answer (a host
	// cut off the network still runs what it ran): they are removed
	// before the host serves another cluster.
	Owed map[string][]string `json:"owed,omitempty"`
}

type clusterClaim struct {
	Pool      string               `json:"pool"`
	Hosts     []claimedHost        `json:"hosts"` // head first
	Nodes     []provision.NodeInfo `json:"nodes"`
	CreatedAt time.Time            `json:"created_at"`
}

type claimedHost struct {
	Name string `json:"name"` // as in the pool
	Key  string `json:"key"`  // user@addr:port
}

func (p *Provisioner) validName(name string) error {
	if err := api.CheckClusterName(name); err != nil {
		return &provision.ConfigError{Where: p.where(), Msg: err.Error()}
	}
	return nil
}

// withClaims runs fn on the current claims and writes the result back
// when fn says so, conditionally on nobody having written in between (fn
// may then run again on the newer claims).
func (p *Provisioner) withClaims(ctx context.Context, fn func(c *claims) (bool, error)) error {
	if p.Claims == nil {
		return errors.New("SSH host claims: no claim store configured")
	}
	err := p.Claims.UpdateDocument(context.WithoutCancel(ctx), claimsKey, func(cur []byte) ([]byte, bool, error) {
		if cur == nil && p.LegacyClaimsPath != "" {
			// Claims an earlier build kept in a file carry over.
			if b, err := os.ReadFile(p.LegacyClaimsPath); err == nil {
				cur = b
			}
		}
		c := &claims{Clusters: map[string]*clusterClaim{}}
		if cur != nil {
			if err := json.Unmarshal(cur, c); err != nil {
				return nil, false, fmt.Errorf("the SSH host claims are corrupt (%v)", err)
			}
			if c.Clusters == nil {
				c.Clusters = map[string]*clusterClaim{}
			}
		}
		write, err := fn(c)
		if err != nil || !write {
			return nil, false, err
		}
		b, err := json.Marshal(c)
		return b, err == nil, err
	})
	if err != nil {
		return fmt.Errorf("SSH host claims: %w", err)
	}
	return nil
}

// candidate is a pool host considered for a new cluster.
type candidate struct {
	host  Host
	ep    Endpoint
	facts HostFacts
	err   error  // unreachable / auth / probe failure
	small string // why it does not fit, when reachable
}

// Provision implements provision.Provisioner: it claims spec.NumNodes free
// hosts that fit spec.Resources, in pool order (the first becomes the
// head). An existing cluster of the same name is returned as is.
func (p *Provisioner) Provision(ctx context.Context, spec provision.ClusterSpec) (*provision.ClusterInfo, error) {
	if err := p.validName(spec.Name); err != nil {
		return nil, err
	}
	n := spec.NumNodes
	if n <= 0 {
		n = 1
	}
	var info *provision.ClusterInfo
	err := p.withClaims(ctx, func(c *claims) (bool, error) {
		if cc := c.Clusters[spec.Name]; cc != nil {
			if cc.Pool != p.Pool.Name {
				return false, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("cluster %q already exists on ssh/%s; run `sky down %s` first or use another name", spec.Name, cc.Pool, spec.Name)}
			}
			if len(cc.Nodes) != n {
				return false, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("cluster %q already exists with %d node(s), not %d; run `sky down %s` first or use another name", spec.Name, len(cc.Nodes), n, spec.Name)}
			}
			info = p.info(spec.Name, cc)
			return false, nil
		}
		busy := map[string]string{} // host key -> cluster
		for name, cc := range c.Clusters {
			for _, h := range cc.Hosts {
				busy[h.Key] = name
			}
		}
		var free []*candidate
		var busyNames []string
		var errs []string
		for _, h := range p.Pool.Hosts {
			ep, err := p.Resolver.Resolve(p.Pool, h)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			if cl, ok := busy[ep.key()]; ok {
				busyNames = append(busyNames, fmt.Sprintf("%s (cluster %s)", h.Name, cl))
				continue
			}
			free = append(free, &candidate{host: h, ep: ep})
		}
		if spec.Zone != "" {
			// The head must be the host named: it holds the data of a
			// volume the task mounts (see volumes.go).
			if err := p.pinHead(spec.Zone, free, busyNames); err != nil {
				return false, err
			}
		}
		p.probeAll(ctx, free, spec.Resources, n)
		p.payOwed(ctx, c, free)
		var chosen []*candidate
		authFailures := 0
		for _, cd := range free {
			var de *DialError
			if errors.As(cd.err, &de) && (de.Kind == AuthFailed || de.Kind == BadCredentials) {
				authFailures++
			}
			switch {
			case cd.err != nil:
				errs = append(errs, cd.err.Error())
			case cd.small != "":
				errs = append(errs, fmt.Sprintf("%s: %s", cd.host.Name, cd.small))
			case len(chosen) < n:
				chosen = append(chosen, cd)
			}
		}
		if spec.Zone != "" && (len(chosen) == 0 || chosen[0].host.Name != spec.Zone) {
			why := "it does not fit the request"
			if cd := free[0]; cd.err != nil {
				why = cd.err.Error()
			} else if cd.small != "" {
				why = cd.small
			}
			return false, &provision.CapacityError{Where: p.where(), Msg: fmt.Sprintf("host %s holds the data of a volume the task mounts, and cannot be the head: %s", spec.Zone, why)}
		}
		if len(chosen) < n {
			msg := fmt.Sprintf("%d host(s) needed but only %d of the pool's %d hosts are free and fit the request; %d busy",
				n, len(chosen), len(p.Pool.Hosts), len(busyNames))
			if len(busyNames) > 0 {
				msg += ": " + strings.Join(busyNames, ", ")
			}
			if len(errs) > 0 {
				msg += "; unusable: " + strings.Join(errs, "; ")
			}
			msg += ". Free hosts with `sky down <cluster>`, add hosts to the pool, or ask for less"
			if authFailures > 0 && authFailures == len(free) && len(busyNames) == 0 {
				// Nothing else stood in the way: the credentials are the
				// problem, and trying elsewhere will not fix them.
				return false, &provision.AuthError{Where: p.where(), Msg: strings.Join(errs, "; ")}
			}
			return false, &provision.CapacityError{Where: p.where(), Msg: msg}
		}
		cc := &clusterClaim{Pool: p.Pool.Name, CreatedAt: time.Now().UTC()}
		for i, cd := range chosen {
			cc.Hosts = append(cc.Hosts, claimedHost{Name: cd.host.Name, Key: cd.ep.key()})
			node := provision.NodeInfo{Index: i, ID: cd.host.Name, InternalIP: cd.facts.IP, Home: cd.facts.Home,
				CPUs: float64(cd.facts.CPUs), MemoryGB: cd.facts.MemoryGB}
			if cd.ep.Addr != cd.facts.IP {
				node.ExternalIP = cd.ep.Addr
			}
			for g, k := range cd.facts.GPUs {
				if node.GPUs == nil {
					node.GPUs = map[string]float64{}
				}
				node.GPUs[g] = float64(k)
			}
			cc.Nodes = append(cc.Nodes, node)
		}
		c.Clusters[spec.Name] = cc
		info = p.info(spec.Name, cc)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// pinHead moves host to the front of free (so it becomes the head), or
// says why it cannot be the head.
func (p *Provisioner) pinHead(host string, free []*candidate, busy []string) error {
	for i, cd := range free {
		if cd.host.Name == host {
			copy(free[1:i+1], free[:i])
			free[0] = cd
			return nil
		}
	}
	for _, h := range p.Pool.Hosts {
		if h.Name == host {
			return &provision.CapacityError{Where: p.where(), Msg: fmt.Sprintf("host %s holds the data of a volume the task mounts, and is not free (busy: %s); `sky down` the cluster using it first",
				host, strings.Join(busy, ", "))}
		}
	}
	return &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("a volume the task mounts lives on host %q, which is no longer in SSH node pool %s (hosts: %s)", host, p.Pool.Name, hostNames(p.Pool))}
}

// probeGrace is how long, once enough hosts answered and fit, Provision
// still waits for the others (whose answers keep the pool order): a host
// that dropped off the network must not hold, for the whole probe
// timeout, a launch the rest of the pool can serve (a managed job
// recovering from that very host).
const probeGrace = 2 * time.Second

// probeAll probes the candidates in parallel and records whether each
// fits; once n fit, the ones still probing get probeGrace, then are
// recorded as not answering.
func (p *Provisioner) probeAll(ctx context.Context, cands []*candidate, req provision.Resources, n int) {
	timeout := p.ProbeTimeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	type probed struct {
		i     int
		facts HostFacts
		err   error
	}
	// Buffered: a probe answering after the grace finds nobody reading.
	results := make(chan probed, len(cands))
	for i, cd := range cands {
		go func() {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			facts, err := p.Dialer.Probe(pctx, cd.ep)
			results <- probed{i, facts, err}
		}()
	}
	answered := make([]bool, len(cands))
	fitting := 0
	var grace <-chan time.Time
	for left := len(cands); left > 0; left-- {
		var r probed
		select {
		case r = <-results:
		case <-grace:
			for i, cd := range cands {
				if !answered[i] {
					cd.err = &DialError{Host: cd.ep.String(), Kind: Timeout, Err: fmt.Errorf("no answer within %s of the other hosts", probeGrace)}
				}
			}
			return
		}
		cd := cands[r.i]
		answered[r.i] = true
		cd.facts, cd.err = r.facts, r.err
		if cd.err == nil {
			cd.small = fits(cd.facts, req)
			if cd.small == "" {
				fitting++
			}
		}
		if fitting >= n && grace == nil {
			grace = time.After(probeGrace)
		}
	}
}

// fits says why facts cannot serve req ("" when they can).
func fits(f HostFacts, req provision.Resources) string {
	var why []string
	if req.CPUs > float64(f.CPUs) {
		why = append(why, fmt.Sprintf("%g CPUs requested, host has %d", req.CPUs, f.CPUs))
	}
	if req.MemoryGB > f.MemoryGB {
		why = append(why, fmt.Sprintf("%g GB memory requested, host has %.1f GB", req.MemoryGB, f.MemoryGB))
	}
	names := make([]string, 0, len(req.GPUs))
	for g := range req.GPUs {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		want := req.GPUs[g]
		if want <= 0 {
			continue
		}
		have := 0
		for name, k := range f.GPUs {
			if strings.EqualFold(name, g) {
				have += k
			}
		}
		if float64(have) < want {
			why = append(why, fmt.Sprintf("%s:%g requested, host has %d", g, want, have))
		}
	}
	if req.InstanceType != "" {
		why = append(why, fmt.Sprintf("instance type %q does not apply to SSH hosts", req.InstanceType))
	}
	return strings.Join(why, ", ")
}

func (p *Provisioner) info(name string, cc *clusterClaim) *provision.ClusterInfo {
	nodes := make([]provision.NodeInfo, len(cc.Nodes))
	copy(nodes, cc.Nodes)
	return &provision.ClusterInfo{Name: name, Cloud: CloudName, Region: "ssh-" + cc.Pool, Nodes: nodes}
}

func (p *Provisioner) claim(ctx context.Context, name string) (*clusterClaim, error) {
	var cc *clusterClaim
	err := p.withClaims(ctx, func(c *claims) (bool, error) {
		cc = c.Clusters[name]
		return false, nil
	})
	if cc != nil && cc.Pool != p.Pool.Name {
		return nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("cluster %q is on ssh/%s, not ssh/%s", name, cc.Pool, p.Pool.Name)}
	}
	return cc, err
}

// Info returns the cluster's nodes, or nil if it holds no hosts.
func (p *Provisioner) Info(ctx context.Context, name string) (*provision.ClusterInfo, error) {
	cc, err := p.claim(ctx, name)
	if err != nil || cc == nil {
		return nil, err
	}
	return p.info(name, cc), nil
}

// Stop implements provision.Provisioner: not possible on SSH pools.
func (p *Provisioner) Stop(ctx context.Context, name string) error {
	return &provision.NotSupportedError{Where: p.where(), Operation: "stop",
		Msg: "stopping clusters on SSH node pools is not supported; use sky down"}
}

// Start implements provision.Provisioner: hosts never stop, so a claimed
// cluster is simply returned.
func (p *Provisioner) Start(ctx context.Context, name string) (*provision.ClusterInfo, error) {
	info, err := p.Info(ctx, name)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("cluster %q does not exist; launch it with `sky launch -c %s --infra %s`", name, name, p.where())}
	}
	return info, nil
}

// Terminate implements provision.Provisioner: on every host it kills each
// process group recorded under PgidDir and the agent's (never by name),
// removes the cluster's directories, then releases the hosts. A host that
// cannot be reached is released anyway (with a warning): its processes
// cannot be killed, and keeping it claimed would block `sky down`
// forever. Any other failure keeps every claim so that a retry converges.
func (p *Provisioner) Terminate(ctx context.Context, name string) error {
	if err := p.validName(name); err != nil {
		return err
	}
	cc, err := p.claim(ctx, name)
	if err != nil || cc == nil {
		return err
	}
	runners, err := p.runners(name, cc.Nodes, DefaultPgidDir)
	if err != nil {
		return err
	}
	script := cleanupScript(name)
	errs := make([]error, len(runners))
	unreached := make([]bool, len(runners))
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(ctx, script, provision.RunOptions{})
			var de *DialError
			switch {
			case errors.As(err, &de) && (de.Kind == Unreachable || de.Kind == Timeout):
				p.logger().Warn("releasing unreachable SSH host; it is cleaned before it serves another cluster", "cluster", name, "host", r.ep.String(), "err", err)
				unreached[i] = true
			case err != nil:
				errs[i] = fmt.Errorf("cleaning host %s of cluster %s: %w", r.ep.Name, name, err)
			case res.ExitCode != 0:
				errs[i] = fmt.Errorf("cleaning host %s of cluster %s: exit %d: %s", r.ep.Name, name, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return p.withClaims(ctx, func(c *claims) (bool, error) {
		if _, ok := c.Clusters[name]; !ok {
			return false, nil
		}
		delete(c.Clusters, name)
		for i, r := range runners {
			if unreached[i] && !slices.Contains(c.Owed[r.ep.key()], name) {
				if c.Owed == nil {
					c.Owed = map[string][]string{}
				}
				c.Owed[r.ep.key()] = append(c.Owed[r.ep.key()], name)
			}
		}
		return true, nil
	})
}

// cleanupScript kills what cluster name runs on a host (each process
// group recorded under PgidDir and the agent's, never by name) and
// removes its files.
func cleanupScript(name string) string {
	globs := []string{provision.QuoteHomePath(PgidDir(name)) + "/*", "~/.sky/agent/ranks/*.pid", "~/.sky/agent/daemon.pid"}
	rm := []string{provision.QuoteHomePath(HostClusterDir(name))}
	rm = append(rm, hostPaths...)
	return killFilesScript(globs...) + "; rm -rf " + strings.Join(rm, " ")
}

// payOwed runs the cleanups a host is owed (see claims.Owed) before it
// serves a new cluster; a host whose cleanup fails is not used.
func (p *Provisioner) payOwed(ctx context.Context, c *claims, cands []*candidate) {
	for _, cd := range cands {
		owed := c.Owed[cd.ep.key()]
		if cd.err != nil || cd.small != "" || len(owed) == 0 {
			continue
		}
		r := NewRunner(p.Dialer, cd.ep, cd.facts.IP, DefaultPgidDir, cd.facts.Home)
		var scripts []string
		for _, name := range owed {
			scripts = append(scripts, cleanupScript(name))
		}
		if _, err := provision.RunChecked(ctx, r, strings.Join(scripts, "; "), provision.RunOptions{}); err != nil {
			cd.err = fmt.Errorf("removing what clusters %s left on host %s when it could not be reached: %w", strings.Join(owed, ", "), cd.host.Name, err)
			continue
		}
		p.logger().Info("cleaned SSH host of clusters torn down while it was unreachable", "host", cd.ep.String(), "clusters", owed)
		delete(c.Owed, cd.ep.key())
	}
}

// queryTimeout is how long Query waits for a host to run `true`: one
// that cannot within it is reported lost. A healthy host answers in
// milliseconds on the cached connection (a fresh one takes a few round
// trips); the managed-jobs controller must tell a host cut off the
// network within seconds.
const queryTimeout = 3 * time.Second

// Query implements provision.Provisioner: UP for a host that answers a
// command; PENDING for one that does not (the backend shows the cluster
// as not healthy, INIT); nothing when the cluster holds no hosts.
func (p *Provisioner) Query(ctx context.Context, name string) ([]provision.NodeState, error) {
	if err := p.validName(name); err != nil {
		return nil, err
	}
	cc, err := p.claim(ctx, name)
	if err != nil || cc == nil {
		return nil, err
	}
	runners, err := p.runners(name, cc.Nodes, DefaultPgidDir)
	if err != nil {
		return nil, err
	}
	out := make([]provision.NodeState, len(runners))
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			qctx, cancel := context.WithTimeout(ctx, queryTimeout)
			defer cancel()
			// A dead host can hold a command past its context (opening a
			// channel on a connection whose peer vanished waits for the
			// keepalive, and a cancelled command tries to kill itself
			// remotely): stop waiting at the deadline, the command ends
			// on its own in the background.
			ok := make(chan bool, 1)
			go func() {
				res, err := r.Run(qctx, "true", provision.RunOptions{})
				ok <- err == nil && res.ExitCode == 0
			}()
			st := provision.NodePending
			select {
			case up := <-ok:
				if up {
					st = provision.NodeUp
				}
			case <-qctx.Done():
			}
			out[i] = provision.NodeState{Index: cc.Nodes[i].Index, ID: cc.Nodes[i].ID, Status: st}
		}()
	}
	wg.Wait()
	return out, nil
}

// Runners implements provision.Provisioner: SSH runners, head first, that
// record their commands under PgidDir(info.Name).
func (p *Provisioner) Runners(info *provision.ClusterInfo) ([]provision.CommandRunner, error) {
	if info == nil || len(info.Nodes) == 0 {
		return nil, &provision.ConfigError{Where: p.where(), Msg: "cluster has no nodes"}
	}
	rs, err := p.runners(info.Name, info.Nodes, PgidDir(info.Name))
	if err != nil {
		return nil, err
	}
	out := make([]provision.CommandRunner, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out, nil
}

func (p *Provisioner) runners(cluster string, nodes []provision.NodeInfo, pgDir string) ([]*Runner, error) {
	byName := map[string]Host{}
	for _, h := range p.Pool.Hosts {
		byName[h.Name] = h
	}
	out := make([]*Runner, len(nodes))
	for i, n := range nodes {
		h, ok := byName[n.ID]
		if !ok {
			return nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("host %s of cluster %s is no longer in pool %s (~/.sky/ssh_node_pools.yaml); put it back to reach it", n.ID, cluster, p.Pool.Name)}
		}
		ep, err := p.Resolver.Resolve(p.Pool, h)
		if err != nil {
			return nil, &provision.ConfigError{Where: p.where(), Msg: err.Error()}
		}
		out[i] = NewRunner(p.Dialer, ep, n.InternalIP, pgDir, n.Home)
	}
	return out, nil
}
