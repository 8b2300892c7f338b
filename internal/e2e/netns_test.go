package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/infra/local"
)

// TestLocalNodesHaveTheirOwnPorts: where each local node has a network
// namespace of its own, two clusters both serve 0.0.0.0:8080 side by side
// and each answers through its endpoint; rank 1 of a 2-node cluster
// reaches rank 0 at the first of SKYPILOT_NODE_IPS; `sky check` says so;
// `sky down` leaves no namespace and no veth.
func TestLocalNodesHaveTheirOwnPorts(t *testing.T) {
	parallel(t)
	if n := local.MachineNetwork(); !n.PerNode() {
		t.Skipf("skipping: per-node network namespaces are not available here (%s); run as root with iproute2", n.Why)
	}
	e := newEnv(t)
	if r := e.must("check", "local"); !strings.Contains(r.stdout, "each node has its own network namespace") {
		t.Errorf("sky check does not say nodes have their own network:\n%s", r.stdout)
	}
	serve := `mkdir -p ~/www && echo "served by $(basename $(dirname $HOME))" > ~/www/id && cd ~/www && exec python3 -m http.server 8080 --bind 0.0.0.0`
	var names []string
	for _, c := range []string{"web-a", "web-b"} {
		e.must("launch", "-y", "-d", "-c", c, "--ports", "8080", serve)
		ips, netns := e.nodeIPs(c)
		if !netns {
			t.Fatalf("cluster %s has no network namespace (addresses %v)", c, ips)
		}
		names = append(names, "skygo-"+strings.ReplaceAll(ips[0], ".", "-"))
		if r := e.must("status", "--endpoints", c); strings.TrimSpace(r.stdout) != "8080: "+ips[0]+":8080" {
			t.Errorf("sky status --endpoints %s: %q, want 8080: %s:8080", c, r.stdout, ips[0])
		}
	}
	for _, c := range []string{"web-a", "web-b"} {
		ep := strings.TrimSpace(e.must("status", "--endpoint", "8080", c).stdout)
		var body string
		ok := waitFor(30*time.Second, func() bool {
			resp, err := http.Get("http://" + ep + "/id")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == 200
		})
		if !ok || !strings.Contains(body, c) {
			t.Errorf("GET http://%s/id: %q (answered: %v), want the page of %s", ep, body, ok, c)
		}
	}

	two := `if [ "$SKYPILOT_NODE_RANK" = 0 ]; then timeout 20 python3 -m http.server 9000 --bind 0.0.0.0 >/dev/null 2>&1; else
head=$(echo "$SKYPILOT_NODE_IPS" | head -1)
for i in $(seq 50); do python3 -c "import urllib.request,sys; urllib.request.urlopen('http://$head:9000/', timeout=2); print('reached rank 0 at $head')" 2>/dev/null && exit 0; sleep 0.2; done; exit 1; fi`
	r := e.exec(2*time.Minute, nil, "launch", "-y", "-c", "pair", "--num-nodes", "2", two)
	ips, _ := e.nodeIPs("pair")
	if !strings.Contains(r.stdout, "reached rank 0 at "+ips[0]) {
		t.Errorf("rank 1 did not reach rank 0 at %s:\n%s", ips[0], r)
	}
	for _, ip := range ips {
		names = append(names, "skygo-"+strings.ReplaceAll(ip, ".", "-"))
	}

	e.must("down", "-a", "-y")
	if left := local.Leftovers(e.home); len(left) > 0 {
		t.Errorf("leases survived sky down: %v", left)
	}
	nsList, _ := exec.Command("ip", "netns", "list").Output()
	links, _ := exec.Command("ip", "-br", "link").Output()
	for _, name := range names {
		// Another test's node may have the address, and so the names, by
		// now: only what no one else leases is a leftover of ours.
		if leasedElsewhere(name) {
			continue
		}
		if strings.Contains(string(nsList)+"\n", name+" ") || strings.Contains(string(nsList)+"\n", name+"\n") {
			t.Errorf("namespace %s survived sky down:\n%s", name, nsList)
		}
		veth := "skv" + hexIP(strings.TrimPrefix(name, "skygo-"))
		if strings.Contains(string(links), veth) {
			t.Errorf("veth %s survived sky down:\n%s", veth, links)
		}
	}
}

// leasedElsewhere reports whether the address a namespace is named from
// is leased (to another server's node: ours were checked gone).
func leasedElsewhere(name string) bool {
	ip := strings.ReplaceAll(strings.TrimPrefix(name, "skygo-"), "-", ".")
	_, err := os.Stat(filepath.Join(local.DefaultNetDir, "leases", ip+".json"))
	return err == nil
}

// hexIP turns "10-213-0-5" into "0ad50005", as veth names spell it.
func hexIP(dashed string) string {
	var out strings.Builder
	for _, part := range strings.Split(dashed, "-") {
		n := 0
		for _, c := range part {
			n = n*10 + int(c-'0')
		}
		const digits = "0123456789abcdef"
		out.WriteByte(digits[n>>4])
		out.WriteByte(digits[n&15])
	}
	return out.String()
}

// TestLocalNetNSOff: with SKYGO_LOCAL_NETNS=0 in the server's environment
// nodes share this machine's network on loopback addresses, and `sky
// check` says two nodes cannot listen on the same port.
func TestLocalNetNSOff(t *testing.T) {
	// Sequential: its nodes share this machine's network (SKYGO_LOCAL_NETNS=0), at the 127.0.0.x addresses another such test's nodes get too.
	e := newEnv(t)
	e.env = append(e.env, "SKYGO_LOCAL_NETNS=0")
	if r := e.must("check", "local"); !strings.Contains(r.stdout, "nodes share this machine's network") || !strings.Contains(r.stdout, "two nodes cannot listen on the same port") {
		t.Errorf("sky check does not say nodes share the network:\n%s", r.stdout)
	}
	e.must("launch", "-y", "-d", "-c", "lo", "--ports", "8080", "true")
	ips, netns := e.nodeIPs("lo")
	if netns || !strings.HasPrefix(ips[0], "127.0.0.") {
		t.Errorf("with SKYGO_LOCAL_NETNS=0: addresses %v, namespace %v; want a loopback address", ips, netns)
	}
	if r := e.must("status", "--endpoint", "8080", "lo"); strings.TrimSpace(r.stdout) != ips[0]+":8080" {
		t.Errorf("sky status --endpoint 8080 lo: %q", r.stdout)
	}
}
