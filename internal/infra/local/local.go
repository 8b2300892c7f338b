// Package local is SkyGo's embedded local infrastructure: clusters whose
// nodes are sandboxes on this machine.
//
// A node is a directory used as HOME (<root>/clusters/<cluster>/node-<i>/,
// root defaulting to ~/.sky/local), so ~/sky_workdir and ~/sky_logs are per
// node; an address; and the processes started through its runner
// (proc.Runner), which all carry SKYGO_LOCAL_NODE=<node dir> in their
// environment. That marker is how Stop finds every process of a node
// (agent daemon and jobs) without trusting PID files.
//
// Where the machine allows it (root with iproute2), each node has a network
// namespace of its own on a host bridge, its address there (10.213.x.y),
// and every process of the node runs inside it, so ports are per node
// (netns.go). Otherwise, or with SKYGO_LOCAL_NETNS=0, the node's address is
// a loopback address 127.0.0.x (x ≥ 2, distinct across all local clusters;
// Linux routes all of 127/8 to lo) on this machine's shared network, and
// two nodes cannot listen on the same port. `sky check` says which.
//
// The only record is <root>/clusters/<cluster>/cluster.json, written
// atomically; loopback allocation scans those records under a file lock,
// namespace addresses are leased machine-wide (netns.go). Every
// operation is idempotent and converges after a crash at any point:
// Provision recreates missing node directories, Terminate kills and removes
// whatever is left.
//
// `ssh <cluster>` reaches the nodes through the head's agent, which serves
// SSH on each node's address at the cluster's port (sshaccess.go).
//
// Capacity is this machine: each node advertises the CPUs and memory
// requested (default: the machine's); asking for more than the machine has,
// or for GPUs, is a provision.CapacityError.
package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// CloudName is the display name in SKYPILOT_CLUSTER_INFO and status.
const CloudName = "Local"

// Provisioner implements provision.Provisioner on this machine.
type Provisioner struct {
	root string
	// Machine capacity; filled from the OS by New, overridable in tests.
	CPUs     float64
	MemoryGB float64
	// StopGrace is how long stopped processes get after SIGTERM.
	StopGrace time.Duration
	// Net is how new nodes are networked; nil asks this machine
	// (MachineNetwork) at the first launch.
	Net *Network
}

var _ provision.Provisioner = (*Provisioner)(nil)

// New returns a provisioner keeping its clusters under root
// (DefaultRoot() when empty).
func New(root string) (*Provisioner, error) {
	if root == "" {
		var err error
		if root, err = DefaultRoot(); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	return &Provisioner{root: abs, CPUs: float64(runtime.NumCPU()), MemoryGB: machineMemoryGB(), StopGrace: 2 * time.Second}, nil
}

// DefaultRoot is ~/.sky/skygo/local.
func DefaultRoot() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("local infra needs a home directory: %w", err)
	}
	return paths.LocalInfra(home), nil
}

// Root is the directory holding all local clusters.
func (p *Provisioner) Root() string { return p.root }

// ClusterDir is where the cluster's record and node directories live.
func (p *Provisioner) ClusterDir(name string) string {
	return filepath.Join(p.root, "clusters", name)
}

// NodeDir is the HOME of node i of the cluster.
func (p *Provisioner) NodeDir(name string, i int) string {
	return filepath.Join(p.ClusterDir(name), fmt.Sprintf("node-%d", i))
}

// record is cluster.json.
type record struct {
	Name      string               `json:"name"`
	Status    provision.NodeStatus `json:"status"`
	Nodes     []provision.NodeInfo `json:"nodes"`
	CreatedAt time.Time            `json:"created_at"`
}

func validName(name string) error {
	if err := api.CheckClusterName(name); err != nil {
		return &provision.ConfigError{Where: "local", Msg: err.Error()}
	}
	return nil
}

// Provision implements provision.Provisioner. It adopts an existing
// cluster of the same name (restarting it if stopped).
func (p *Provisioner) Provision(ctx context.Context, spec provision.ClusterSpec) (*provision.ClusterInfo, error) {
	if err := validName(spec.Name); err != nil {
		return nil, err
	}
	n := spec.NumNodes
	if n <= 0 {
		n = 1
	}
	if err := p.checkCapacity(spec.Resources); err != nil {
		return nil, err
	}
	unlock, err := p.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()

	rec, err := p.read(spec.Name)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if len(rec.Nodes) != n {
			return nil, &provision.ConfigError{Where: "local", Msg: fmt.Sprintf("cluster %q already exists with %d node(s), not %d; run `sky down %s` first or use another name", spec.Name, len(rec.Nodes), n, spec.Name)}
		}
	} else {
		// A crash during an earlier Terminate may have left files, or
		// processes, behind without a record; start clean. (The caller
		// holds the cluster's lock: no live incarnation of this name
		// exists.)
		if err := p.killCluster(spec.Name); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(p.ClusterDir(spec.Name)); err != nil {
			return nil, fmt.Errorf("clearing leftovers of cluster %q: %w", spec.Name, err)
		}
		if rec, err = p.newRecord(spec, n); err != nil {
			return nil, err
		}
	}
	if err := p.ensureNet(rec); err != nil {
		return nil, err
	}
	if err := ensureSSHPort(rec); err != nil {
		return nil, err
	}
	rec.Status = provision.NodeUp
	if err := p.write(rec); err != nil {
		return nil, err
	}
	for _, node := range rec.Nodes {
		if err := os.MkdirAll(filepath.Join(node.Home, ".sky"), 0o755); err != nil {
			return nil, fmt.Errorf("creating node directory: %w", err)
		}
	}
	return p.info(rec), nil
}

// newRecord allocates the addresses of a new cluster's n nodes and writes
// its first record (status pending until Provision is done). With a
// namespace per node, the leases and the record that makes them live are
// written under the machine lock, so no other server reclaims them.
func (p *Provisioner) newRecord(spec provision.ClusterSpec, n int) (*record, error) {
	rec := &record{Name: spec.Name, Status: provision.NodePending, CreatedAt: time.Now().UTC()}
	cpus, mem := spec.Resources.CPUs, spec.Resources.MemoryGB
	if cpus <= 0 {
		cpus = p.CPUs
	}
	if mem <= 0 {
		mem = p.MemoryGB
	}
	for i := 0; i < n; i++ {
		rec.Nodes = append(rec.Nodes, provision.NodeInfo{
			Index: i, ID: fmt.Sprintf("%s-node-%d", spec.Name, i),
			Home: p.NodeDir(spec.Name, i), CPUs: cpus, MemoryGB: mem,
		})
	}
	net := p.network()
	if !net.PerNode() {
		ips, err := p.allocateIPs(n)
		if err != nil {
			return nil, err
		}
		for i := range rec.Nodes {
			rec.Nodes[i].InternalIP = ips[i]
		}
		return rec, nil
	}
	unlock, err := machineLock(net.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	leases, err := net.allocate(p.root, spec.Name, n)
	if err != nil {
		return nil, err
	}
	for i, l := range leases {
		rec.Nodes[i].InternalIP, rec.Nodes[i].NetNS = l.IP, l.NetNS
	}
	if err := p.write(rec); err != nil {
		for _, l := range leases {
			_ = net.remove(l)
		}
		return nil, err
	}
	return rec, nil
}

// network is how this provisioner networks new nodes.
func (p *Provisioner) network() *Network {
	if p.Net != nil {
		return p.Net
	}
	return MachineNetwork()
}

// ensureNet makes the network namespace of every node of rec that has
// one and lacks it (after a reboot, or a crash midway), re-leasing its
// address if the lease went missing.
func (p *Provisioner) ensureNet(rec *record) error {
	var nodes []provision.NodeInfo
	for _, n := range rec.Nodes {
		if n.NetNS != "" {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	net := p.network()
	if !net.PerNode() {
		return &provision.ConfigError{Where: "local", Msg: fmt.Sprintf("cluster %q has a network namespace per node, which this server cannot make (%s); run `sky down %s` and launch it again", rec.Name, net.Why, rec.Name)}
	}
	unlock, err := machineLock(net.Dir)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err = net.claim(p.root, rec.Name, n); err != nil {
			break
		}
	}
	unlock()
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := net.ensureNode(n); err != nil {
			return err
		}
	}
	return nil
}

// releaseNet removes the namespaces and leases of a cluster being torn
// down: those its leases name (a record may be gone after a crash) and
// those of its recorded nodes.
func (p *Provisioner) releaseNet(name string, nodes []provision.NodeInfo) error {
	dir := DefaultNetDir
	if p.Net != nil {
		dir = p.Net.Dir
	}
	has := false
	for _, n := range nodes {
		has = has || n.NetNS != ""
	}
	if _, err := os.Stat(dir); err != nil && !has {
		return nil
	}
	if os.Geteuid() != 0 && !has {
		return nil
	}
	return (&Network{Dir: dir}).release(p.root, name, nodes)
}

func (p *Provisioner) checkCapacity(r provision.Resources) error {
	if r.CPUs > p.CPUs {
		return &provision.CapacityError{Where: "local", Msg: fmt.Sprintf("%g CPUs per node requested but this machine has %g; ask for fewer CPUs or use other infrastructure", r.CPUs, p.CPUs)}
	}
	if r.MemoryGB > p.MemoryGB {
		return &provision.CapacityError{Where: "local", Msg: fmt.Sprintf("%g GB of memory per node requested but this machine has %.1f GB; ask for less memory or use other infrastructure", r.MemoryGB, p.MemoryGB)}
	}
	for name, n := range r.GPUs {
		if n > 0 {
			return &provision.CapacityError{Where: "local", Msg: fmt.Sprintf("%s:%g requested but local infrastructure offers no GPUs; use other infrastructure", name, n)}
		}
	}
	if r.InstanceType != "" {
		return &provision.CapacityError{Where: "local", Msg: fmt.Sprintf("instance type %q does not exist on local infrastructure", r.InstanceType)}
	}
	return nil
}

// Stop implements provision.Provisioner: every process of every node is
// ended (agent and jobs); directories are kept.
func (p *Provisioner) Stop(ctx context.Context, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	rec, err := p.read(name)
	if err != nil || rec == nil {
		return err
	}
	// Mark first: if we crash while killing, the cluster reads as stopping
	// rather than up, and a retried Stop finishes the job.
	rec.Status = provision.NodeStopping
	if err := p.write(rec); err != nil {
		return err
	}
	if err := p.killNodes(rec, false); err != nil {
		return err
	}
	rec.Status = provision.NodeStopped
	return p.write(rec)
}

// killNodes ends every process of the cluster's nodes: given StopGrace
// after a SIGTERM for a stop, at once for a teardown (see
// proc.KillProcsWithEnvNow).
func (p *Provisioner) killNodes(rec *record, now bool) error {
	var errs []error
	for _, node := range rec.Nodes {
		kill := func(kv string) error { return proc.KillProcsWithEnv(kv, p.StopGrace) }
		if now {
			kill = proc.KillProcsWithEnvNow
		}
		if err := kill(proc.EnvNode + "=" + node.Home); err != nil {
			errs = append(errs, fmt.Errorf("stopping node %d of %q: %w", node.Index, rec.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Start implements provision.Provisioner. Agents are restarted by the
// backend's bootstrap, as after a Provision.
func (p *Provisioner) Start(ctx context.Context, name string) (*provision.ClusterInfo, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	unlock, err := p.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := p.read(name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, &provision.ConfigError{Where: "local", Msg: fmt.Sprintf("cluster %q does not exist; launch it with `sky launch -c %s`", name, name)}
	}
	if err := p.ensureNet(rec); err != nil {
		return nil, err
	}
	if err := ensureSSHPort(rec); err != nil {
		return nil, err
	}
	rec.Status = provision.NodeUp
	if err := p.write(rec); err != nil {
		return nil, err
	}
	return p.info(rec), nil
}

// Terminate implements provision.Provisioner: processes are killed at once and
// the cluster directory removed, releasing its addresses. It returns nil
// only once nothing of the cluster is left on this machine (no process,
// namespace, veth, lease or directory), so that the caller may then drop
// its record; any error leaves enough behind (the record file goes last,
// a lease only after its network) for a retried Terminate, or the
// server's sweeper, to find the rest.
//
// Processes are found by the node marker under the cluster's directory,
// recorded nodes or not, so a record that is corrupt or already gone (a
// teardown that crashed) does not hide any.
func (p *Provisioner) Terminate(ctx context.Context, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	var nodes []provision.NodeInfo
	if rec, err := p.read(name); err == nil && rec != nil {
		nodes = rec.Nodes
	}
	if err := p.killCluster(name); err != nil {
		return err
	}
	// The network goes before the record that would let a retried
	// Terminate find it.
	if err := p.releaseNet(name, nodes); err != nil {
		return fmt.Errorf("removing the network of cluster %q: %w", name, err)
	}
	// The list of volume directories its jobs saw, and the records of its
	// nodes' PID namespaces, go with it.
	proc.RemoveSandboxFiles(p.ClusterDir(name))
	unmountUnder(p.ClusterDir(name))
	// Removing files through a mount still there would delete what it
	// shows (a bucket's objects): refuse instead.
	if left := mountsUnder(p.ClusterDir(name)); len(left) > 0 {
		return fmt.Errorf("cluster %q still has mounts that could not be unmounted: %s; unmount them (fusermount3 -uz PATH) and run sky down again",
			name, strings.Join(left, ", "))
	}
	// The nodes first, the record last: a teardown cut short leaves the
	// record, so `sky local down`, a status refresh and a retried
	// Terminate still know the cluster.
	dirs, _ := filepath.Glob(filepath.Join(p.ClusterDir(name), "node-*"))
	for _, d := range dirs {
		if err := removeTree(d); err != nil {
			return fmt.Errorf("removing cluster %q: %w", name, err)
		}
	}
	// A process started while the nodes went (a request's command on a
	// node, racing this teardown) carries the marker too; once the
	// directories are gone no new one can start there.
	if err := p.killCluster(name); err != nil {
		return err
	}
	if err := removeTree(p.ClusterDir(name)); err != nil {
		return fmt.Errorf("removing cluster %q: %w", name, err)
	}
	if left := p.remainsOf(name); len(left) > 0 {
		return fmt.Errorf("cluster %q is not gone after its teardown: %s is still there; run sky down again", name, strings.Join(left, ", "))
	}
	return nil
}

// killCluster ends every process of every node of cluster name at once.
func (p *Provisioner) killCluster(name string) error {
	if err := proc.KillProcsWithEnvPrefixNow(p.nodeMarkerPrefix(name)); err != nil {
		return fmt.Errorf("stopping the processes of cluster %q: %w", name, err)
	}
	return nil
}

// nodeMarkerPrefix is how the node marker of every node of cluster name
// starts (node directories are <cluster dir>/node-<i>).
func (p *Provisioner) nodeMarkerPrefix(name string) string {
	return proc.EnvNode + "=" + p.ClusterDir(name) + string(filepath.Separator)
}

// remainsOf lists what of cluster name is on this machine: its directory,
// processes and leases.
func (p *Provisioner) remainsOf(name string) []string {
	var out []string
	if _, err := os.Lstat(p.ClusterDir(name)); err == nil {
		out = append(out, "directory "+p.ClusterDir(name))
	}
	if pids := proc.ProcsWithEnvPrefix(p.nodeMarkerPrefix(name)); len(pids) > 0 {
		out = append(out, fmt.Sprintf("processes %v", pids))
	}
	n := &Network{Dir: p.netDir()}
	for _, l := range n.readLeases() {
		if l.Root == p.root && l.Cluster == name {
			out = append(out, "lease of "+l.IP+" ("+l.NetNS+")")
		}
	}
	return out
}

// netDir is where this provisioner's leases live.
func (p *Provisioner) netDir() string {
	if p.Net != nil && p.Net.Dir != "" {
		return p.Net.Dir
	}
	return DefaultNetDir
}

// Remnants lists the clusters that have anything on this machine under
// this provisioner's root: a directory, a process carrying a node marker
// there, or a lease. The server's sweeper compares it with its records.
func (p *Provisioner) Remnants() ([]string, error) {
	set := map[string]bool{}
	ents, err := os.ReadDir(filepath.Join(p.root, "clusters"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		set[e.Name()] = true
	}
	prefix := proc.EnvNode + "=" + filepath.Join(p.root, "clusters") + string(filepath.Separator)
	for _, kv := range proc.EnvValuesWithPrefix(prefix) {
		if name, _, ok := strings.Cut(strings.TrimPrefix(kv, prefix), string(filepath.Separator)); ok {
			set[name] = true
		}
	}
	for _, name := range (&Network{Dir: p.netDir()}).leasedClusters(p.root) {
		set[name] = true
	}
	var out []string
	for name := range set {
		if validName(name) == nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// removeTree removes dir once the nodes' processes are dead. The API
// server may still be reading a node's job table in-process (a log tail
// that just ended asks for its job's status), and SQLite creates its
// -wal and -shm files beside the table while RemoveAll walks the
// directory; a reader finds the table gone on the next pass, so a few
// passes finish the job.
func removeTree(dir string) error {
	var err error
	for range 5 {
		if err = os.RemoveAll(dir); err == nil || !errors.Is(err, syscall.ENOTEMPTY) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Query implements provision.Provisioner.
func (p *Provisioner) Query(ctx context.Context, name string) ([]provision.NodeState, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	rec, err := p.read(name)
	if err != nil || rec == nil {
		return nil, err
	}
	out := make([]provision.NodeState, len(rec.Nodes))
	for i, n := range rec.Nodes {
		st := rec.Status
		if _, err := os.Stat(n.Home); err != nil {
			st = provision.NodePending // directory lost: Provision will recreate it
		} else if _, err := os.Stat(proc.NetNSPath(n.NetNS)); st == provision.NodeUp && n.NetNS != "" && err != nil {
			st = provision.NodePending // namespace lost (a reboot): so is every process in it
		}
		out[i] = provision.NodeState{Index: n.Index, ID: n.ID, Status: st}
	}
	return out, nil
}

// Info returns the cluster's nodes as recorded, or nil if it does not exist.
func (p *Provisioner) Info(name string) (*provision.ClusterInfo, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	rec, err := p.read(name)
	if err != nil || rec == nil {
		return nil, err
	}
	return p.info(rec), nil
}

// Runners implements provision.Provisioner.
func (p *Provisioner) Runners(info *provision.ClusterInfo) ([]provision.CommandRunner, error) {
	if info == nil || len(info.Nodes) == 0 {
		return nil, &provision.ConfigError{Where: "local", Msg: "cluster has no nodes"}
	}
	out := make([]provision.CommandRunner, len(info.Nodes))
	for i, n := range info.Nodes {
		out[i] = &NodeRunner{proc.NewRunner(n.Home, n.InternalIP).InNetNS(proc.NetNSPath(n.NetNS))}
	}
	return out, nil
}

func (p *Provisioner) info(rec *record) *provision.ClusterInfo {
	nodes := make([]provision.NodeInfo, len(rec.Nodes))
	copy(nodes, rec.Nodes)
	return &provision.ClusterInfo{Name: rec.Name, Cloud: CloudName, Region: "local", Nodes: nodes}
}

func (p *Provisioner) recordPath(name string) string {
	return filepath.Join(p.ClusterDir(name), "cluster.json")
}

func (p *Provisioner) read(name string) (*record, error) {
	b, err := os.ReadFile(p.recordPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading local cluster %q: %w", name, err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("reading local cluster %q: %s is corrupt (%v); run `sky down %s` to remove it", name, p.recordPath(name), err, name)
	}
	return &rec, nil
}

func (p *Provisioner) write(rec *record) error {
	dir := p.ClusterDir(rec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing local cluster %q: %w", rec.Name, err)
	}
	b, _ := json.MarshalIndent(rec, "", "  ")
	// A temp file of its own per write: Stop writes without the infra
	// lock, and two writers sharing one temp name interleave their bytes
	// into a corrupt record that the rename then publishes.
	f, err := os.CreateTemp(dir, "cluster.json.tmp-*")
	if err != nil {
		return fmt.Errorf("writing local cluster %q: %w", rec.Name, err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, p.recordPath(rec.Name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing local cluster %q: %w", rec.Name, err)
	}
	return nil
}

// lock serialises record changes of all local clusters (IP allocation
// must see every cluster).
func (p *Provisioner) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(p.root, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", p.root, err)
	}
	f, err := os.OpenFile(filepath.Join(p.root, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking local infra: %w", err)
	}
	// Polled rather than blocking, so that a launch waiting here (behind
	// another server's allocation, or a stuck one) can be cancelled: a
	// `sky down` of the cluster interrupts it.
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking local infra: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the local infrastructure's lock (%s): %w", f.Name(), context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// allocateIPs picks n loopback addresses not used by any local cluster,
// lowest first, skipping .0, .1 and .255 in every /24.
func (p *Provisioner) allocateIPs(n int) ([]string, error) {
	used := map[string]bool{}
	records, _ := filepath.Glob(filepath.Join(p.root, "clusters", "*", "cluster.json"))
	for _, path := range records {
		rec, err := p.read(filepath.Base(filepath.Dir(path)))
		if err != nil || rec == nil {
			continue
		}
		for _, node := range rec.Nodes {
			used[node.InternalIP] = true
		}
	}
	var out []string
	addr := netip.MustParseAddr("127.0.0.2")
	for len(out) < n {
		if !addr.IsValid() || addr.As4()[0] != 127 {
			return nil, &provision.CapacityError{Where: "local", Msg: "no free loopback address left in 127.0.0.0/8; tear down some local clusters"}
		}
		b := addr.As4()
		if b[3] >= 2 && b[3] <= 254 && !used[addr.String()] {
			out = append(out, addr.String())
		}
		addr = addr.Next()
	}
	return out, nil
}

func machineMemoryGB() float64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(fields[1], 64)
			return kb / (1024 * 1024)
		}
	}
	return 0
}
