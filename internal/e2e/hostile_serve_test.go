package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// TestHostileServe attacks SkyServe on a shared server: alice runs a
// service, bob tries to see it, and her load balancer is stopped, killed
// and its port taken under it, as CPU load and a busy machine would.
//
//   - bob's `sky serve status` (table and JSON) shows nothing of alice's
//     service, and naming it answers as for a service that does not exist;
//     the admin sees it.
//   - a load balancer that is alive but does not answer (SIGSTOP, longer
//     than the old 5 s control timeout) is not killed: after SIGCONT it is
//     the same process, still serving.
//   - a load balancer killed while another process holds its port is
//     started again on that port once it is free, not moved to another;
//     the port stays reserved meanwhile, so bob's new service does not get
//     it, and alice's advertised endpoint reaches her replicas again.
func TestHostileServe(t *testing.T) {
	// Sequential: it frees its load balancer's port on purpose, and another
	// test's API server would take that port for a new service, then get
	// this test's retried 5-s requests (TestServeFromZero once saw them as
	// 0.2 requests/s with no request of its own and scaled up from zero).
	env := []string{"SKYGO_SERVE_DECISION_INTERVAL=1s", "SKYGO_SERVE_QPS_WINDOW=10s", "SKYGO_SERVE_RETRY_GAP=1s"}
	if v, ok := os.LookupEnv("SKYGO_LOCAL_NETNS"); ok {
		env = append(env, "SKYGO_LOCAL_NETNS="+v)
	}
	tm := newTeam(t, env...)
	bin := buildReplica(t, "")
	yaml := writeFile(t, "svc.yaml", tm.teamLocalYAML(bin, fastProbe(30)+"replicas: 1\n"))
	tm.mustAs("alice", "serve", "up", "-y", "-n", "al-svc", yaml)
	rec := tm.waitServiceAs("alice", "al-svc", 90*time.Second, "1 READY", readyN(1, 1))
	ep := strings.TrimSpace(tm.mustAs("alice", "serve", "status", "al-svc", "--endpoint").stdout)
	if code, body := get(t, ep+"/", 10*time.Second); code != 200 || !strings.HasPrefix(body, "replica=") {
		t.Fatalf("GET %s/: %d %q", ep, code, body)
	}
	port := rec.LoadBalancerPort
	replica := rec.Replicas[0].Name

	t.Run("others-services-are-not-visible", func(t *testing.T) {
		for _, args := range [][]string{{"serve", "status"}, {"serve", "status", "-v"}, {"serve", "status", "-o", "json"}, {"status"}} {
			r := tm.as("bob", args...)
			if r.code != 0 {
				t.Errorf("bob: sky %s: %s", strings.Join(args, " "), r)
			}
			for _, secret := range []string{"al-svc", replica, ":" + strconv.Itoa(port)} {
				if strings.Contains(r.out(), secret) {
					t.Errorf("bob: sky %s shows alice's %q:\n%s", strings.Join(args, " "), secret, r.out())
				}
			}
		}
		// Naming her service answers as naming none that exists does.
		missing := tm.as("bob", "serve", "status", "no-such-svc", "-o", "json")
		for _, args := range [][]string{{"serve", "status", "al-svc", "-o", "json"}, {"serve", "status", "al-svc"}, {"serve", "status", "al-svc", "--endpoint"}} {
			r := tm.as("bob", args...)
			if r.code == 0 || strings.Contains(r.out(), replica) || strings.Contains(r.out(), ":"+strconv.Itoa(port)) {
				t.Errorf("bob: sky %s: %s", strings.Join(args, " "), r)
			}
			if slices.Contains(args, "json") && strings.ReplaceAll(r.out(), "al-svc", "no-such-svc") != missing.out() {
				t.Errorf("bob naming alice's service is told\n%s\nand naming one that does not exist\n%s", r.out(), missing.out())
			}
		}
		// The admin sees everyone's.
		if s := tm.serviceAs("admin", "al-svc"); len(s.Replicas) != 1 || s.LoadBalancerPort != port {
			t.Errorf("admin: sky serve status al-svc: %v (port %d), want alice's service with its replica", s, s.LoadBalancerPort)
		}
		if r := tm.mustAs("admin", "serve", "status", "-v"); !strings.Contains(r.out(), "al-svc") || !strings.Contains(r.out(), replica) {
			t.Errorf("admin: sky serve status does not list alice's service and replica:\n%s", r.out())
		}
	})

	t.Run("slow-balancer-is-not-killed", func(t *testing.T) {
		pid := tm.onlyLB(t, "al-svc")
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		cont := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
		t.Cleanup(cont)
		// The controller finds it not answering (and says so), or, as it
		// did, kills it and starts another.
		noted := func() bool {
			return strings.Contains(tm.controllerLog("al-svc"), fmt.Sprintf("(pid %d) is alive but did not answer", pid))
		}
		if !waitFor(90*time.Second, func() bool { return noted() || !slices.Equal(tm.lbPIDs("al-svc"), []int{pid}) }) {
			t.Fatalf("the controller never noticed its load balancer stopped:\n%s", tm.controllerLog("al-svc"))
		}
		// Stopped for longer than the old 5 s control timeout, and than
		// several of the controller's looks (one every 2 s).
		time.Sleep(time.Until(stopped.Add(10 * time.Second)))
		if got := tm.lbPIDs("al-svc"); !slices.Equal(got, []int{pid}) {
			t.Fatalf("the stopped (alive) load balancer %d was replaced: load balancers now %v\n%s", pid, got, tm.controllerLog("al-svc"))
		}
		cont()
		if !waitFor(30*time.Second, func() bool {
			code, body, err := fetch(ep+"/", 5*time.Second)
			return err == nil && code == 200 && strings.HasPrefix(body, "replica=")
		}) {
			t.Fatalf("the continued load balancer does not serve %s", ep)
		}
		if got := tm.lbPIDs("al-svc"); !slices.Equal(got, []int{pid}) {
			t.Errorf("load balancers after SIGCONT: %v, want the same process %d", got, pid)
		}
	})

	t.Run("killed-balancer-keeps-its-port", func(t *testing.T) {
		// Kill it and take its port before the controller starts another.
		var squatter net.Listener
		for try := 0; squatter == nil; try++ {
			if try == 5 {
				t.Fatalf("could not take port %d between the load balancer's death and its restart", port)
			}
			pid := tm.onlyLB(t, "al-svc")
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			// The port is free once the dead process is gone; the
			// controller looks again within 2 s.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
					squatter = ln
					break
				}
			}
			if squatter == nil {
				t.Logf("try %d: the load balancer came back on port %d before the test could take it", try, port)
			}
		}
		released := false
		release := func() {
			if !released {
				released = true
				squatter.Close()
			}
		}
		t.Cleanup(release)
		// The controller says the port is taken and waits (or, as it
		// did, moves the service to another port).
		inUse := fmt.Sprintf("port %d, the service's for as long as it exists, is in use by another process", port)
		if !waitFor(60*time.Second, func() bool {
			return strings.Contains(tm.controllerLog("al-svc"), inUse) || tm.serviceAs("alice", "al-svc").LoadBalancerPort != port
		}) {
			t.Fatalf("the controller did not react to its load balancer's death:\n%s", tm.controllerLog("al-svc"))
		}
		if s := tm.serviceAs("alice", "al-svc"); s.LoadBalancerPort != port {
			t.Fatalf("alice's service moved from port %d to %d while another process held it: its advertised endpoint now reaches whatever takes %d next", port, s.LoadBalancerPort, port)
		}
		release()
		// While her load balancer is down, her port is still hers: bob's
		// new service gets another.
		tm.mustAs("bob", "serve", "up", "-y", "-n", "bob-svc", writeFile(t, "bob.yaml", tm.teamLocalYAML(bin,
			fastProbe(30)+"replica_policy:\n  min_replicas: 0\n  max_replicas: 1\n  target_qps_per_replica: 1\n")))
		if bp := tm.serviceAs("bob", "bob-svc").LoadBalancerPort; bp == port || bp == 0 {
			t.Errorf("bob's new service got load balancer port %d; alice's service holds %d", bp, port)
		}
		if !waitFor(60*time.Second, func() bool {
			code, body, err := fetch(ep+"/", 5*time.Second)
			return err == nil && code == 200 && strings.HasPrefix(body, "replica=")
		}) {
			t.Fatalf("alice's endpoint %s does not reach her replicas after her port was freed:\n%s", ep, tm.controllerLog("al-svc"))
		}
		// The listeners and the load balancers are read from /proc one
		// after the other, so one reading can fall between a load balancer's
		// end and its successor's start (a loaded machine makes the
		// controller replace one that answers slowly): the port must be
		// held by alice's load balancer alone in some reading of both.
		var lbs, holders []int
		heldByHers := func() bool {
			lbs, holders = tm.lbPIDs("al-svc"), listenerPids(ep)
			if len(holders) == 0 {
				return false
			}
			for _, pid := range holders {
				if !slices.Contains(lbs, pid) {
					return false
				}
			}
			return true
		}
		if !waitFor(20*time.Second, heldByHers) {
			t.Errorf("port %d is held by pids %v, not (only) by alice's load balancer %v", port, holders, lbs)
		}
		t.Logf("controller log:\n%s", tm.controllerLog("al-svc"))
		if s := tm.serviceAs("alice", "al-svc"); s.LoadBalancerPort != port || s.Endpoint != rec.Endpoint {
			t.Errorf("alice's service after the restart: port %d endpoint %s, want %d %s", s.LoadBalancerPort, s.Endpoint, port, rec.Endpoint)
		}
	})
}

// teamLocalYAML is localYAML for a team: whether local nodes share the
// machine's network is asked as alice (the server takes no anonymous
// client).
func (tm *team) teamLocalYAML(bin, service string) string {
	tm.t.Helper()
	port, extra := 8080, []string(nil)
	if !strings.Contains(tm.mustAs("alice", "check", "-v", "local").out(), "each node has its own network namespace") {
		p, _ := sharedPorts.LoadOrStore(tm.home, testutil.FreePort(tm.t))
		port = p.(int)
		extra = []string{`BIND_NODE_ADDR: "1"`}
	}
	return svcYAML("local", bin, port, 1, service, extra...)
}

// serviceAs is user's `sky serve status NAME -o json` record of name; a
// zero record when the command fails or does not list it.
func (tm *team) serviceAs(user, name string) svcRecord {
	tm.t.Helper()
	r := tm.as(user, "serve", "status", name, "-o", "json")
	var recs []svcRecord
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &recs) != nil {
		return svcRecord{}
	}
	for _, s := range recs {
		if s.Name == name {
			return s
		}
	}
	return svcRecord{}
}

// waitServiceAs polls user's record of name until ok holds.
func (tm *team) waitServiceAs(user, name string, timeout time.Duration, what string, ok func(svcRecord) bool) svcRecord {
	tm.t.Helper()
	var last svcRecord
	if !waitFor(timeout, func() bool { last = tm.serviceAs(user, name); return ok(last) }) {
		tm.t.Fatalf("service %s not %s after %s: %v\n%s\n%s", name, what, timeout, last, tm.controllerLog(name), tm.serverLogTail())
	}
	return last
}

// controllerLog is the service's controller log as the server wrote it.
func (tm *team) controllerLog(name string) string {
	b, _ := os.ReadFile(filepath.Join(tm.home, ".sky", "serve", strings.ReplaceAll(name, "-", "_"), "controller.log"))
	return string(b)
}

// lbPIDs are the pids of the service's load balancer processes, sorted.
func (tm *team) lbPIDs(name string) []int {
	var out []int
	for _, p := range tm.lbProcs(name) {
		out = append(out, p.pid)
	}
	slices.Sort(out)
	return out
}

// onlyLB is the pid of the service's one load balancer process.
func (tm *team) onlyLB(t *testing.T, name string) int {
	t.Helper()
	var pids []int
	if !waitFor(30*time.Second, func() bool { pids = tm.lbPIDs(name); return len(pids) == 1 }) {
		t.Fatalf("load balancers of %s: %v, want one", name, pids)
	}
	return pids[0]
}
