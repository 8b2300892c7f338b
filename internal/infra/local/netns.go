package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// Per-node network namespaces. Where this machine allows it (the server
// runs as root, iproute2's `ip` is installed and a namespace can be made,
// and SKYGO_LOCAL_NETNS is not "0"), every local node gets a network of
// its own, so that two nodes can both listen on 0.0.0.0:8080:
//
//   - one bridge on the host, skygo0, holding the first address of a
//     private /16 that no route of this machine overlaps (10.213.0.0/16
//     unless taken), chosen once and kept in <NetDir>/net.json;
//   - per node a namespace skygo-A-B-C-D named from its address A.B.C.D, a
//     veth pair whose host end (skvXXXXXXXX, the address in hex: interface
//     names hold 15 bytes) is on the bridge and whose other end is eth0
//     in the namespace with the node's address and a default route via
//     the bridge; lo is up;
//   - outbound traffic masqueraded by iptables when it is installed.
//
// Nodes of every cluster reach each other over the bridge, and the API
// server reaches every node's ports directly. Addresses are unique on the
// machine, across the local roots of all servers (each test has its own):
// every address is leased by a file <NetDir>/leases/<addr>.json naming its
// owner (root, cluster, node), written under a machine-wide lock together
// with the owner's cluster record. A lease whose owner's record no longer
// lists the address (a HOME removed without `sky down`, a crash between
// lease and record) is reclaimed at the next allocation, its namespace and
// veth removed by the names the lease holds.
//
// Otherwise nodes share this machine's network on loopback addresses
// 127.0.0.x, and two nodes cannot listen on the same port.

// Bridge is the host's bridge every node's veth joins.
const Bridge = "skygo0"

// DefaultNetDir keeps the machine's leases and chosen subnet. It is on
// disk, not under /run: cluster records survive a reboot, so must the
// addresses they hold.
const DefaultNetDir = "/var/lib/skygo/local-net"

// EnvNetNS turns per-node namespaces off when "0" (the server's
// environment).
const EnvNetNS = "SKYGO_LOCAL_NETNS"

// Network is how this machine networks its local nodes.
type Network struct {
	// Prefix is the nodes' subnet when each node has a namespace of its
	// own; not valid when nodes share this machine's network.
	Prefix netip.Prefix
	// Why says why nodes share this machine's network.
	Why string
	// Outbound says how nodes reach beyond this machine ("" when they
	// cannot: no iptables to masquerade them).
	Outbound string
	// Dir is where the leases live (DefaultNetDir).
	Dir string
}

// PerNode reports whether each node has a network namespace of its own.
func (n *Network) PerNode() bool { return n != nil && n.Prefix.IsValid() }

// bridgeAddr is the host's address on the bridge: the default gateway of
// every node.
func (n *Network) bridgeAddr() netip.Addr { return n.Prefix.Addr().Next() }

// Describe is the one line `sky check` shows.
func (n *Network) Describe() string {
	if !n.PerNode() {
		return "nodes share this machine's network (" + n.Why + "); two nodes cannot listen on the same port"
	}
	return fmt.Sprintf("each node has its own network namespace (%s, bridge %s); ports are per node", n.Prefix, Bridge)
}

var (
	detectOnce sync.Once
	detected   *Network
)

// MachineNetwork finds out, once per process, how local nodes are
// networked; making the bridge and a probe namespace is part of finding out.
func MachineNetwork() *Network {
	detectOnce.Do(func() { detected = detectNetwork(DefaultNetDir) })
	return detected
}

func detectNetwork(dir string) *Network {
	n := &Network{Dir: dir}
	switch {
	case os.Getenv(EnvNetNS) == "0":
		n.Why = EnvNetNS + "=0 is set"
		return n
	case os.Geteuid() != 0:
		n.Why = "network namespaces need root"
		return n
	}
	if _, err := exec.LookPath("ip"); err != nil {
		n.Why = "network namespaces need iproute2's ip command, which is not installed"
		return n
	}
	unlock, err := machineLock(dir)
	if err != nil {
		n.Why = err.Error()
		return n
	}
	defer unlock()
	prefix, err := choosePrefix(dir)
	if err == nil {
		err = proc.CanMakeNetNS()
	}
	if err == nil {
		n.Prefix = prefix
		err = n.ensureBridge()
	}
	if err != nil {
		n.Prefix = netip.Prefix{}
		n.Why = "cannot make network namespaces here: " + err.Error()
	}
	return n
}

// machineLock serialises the leases and the bridge of all servers on this
// machine. Callers holding a local root's lock take it after that one.
func machineLock(dir string) (func(), error) {
	if err := os.MkdirAll(filepath.Join(dir, "leases"), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// ipCmd runs `ip args...` with stdin as its batch input when set.
func ipCmd(stdin string, args ...string) error {
	c := exec.Command("ip", args...)
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

type netFile struct {
	Prefix string `json:"prefix"`
}

// choosePrefix is the subnet recorded in dir, or the first of
// 10.213.0.0/16 ... 10.254.0.0/16 that overlaps no route or address of
// this machine, recorded then.
func choosePrefix(dir string) (netip.Prefix, error) {
	path := filepath.Join(dir, "net.json")
	if b, err := os.ReadFile(path); err == nil {
		var nf netFile
		if err := json.Unmarshal(b, &nf); err == nil {
			if p, err := netip.ParsePrefix(nf.Prefix); err == nil {
				return p, nil
			}
		}
	}
	used, err := usedPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	p, err := freePrefix(used)
	if err != nil {
		return netip.Prefix{}, err
	}
	b, _ := json.Marshal(netFile{Prefix: p.String()})
	if err := writeAtomic(path, b); err != nil {
		return netip.Prefix{}, err
	}
	return p, nil
}

// freePrefix picks the first candidate /16 overlapping none of used.
func freePrefix(used []netip.Prefix) (netip.Prefix, error) {
	for b := 213; b <= 254; b++ {
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(b), 0, 0}), 16)
		free := true
		for _, u := range used {
			if u.Bits() > 0 && u.Overlaps(cand) {
				free = false
				break
			}
		}
		if free {
			return cand, nil
		}
	}
	return netip.Prefix{}, errors.New("every subnet 10.213.0.0/16 ... 10.254.0.0/16 overlaps a route of this machine")
}

// usedPrefixes are the IPv4 routes and interface subnets of this machine,
// the skygo bridge's excepted; default routes are left out (they overlap
// everything).
func usedPrefixes() ([]netip.Prefix, error) {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route: %w", err)
	}
	var used []netip.Prefix
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.Contains(line, "dev "+Bridge+" ") || strings.HasSuffix(line, "dev "+Bridge) {
			continue
		}
		dst := f[0]
		switch dst {
		case "unicast", "local", "broadcast", "multicast", "unreachable", "blackhole", "prohibit", "throw", "anycast", "nat":
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if dst == "default" {
			continue
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			used = append(used, p.Masked())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Name == Bridge {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if p, err := netip.ParsePrefix(ipn.String()); err == nil && p.Addr().Is4() {
					used = append(used, p.Masked())
				}
			}
		}
	}
	return used, nil
}

// ensureBridge makes the bridge with its address, the handle of this
// namespace the nodes' agents come back to, and outbound masquerading.
// Each step is skipped when already done.
func (n *Network) ensureBridge() error {
	addr := netip.PrefixFrom(n.bridgeAddr(), n.Prefix.Bits()).String()
	mac := macOf(0x42, n.bridgeAddr())
	br, err := net.InterfaceByName(Bridge)
	if err != nil {
		if err := ipCmd("", "link", "add", Bridge, "address", mac, "type", "bridge"); err != nil && !interfaceExists(Bridge) {
			return err
		}
		if br, err = net.InterfaceByName(Bridge); err != nil {
			return err
		}
	}
	if br.HardwareAddr.String() != mac {
		if err := ipCmd("", "link", "set", Bridge, "address", mac); err != nil {
			return err
		}
	}
	if !hasAddr(br, addr) {
		if err := ipCmd("", "addr", "add", addr, "dev", Bridge); err != nil {
			return err
		}
	}
	if br.Flags&net.FlagUp == 0 {
		if err := ipCmd("", "link", "set", Bridge, "up"); err != nil {
			return err
		}
	}
	if err := ensureHostHandle(); err != nil {
		return err
	}
	n.Outbound = n.ensureNAT()
	return nil
}

func interfaceExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

func hasAddr(i *net.Interface, cidr string) bool {
	addrs, _ := i.Addrs()
	for _, a := range addrs {
		if a.String() == cidr {
			return true
		}
	}
	return false
}

// ensureHostHandle names this process's network namespace proc.HostNetNS
// unless that name already is it. "This process's" is where it started
// (proc.OwnNetNS), not what /proc/self/ns/net says at this instant.
func ensureHostHandle() error {
	dev, ino, err := proc.OwnNetNS()
	if err != nil {
		return err
	}
	var cur syscall.Stat_t
	if syscall.Stat(proc.HostNetNS, &cur) == nil {
		if cur.Dev == dev && cur.Ino == ino {
			return nil
		}
		if err := ipCmd("", "netns", "del", filepath.Base(proc.HostNetNS)); err != nil {
			return err
		}
	}
	return proc.NameOwnNetNS(proc.HostNetNS)
}

// ensureNAT lets the nodes reach beyond this machine: forwarding on, and
// iptables masquerading what leaves the subnet through another interface.
// It says how, or "" when iptables is missing or refuses.
func (n *Network) ensureNAT() string {
	if _, err := exec.LookPath("iptables"); err != nil {
		return ""
	}
	src := n.Prefix.String()
	rules := [][]string{
		{"-t", "nat", "POSTROUTING", "-s", src, "!", "-o", Bridge, "-j", "MASQUERADE"},
		{"-t", "filter", "FORWARD", "-i", Bridge, "-j", "ACCEPT"},
		{"-t", "filter", "FORWARD", "-o", Bridge, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
	}
	for _, r := range rules {
		table, chain, spec := r[:2], r[2], r[3:]
		check := append(append(append([]string{}, table...), "-C", chain), spec...)
		if exec.Command("iptables", check...).Run() == nil {
			continue
		}
		// Inserted first: a FORWARD policy of DROP (Docker's) or its
		// rules must not swallow the nodes' traffic.
		add := append(append(append([]string{}, table...), "-I", chain), spec...)
		if err := exec.Command("iptables", add...).Run(); err != nil {
			return ""
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
		return ""
	}
	return "iptables masquerading"
}

// lease is one address of a node on this machine.
type lease struct {
	IP      string    `json:"ip"`
	NetNS   string    `json:"netns"`
	Veth    string    `json:"veth"`
	Root    string    `json:"root"`
	Cluster string    `json:"cluster"`
	Node    int       `json:"node"`
	Created time.Time `json:"created"`
}

// macOf is the MAC address of an interface holding ip, locally
// administered, kind telling the bridge (0x42), a node's eth0 (0x4e) and
// a veth's host end (0x48) apart. Fixed addresses keep every neighbour
// cache right when an address is reused at once by a new node, or when
// the bridge gains and loses ports (a bridge otherwise takes the lowest
// MAC of its ports, so its own would change under the nodes' caches).
func macOf(kind byte, ip netip.Addr) string {
	b := ip.As4()
	return net.HardwareAddr{0x02, kind, b[0], b[1], b[2], b[3]}.String()
}

func netnsName(ip netip.Addr) string {
	return "skygo-" + strings.ReplaceAll(ip.String(), ".", "-")
}

func vethName(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("skv%02x%02x%02x%02x", b[0], b[1], b[2], b[3])
}

func (n *Network) leasePath(ip string) string {
	return filepath.Join(n.Dir, "leases", ip+".json")
}

func (n *Network) readLeases() []lease {
	paths, _ := filepath.Glob(filepath.Join(n.Dir, "leases", "*.json"))
	var out []lease
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var l lease
		if json.Unmarshal(b, &l) == nil && l.IP != "" {
			out = append(out, l)
		}
	}
	return out
}

func (n *Network) writeLease(l lease) error {
	b, _ := json.MarshalIndent(l, "", "  ")
	return writeAtomic(n.leasePath(l.IP), b)
}

// live reports whether l's owner still holds it: its cluster record lists
// the address with the lease's namespace.
func (l lease) live() bool {
	b, err := os.ReadFile(filepath.Join(l.Root, "clusters", l.Cluster, "cluster.json"))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	var rec record
	if json.Unmarshal(b, &rec) != nil {
		return true // unreadable is not gone; its owner's `sky down` clears it
	}
	for _, node := range rec.Nodes {
		if node.InternalIP == l.IP && node.NetNS == l.NetNS {
			return true
		}
	}
	return false
}

// allocate leases k addresses of the subnet for nodes 0..k-1 of cluster
// under root, lowest free first (skipping the bridge's and every .0 and
// .255), reclaiming leases whose owner is gone. The caller holds the
// machine lock until the cluster's record lists them.
func (n *Network) allocate(root, cluster string, k int) ([]lease, error) {
	used := map[string]bool{}
	for _, l := range n.readLeases() {
		if l.live() || n.remove(l) != nil {
			// A stale lease whose network could not be removed stays
			// taken: its address is not handed out over what is left.
			used[l.IP] = true
		}
	}
	var out []lease
	now := time.Now().UTC()
	for a := n.bridgeAddr().Next(); len(out) < k; a = a.Next() {
		if !n.Prefix.Contains(a) {
			return nil, &provision.CapacityError{Where: "local", Msg: fmt.Sprintf("no free address left in %s; tear down some local clusters", n.Prefix)}
		}
		b := a.As4()
		if b[3] == 0 || b[3] == 255 || used[a.String()] {
			continue
		}
		out = append(out, lease{IP: a.String(), NetNS: netnsName(a), Veth: vethName(a), Root: root, Cluster: cluster, Node: len(out), Created: now})
	}
	for _, l := range out {
		if err := n.writeLease(l); err != nil {
			return nil, fmt.Errorf("leasing %s: %w", l.IP, err)
		}
	}
	return out, nil
}

// claim re-writes the lease of a recorded node (a lease directory lost or
// wiped), refusing an address another live owner holds.
func (n *Network) claim(root, cluster string, node provision.NodeInfo) error {
	b, err := os.ReadFile(n.leasePath(node.InternalIP))
	if err == nil {
		var l lease
		if json.Unmarshal(b, &l) == nil && l.Root == root && l.Cluster == cluster && l.NetNS == node.NetNS {
			return nil
		}
		if json.Unmarshal(b, &l) == nil && l.live() {
			return fmt.Errorf("address %s of node %d of %q is leased to cluster %q of %s; run `sky down %s` and launch again", node.InternalIP, node.Index, cluster, l.Cluster, l.Root, cluster)
		}
	}
	ip, err := netip.ParseAddr(node.InternalIP)
	if err != nil {
		return err
	}
	return n.writeLease(lease{IP: node.InternalIP, NetNS: node.NetNS, Veth: vethName(ip), Root: root, Cluster: cluster, Node: node.Index, Created: time.Now().UTC()})
}

// ensureNode makes node's namespace and veth unless both are there (a
// reboot loses them; a crash may leave half): anything half made is
// removed and made again.
func (n *Network) ensureNode(node provision.NodeInfo) error {
	ip, err := netip.ParseAddr(node.InternalIP)
	if err != nil {
		return fmt.Errorf("node %d: address %q: %w", node.Index, node.InternalIP, err)
	}
	veth := vethName(ip)
	_, nsErr := os.Stat(proc.NetNSPath(node.NetNS))
	if nsErr == nil && interfaceExists(veth) {
		return nil
	}
	_ = removeNet(node.NetNS, veth)
	mtu := hostMTU()
	// The host may still know the address by the MAC of a node that had
	// it before (made by a build whose MACs were random): forgotten first.
	host := fmt.Sprintf("neigh flush to %[7]s dev %[4]s\nnetns add %[1]s\nlink add %[2]s mtu %[3]d address %[5]s type veth peer name eth0 mtu %[3]d address %[6]s netns %[1]s\nlink set %[2]s master %[4]s up\n",
		node.NetNS, veth, mtu, Bridge, macOf(0x48, ip), macOf(0x4e, ip), ip)
	if err := ipCmd(host, "-batch", "-"); err != nil {
		_ = removeNet(node.NetNS, veth)
		return fmt.Errorf("making the network of node %d: %w", node.Index, err)
	}
	inside := fmt.Sprintf("addr add %s/%d dev eth0\nlink set eth0 up\nlink set lo up\nroute add default via %s\n",
		ip, n.Prefix.Bits(), n.bridgeAddr())
	if err := ipCmd(inside, "-n", node.NetNS, "-batch", "-"); err != nil {
		_ = removeNet(node.NetNS, veth)
		return fmt.Errorf("making the network of node %d: %w", node.Index, err)
	}
	return nil
}

// hostMTU is the MTU of the interface of the default route, so that what
// a node sends out is not fragmented or blackholed on the way (1500 when
// unknown or larger).
func hostMTU() int {
	out, err := exec.Command("ip", "-4", "route", "show", "default").Output()
	if err != nil {
		return 1500
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			if ifc, err := net.InterfaceByName(f[i+1]); err == nil && ifc.MTU > 0 && ifc.MTU < 1500 {
				return ifc.MTU
			}
			break
		}
	}
	return 1500
}

// removeNet deletes a node's veth (its eth0 goes with it) and namespace,
// by name, and checks that both are gone: what is already gone is no
// error, what is still there after its `ip ... del` is one (the caller
// keeps the lease naming it, so a retried teardown or the sweeper finds
// it again).
func removeNet(netns, veth string) error {
	var errs []error
	if veth != "" && interfaceExists(veth) {
		if err := ipCmd("", "link", "del", veth); err != nil && interfaceExists(veth) {
			errs = append(errs, err)
		}
	}
	if netns != "" {
		if _, err := os.Stat(proc.NetNSPath(netns)); err == nil {
			if err := ipCmd("", "netns", "del", netns); err != nil {
				if _, serr := os.Stat(proc.NetNSPath(netns)); serr == nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// remove deletes l's network, then the lease itself: a lease goes only
// once what it names is gone.
func (n *Network) remove(l lease) error {
	if err := removeNet(l.NetNS, l.Veth); err != nil {
		return fmt.Errorf("removing the network of %s (node %d of %q): %w", l.IP, l.Node, l.Cluster, err)
	}
	if err := os.Remove(n.leasePath(l.IP)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// release removes the networks and leases of a cluster's nodes: those its
// leases name, and those of nodes (recorded, may be nil) whose lease is
// missing. A recorded node whose address is leased to another cluster is
// left alone: a teardown cut short after its leases went (the server
// killed) is retried from the record, and meanwhile the address, handed
// out lowest first, may be another cluster's node, of this HOME or any
// other, whose namespace has the same name. It says what could not be
// removed.
func (n *Network) release(root, cluster string, nodes []provision.NodeInfo) error {
	unlock, err := machineLock(n.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	others := map[string]bool{}
	for _, l := range n.readLeases() {
		if l.Root == root && l.Cluster == cluster {
			errs = append(errs, n.remove(l))
		} else {
			others[l.IP] = true
		}
	}
	for _, node := range nodes {
		if node.NetNS == "" || others[node.InternalIP] {
			continue
		}
		if ip, err := netip.ParseAddr(node.InternalIP); err == nil {
			errs = append(errs, removeNet(node.NetNS, vethName(ip)))
		}
	}
	return errors.Join(errs...)
}

// leasedClusters lists the clusters under root holding a lease on this
// machine.
func (n *Network) leasedClusters(root string) []string {
	var out []string
	for _, l := range n.readLeases() {
		if l.Root == root {
			out = append(out, l.Cluster)
		}
	}
	return out
}

// Leftovers lists the namespaces still leased to clusters under root:
// none once every cluster there is torn down. Tests check it.
func Leftovers(root string) []string {
	n := &Network{Dir: DefaultNetDir}
	var out []string
	for _, l := range n.readLeases() {
		if l.Root == root || strings.HasPrefix(l.Root, root+"/") {
			out = append(out, l.NetNS)
		}
	}
	return out
}

// RemoveLeftovers removes what Leftovers lists, by the names the leases
// hold.
func RemoveLeftovers(root string) {
	n := &Network{Dir: DefaultNetDir}
	unlock, err := machineLock(n.Dir)
	if err != nil {
		return
	}
	defer unlock()
	for _, l := range n.readLeases() {
		if l.Root == root || strings.HasPrefix(l.Root, root+"/") {
			_ = n.remove(l)
		}
	}
}

func writeAtomic(path string, b []byte) error {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
