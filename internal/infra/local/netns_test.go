package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

type netMode struct {
	name string
	net  *Network
}

// netModes are the networks a test runs under: loopback always, a
// namespace per node where this machine allows one.
func netModes(t *testing.T) []netMode {
	modes := []netMode{{"loopback", &Network{Why: "test"}}}
	if n := MachineNetwork(); n.PerNode() {
		modes = append(modes, netMode{"netns", n})
	} else {
		t.Logf("network namespace mode not tested: %s", n.Why)
	}
	return modes
}

// perNodeNet is this machine's namespace network, or a skip saying why
// there is none.
func perNodeNet(t *testing.T) *Network {
	t.Helper()
	n := MachineNetwork()
	if !n.PerNode() {
		t.Skipf("skipping: per-node network namespaces are not available here (%s); run the tests as root with iproute2 to cover them", n.Why)
	}
	return n
}

// cleanupNet removes, at the end of the test, whatever namespaces are
// still leased to clusters under root, by the names the leases hold.
func cleanupNet(t *testing.T, root string) {
	t.Cleanup(func() {
		if left := Leftovers(root); len(left) > 0 {
			RemoveLeftovers(root)
		}
	})
}

func TestFreePrefixAvoidsRoutes(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	for _, c := range []struct {
		used []netip.Prefix
		want string
	}{
		{pp("0.0.0.0/0", "192.0.2.0/24", "10.200.0.0/24", "127.0.0.0/8"), "10.213.0.0/16"},
		{pp("10.213.4.0/24"), "10.214.0.0/16"},
		{pp("10.213.0.0/16", "10.214.0.1/32"), "10.215.0.0/16"},
	} {
		got, err := freePrefix(c.used)
		if err != nil || got.String() != c.want {
			t.Errorf("freePrefix(%v) = %v, %v; want %s", c.used, got, err, c.want)
		}
	}
	if _, err := freePrefix(pp("10.0.0.0/8")); err == nil {
		t.Error("10.0.0.0/8 routed: want an error, every candidate overlaps")
	}
}

func TestNames(t *testing.T) {
	ip := netip.MustParseAddr("10.213.255.254")
	if got := netnsName(ip); got != "skygo-10-213-255-254" {
		t.Errorf("netns name %q", got)
	}
	if got := vethName(ip); got != "skv0ad5fffe" || len(got) > 15 {
		t.Errorf("veth name %q (interface names hold 15 bytes)", got)
	}
}

// TestAllocateLeasesAcrossRoots: addresses are unique across the local
// roots of different servers, skip .0/.255 and the bridge's, and a lease
// whose owner no longer lists it is reclaimed. A documentation subnet
// keeps the names away from any real node's.
func TestAllocateLeasesAcrossRoots(t *testing.T) {
	n := &Network{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Dir: t.TempDir()}
	rootA, rootB := t.TempDir(), t.TempDir()
	writeRec := func(root, cluster string, ls []lease) {
		rec := record{Name: cluster}
		for _, l := range ls {
			rec.Nodes = append(rec.Nodes, provision.NodeInfo{Index: l.Node, InternalIP: l.IP, NetNS: l.NetNS})
		}
		b, _ := json.Marshal(rec)
		dir := filepath.Join(root, "clusters", cluster)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cluster.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	alloc := func(root, cluster string, k int) []string {
		t.Helper()
		unlock, err := machineLock(n.Dir)
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		ls, err := n.allocate(root, cluster, k)
		if err != nil {
			t.Fatal(err)
		}
		writeRec(root, cluster, ls)
		var ips []string
		for _, l := range ls {
			ips = append(ips, l.IP)
		}
		return ips
	}
	a := alloc(rootA, "c", 2)
	b := alloc(rootB, "c", 1)
	if got := strings.Join(append(a, b...), ","); got != "198.51.100.2,198.51.100.3,198.51.100.4" {
		t.Fatalf("addresses %s", got)
	}
	// Root B's HOME vanished without `sky down`: its lease is reclaimed.
	if err := os.RemoveAll(rootB); err != nil {
		t.Fatal(err)
	}
	if got := alloc(rootA, "d", 1); got[0] != "198.51.100.4" {
		t.Errorf("after the owner vanished, got %v; want its 198.51.100.4 back", got)
	}
	if _, err := os.Stat(n.leasePath("198.51.100.2")); err != nil {
		t.Errorf("a live lease was reclaimed: %v", err)
	}
	// A recorded node whose lease went missing claims it again; an
	// address another live owner holds is refused.
	_ = os.Remove(n.leasePath("198.51.100.3"))
	node := provision.NodeInfo{Index: 1, InternalIP: "198.51.100.3", NetNS: netnsName(netip.MustParseAddr("198.51.100.3"))}
	if err := n.claim(rootA, "c", node); err != nil {
		t.Fatal(err)
	}
	node.InternalIP, node.NetNS = "198.51.100.4", netnsName(netip.MustParseAddr("198.51.100.4"))
	if err := n.claim(rootA, "x", node); err == nil || !strings.Contains(err.Error(), `leased to cluster "d"`) {
		t.Errorf("claiming another cluster's address: %v", err)
	}
	// Full subnet: a capacity error.
	unlock, _ := machineLock(n.Dir)
	_, err := n.allocate(rootA, "big", 300)
	unlock()
	if _, ok := err.(*provision.CapacityError); !ok {
		t.Errorf("300 nodes in a /24: %v, want a CapacityError", err)
	}
}

func nsAddrs(t *testing.T, netns string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", netns, "-br", "-4", "addr").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s addr: %v: %s", netns, err, out)
	}
	return string(out)
}

func linkExists(name string) bool { _, err := net.InterfaceByName(name); return err == nil }

func nsExists(name string) bool { _, err := os.Stat(proc.NetNSPath(name)); return err == nil }

// TestNetNSLifecycle: each node of a cluster gets its namespace, veth and
// address; both nodes listen on the same port and the host reaches each;
// the node's runner runs inside; stop keeps the address, a lost namespace
// (a reboot) is made again by Start; Terminate leaves nothing.
func TestNetNSLifecycle(t *testing.T) {
	n := perNodeNet(t)
	ctx := context.Background()
	p, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p.Net, p.StopGrace = n, 200*time.Millisecond
	cleanupNet(t, p.Root())
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "ns", NumNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(context.Background(), "ns") })
	for _, node := range info.Nodes {
		ip := netip.MustParseAddr(node.InternalIP)
		if !n.Prefix.Contains(ip) || node.NetNS != netnsName(ip) {
			t.Fatalf("node %d: address %s netns %q; want in %s, named from the address", node.Index, ip, node.NetNS, n.Prefix)
		}
		if !nsExists(node.NetNS) || !linkExists(vethName(ip)) {
			t.Fatalf("node %d: netns or veth %s missing", node.Index, vethName(ip))
		}
		if a := nsAddrs(t, node.NetNS); !strings.Contains(a, fmt.Sprintf("%s/%d", ip, n.Prefix.Bits())) || !strings.Contains(a, "127.0.0.1/8") {
			t.Errorf("node %d addresses:\n%s", node.Index, a)
		}
	}

	// Same port on both nodes, each answering the host with its own name.
	const port = "18080"
	for _, node := range info.Nodes {
		var l net.Listener
		err := proc.InNetNS(proc.NetNSPath(node.NetNS), func() (err error) {
			l, err = net.Listen("tcp", "0.0.0.0:"+port)
			return err
		})
		if err != nil {
			t.Fatalf("node %d: listening on 0.0.0.0:%s: %v", node.Index, port, err)
		}
		defer l.Close()
		go func(l net.Listener, name string) {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprint(c, name)
				c.Close()
			}
		}(l, node.ID)
	}
	for _, node := range info.Nodes {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(node.InternalIP, port), 2*time.Second)
		if err != nil {
			t.Fatalf("host to node %d: %v", node.Index, err)
		}
		b := make([]byte, 64)
		k, _ := c.Read(b)
		c.Close()
		if string(b[:k]) != node.ID {
			t.Errorf("node %d answered %q", node.Index, b[:k])
		}
	}

	// The runner is inside: its commands see the node's eth0, and node 1
	// reaches node 0.
	runners, err := p.Runners(info)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runners[1].Run(ctx, "ip -br -4 addr show eth0 && python3 -c 'import socket; s=socket.create_connection((\""+info.Nodes[0].InternalIP+"\", "+port+"), 2); print(s.recv(64).decode())'", provision.RunOptions{})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), info.Nodes[1].InternalIP+"/") || !strings.Contains(string(res.Stdout), info.Nodes[0].ID) {
		t.Errorf("runner of node 1: %v %d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}

	// Stop keeps the address; a namespace lost meanwhile comes back.
	if err := p.Stop(ctx, "ns"); err != nil {
		t.Fatal(err)
	}
	removeNet(info.Nodes[1].NetNS, vethName(netip.MustParseAddr(info.Nodes[1].InternalIP)))
	again, err := p.Start(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if again.Nodes[1].InternalIP != info.Nodes[1].InternalIP || !nsExists(info.Nodes[1].NetNS) {
		t.Fatalf("after start: %+v; want node 1 at %s with its namespace back", again.Nodes[1], info.Nodes[1].InternalIP)
	}

	if err := p.Terminate(ctx, "ns"); err != nil {
		t.Fatal(err)
	}
	for _, node := range info.Nodes {
		if (nsExists(node.NetNS) || linkExists(vethName(netip.MustParseAddr(node.InternalIP)))) && !leasedToOther(n, node.InternalIP, p.Root()) {
			t.Errorf("node %d: namespace or veth survived Terminate", node.Index)
		}
	}
	if left := Leftovers(p.Root()); len(left) > 0 {
		t.Errorf("leases left after Terminate: %v", left)
	}
}

// leasedToOther says whether ip is now another HOME's node: addresses
// are machine-wide and handed out lowest first, so a freed one may be
// taken, and its namespace (named from the address) made again, by a
// test running beside this one (go test runs packages in parallel).
// The lease is written before the namespace is made and removed after
// it is gone, so a namespace found before the lease is read is its.
func leasedToOther(n *Network, ip, root string) bool {
	for _, l := range n.readLeases() {
		if l.IP == ip && l.Root != root {
			return true
		}
	}
	return false
}

// TestNetNSTerminateAfterCrash: a cluster whose record is gone (a crash
// between lease and record, or during Terminate) loses its namespaces at
// Terminate all the same.
func TestNetNSTerminateAfterCrash(t *testing.T) {
	n := perNodeNet(t)
	ctx := context.Background()
	p, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p.Net = n
	cleanupNet(t, p.Root())
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "cr"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p.recordPath("cr")); err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(ctx, "cr"); err != nil {
		t.Fatal(err)
	}
	if nsExists(info.Nodes[0].NetNS) || len(Leftovers(p.Root())) > 0 {
		t.Errorf("namespace %s or its lease survived Terminate without a record", info.Nodes[0].NetNS)
	}
}

// TestNetNSRetriedTerminateSparesTheNextOwner: a teardown cut short after
// its network went (the record still lists the node) is retried after
// another cluster, of another root, was given the freed address; the
// retry must not remove that cluster's namespace, which has the same name.
func TestNetNSRetriedTerminateSparesTheNextOwner(t *testing.T) {
	n := perNodeNet(t)
	ctx := context.Background()
	a, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a.Net, b.Net = n, n
	cleanupNet(t, a.Root())
	cleanupNet(t, b.Root())
	ia, err := a.Provision(ctx, provision.ClusterSpec{Name: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	// The first teardown gets as far as the network, then dies.
	if err := a.releaseNet("cut", ia.Nodes); err != nil {
		t.Fatal(err)
	}
	ib, err := b.Provision(ctx, provision.ClusterSpec{Name: "next"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Terminate(ctx, "next") })
	if ib.Nodes[0].InternalIP != ia.Nodes[0].InternalIP {
		t.Skipf("another cluster on this machine took the freed address %s first (got %s)", ia.Nodes[0].InternalIP, ib.Nodes[0].InternalIP)
	}
	if err := a.Terminate(ctx, "cut"); err != nil {
		t.Fatal(err)
	}
	if !nsExists(ib.Nodes[0].NetNS) {
		t.Fatalf("the retried teardown of cluster cut removed namespace %s, now cluster next's", ib.Nodes[0].NetNS)
	}
	if st, err := b.Query(ctx, "next"); err != nil || len(st) != 1 || st[0].Status != provision.NodeUp {
		t.Errorf("cluster next after cut's retried teardown: %v %v, want its node up", st, err)
	}
}
