package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/testutil/k8stest"
	"github.com/skygo/skygo/internal/testutil/slurmtest"
	"github.com/skygo/skygo/internal/testutil/sshhosts"
)

// SSH node pools end to end, on real sshd hosts in network namespaces
// (internal/testutil/sshhosts; SKYGO_SKIP_SSH=1 skips these tests).
const (
	e2eNumHosts = 3
	e2ePool     = "e2epool"
)

// e2eSet's name prefix and subnet differ from internal/infra/ssh's tests,
// which may run at the same time.
var e2eSet = &sshhosts.Set{Name: "sge2e", Prefix: "10.200.58", N: e2eNumHosts}

type e2eHosts struct{ *sshhosts.Hosts }

// e2eParallel is how many tests run at once (through parallel or a
// harness's parallel) when go test is given no -parallel (its default is
// GOMAXPROCS: 2 on CI). These tests mostly wait on the processes they
// start, so more than the cores run side by side; each has its own HOME,
// API server port and leased node addresses. Tests that need something of
// the machine to themselves call neither, and so never overlap with any
// other.
const e2eParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	n := e2eParallel
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			if v, err := strconv.Atoi(f.Value.String()); err == nil && v > 0 {
				n = v
			}
		}
	})
	e2eSlots = make(chan struct{}, n)
	// go test's own limit counts a test waiting for its harness too; the
	// slots above bound what runs, so go test's must not.
	_ = flag.Set("test.parallel", strconv.Itoa(n+maxHarnessWaiters))
	code := m.Run()
	e2eSet.Stop()
	slurmtest.Stop()
	k8stest.Stop()
	os.Exit(code)
}

// sshPoolHosts starts the hosts once and returns them.
func sshPoolHosts(t testing.TB) *e2eHosts {
	t.Helper()
	return &e2eHosts{e2eSet.Get(t)}
}

// writePool writes the test HOME's ~/.sky/ssh_node_pools.yaml: one pool
// with every host, as root with the testinfra key.
func (h *e2eHosts) writePool(t testing.TB, e *skyEnv) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n  user: root\n  identity_file: %s\n  hosts:\n", e2ePool, h.Key)
	for _, ip := range h.IPs {
		fmt.Fprintf(&b, "    - %s\n", ip)
	}
	dir := filepath.Join(e.home, ".sky")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ssh_node_pools.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sshArgs is the system ssh to host i as root, with the testinfra key
// and no host key bookkeeping of its own.
func (h *e2eHosts) sshArgs(i int, cmd string) []string {
	return []string{"-i", h.Key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5", "root@" + h.IPs[i], cmd}
}

// onHost runs a shell command on host i and returns its output; failing
// to reach the host fails the test.
func (h *e2eHosts) onHost(t testing.TB, i int, cmd string) string {
	t.Helper()
	r := runCmd(t, 30*time.Second, os.Environ(), "ssh", h.sshArgs(i, cmd)...)
	if r.code != 0 {
		t.Fatalf("on host %s: %s", h.IPs[i], r)
	}
	return r.stdout
}

// markedProcs lists, on host i only (same UTS namespace as the shell ssh
// lands in), the processes whose environment holds marker. The hosts
// share one pid namespace, so /proc alone would show every host's.
func (h *e2eHosts) markedProcs(t testing.TB, i int, marker string) []string {
	t.Helper()
	cmd := `me=$(readlink /proc/self/ns/uts); for p in /proc/[0-9]*; do ` +
		`[ "$(readlink $p/ns/uts 2>/dev/null)" = "$me" ] || continue; ` +
		`grep -qa ` + marker + ` $p/environ 2>/dev/null && echo "${p#/proc/} $(tr '\0' ' ' < $p/cmdline)"; done; true`
	out := strings.TrimSpace(h.onHost(t, i, cmd))
	var procs []string
	for _, l := range strings.Split(out, "\n") {
		// the grep and the loop's own subshells carry the marker in argv, not env
		if l != "" && !strings.Contains(l, "grep") {
			procs = append(procs, l)
		}
	}
	return procs
}

// setLink brings host i's network up or down (from inside its namespace),
// as if the machine dropped off the network.
func (h *e2eHosts) setLink(t testing.TB, i int, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	if out, err := exec.Command("ip", "netns", "exec", h.Names[i], "ip", "link", "set", "eth0", state).CombinedOutput(); err != nil {
		t.Fatalf("ip link set eth0 %s in %s: %v: %s", state, h.Names[i], err, out)
	}
}

func (e *skyEnv) launchOK(t testing.TB, args ...string) result {
	t.Helper()
	r := e.exec(3*time.Minute, nil, append([]string{"launch", "-y"}, args...)...)
	if r.code != 0 {
		t.Fatalf("%s\n%s", r, e.serverLogTail())
	}
	return r
}

// TestSSHNodePool walks one pool through the user's whole story: ssh up,
// a 2-node task, ssh into it, cancel, down, relaunch without copying, a
// host dying under a job, a launch failing half-way and converging, and
// ssh down. The steps share hosts and depend on each other, so the first
// failure stops the test.
func TestSSHNodePool(t *testing.T) {
	// One at a time with the other tests of the sshd hosts (e2eSet): a pool on them is one test's.
	sshHarness.parallel(t)
	h := sshPoolHosts(t)
	e := newEnv(t)
	h.writePool(t, e)
	t.Cleanup(func() {
		for i := range h.IPs {
			_ = exec.Command("ip", "netns", "exec", h.Names[i], "ip", "link", "set", "eth0", "up").Run()
		}
	})

	// sky ssh up: every host probed, binary copied, table printed.
	r := e.must("ssh", "up")
	for _, ip := range h.IPs {
		if !strings.Contains(r.stdout, ip) {
			t.Errorf("sky ssh up does not list host %s:\n%s", ip, r.stdout)
		}
	}
	if got := strings.Count(r.stdout, "copied"); got != e2eNumHosts {
		t.Errorf("sky ssh up copied the binary to %d hosts, want %d:\n%s", got, e2eNumHosts, r.stdout)
	}
	if got := strings.Count(r.stdout, " ready "); got != e2eNumHosts {
		t.Errorf("sky ssh up shows %d ready hosts, want %d:\n%s", got, e2eNumHosts, r.stdout)
	}
	r = e.must("check", "ssh", "-v")
	if want := fmt.Sprintf("pool %s: %d of %d host(s) ready", e2ePool, e2eNumHosts, e2eNumHosts); !strings.Contains(r.stdout, want) {
		t.Errorf("sky check ssh -v: want %q in:\n%s", want, r.stdout)
	}

	// A 2-node task with a workdir.
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "marker.txt"), []byte("synced-e2e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := writeFile(t, "task.yaml", fmt.Sprintf(`num_nodes: 2
resources:
  infra: ssh/%s
workdir: %s
setup: echo "setup-on-$(hostname)"
run: |
  echo "rank=$SKYPILOT_NODE_RANK host=$(hostname) ips=$(echo $SKYPILOT_NODE_IPS | tr ' ' ,) file=$(cat marker.txt)"
`, e2ePool, wd))
	r = e.launchOK(t, "-c", "pc", yaml)
	ips := h.IPs[0] + "," + h.IPs[1]
	for _, want := range []string{
		"setup-on-" + h.Names[0], "setup-on-" + h.Names[1],
		fmt.Sprintf("rank=0 host=%s ips=%s file=synced-e2e", h.Names[0], ips),
		fmt.Sprintf("rank=1 host=%s ips=%s file=synced-e2e", h.Names[1], ips),
		"SUCCEEDED",
	} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("launch output lacks %q:\n%s", want, r.out())
		}
	}
	if strings.Contains(r.out(), "copied") || strings.Count(r.out(), "up to date") != 2 {
		t.Errorf("after sky ssh up, launch should find the binary up to date on both nodes:\n%s", r.out())
	}
	// Setup runs in the job (detached setup): the head's job log dir has
	// each node's setup log and each rank's run log.
	if out := h.onHost(t, 0, "ls ~/sky_logs/*/setup-0.log ~/sky_logs/*/setup-1.log ~/sky_logs/*/tasks/"); !strings.Contains(out, "0-head.log") || !strings.Contains(out, "1-worker1.log") {
		t.Errorf("head node logs: want setup-0.log, setup-1.log and per-rank logs, got:\n%s", out)
	}
	if out := h.onHost(t, 0, "cat ~/sky_logs/*/setup-1.log"); !strings.Contains(out, "setup-on-"+h.Names[1]) {
		t.Errorf("worker's setup log: got %q", out)
	}
	cl := e.status(false)["pc"]
	if cl.Status != "UP" || cl.LaunchStatusReason != nil {
		t.Errorf("cluster pc after launch: %+v", cl)
	}

	// ssh <cluster> through the generated config. OpenSSH reads the
	// passwd home, not $HOME, so the test names the generated file with
	// -F and checks that ~/.ssh/config includes it.
	gen := filepath.Join(paths.GeneratedSSH(e.home), "pc")
	for alias, want := range map[string]string{"pc": h.Names[0], "pc-worker1": h.Names[1]} {
		out := runCmd(t, 30*time.Second, e.env, "ssh", "-F", gen, "-o", "BatchMode=yes", alias, "hostname")
		if out.code != 0 || strings.TrimSpace(out.stdout) != want {
			t.Errorf("ssh %s hostname: want %s, got %s", alias, want, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, ".ssh", "config")); !strings.Contains(string(b), "Include ~/.sky/skygo/generated/ssh/*") {
		t.Errorf("~/.ssh/config does not include the generated entries:\n%s", b)
	}

	// Stop is not supported on SSH pools: the cluster's line says so and,
	// as in SkyPilot, the command still exits 0 after its failure line.
	if r := e.exec(cmdTimeout, nil, "stop", "-y", "pc"); r.code != 0 || !strings.Contains(r.stdout, "use sky down") ||
		!strings.Contains(r.stdout, "Cluster(s) failed. See details above.") {
		t.Errorf("sky stop on an SSH cluster should report it cannot stop, saying to use sky down: %s", r)
	}
	if c := e.status(false)["pc"]; c.Status != "UP" {
		t.Errorf("after a refused stop: %+v, want UP", c)
	}

	// Cancel a running 2-node job: nothing of it may stay on either host.
	const mark = "SKYGO_E2E_CANCEL_MARK=c4nc3l"
	long := writeFile(t, "long.yaml", fmt.Sprintf("num_nodes: 2\nresources:\n  infra: ssh/%s\nenvs:\n  SKYGO_E2E_CANCEL_MARK: c4nc3l\nrun: sleep 300\n", e2ePool))
	e.must("exec", "-d", "pc", long)
	e.waitJob("pc", 2, 30*time.Second, "RUNNING", func(j job) bool { return j.Status == "RUNNING" })
	for i := 0; i < 2; i++ {
		if !waitFor(10*time.Second, func() bool { return len(h.markedProcs(t, i, mark)) > 0 }) {
			t.Fatalf("job 2 runs but host %s shows no process of it", h.IPs[i])
		}
	}
	e.must("cancel", "-y", "pc", "2")
	e.waitJob("pc", 2, 30*time.Second, "CANCELLED", func(j job) bool { return j.Status == "CANCELLED" })
	for i := 0; i < 2; i++ {
		var left []string
		if !waitFor(10*time.Second, func() bool { left = h.markedProcs(t, i, mark); return len(left) == 0 }) {
			t.Errorf("after cancel, host %s still runs:\n%s", h.IPs[i], strings.Join(left, "\n"))
		}
	}

	h.jobShellOnSSH(t, e)

	// Down releases the hosts and removes the cluster's files and config.
	e.must("down", "-y", "pc")
	claims, _ := os.ReadFile(filepath.Join(paths.Root(e.home), "ssh", "claims.json"))
	if strings.Contains(string(claims), `"pc"`) {
		t.Errorf("claims after down still hold pc:\n%s", claims)
	}
	if _, err := os.Stat(gen); !os.IsNotExist(err) {
		t.Errorf("generated ssh config %s survived down (%v)", gen, err)
	}
	if out := h.onHost(t, 0, "ls -d ~/sky_workdir ~/.sky/agent ~/.sky/ssh/cluster-key 2>/dev/null; ls ~/.sky/bin"); strings.TrimSpace(out) != "sky-node" {
		t.Errorf("head host after down: want only ~/.sky/bin/sky-node left, got:\n%s", out)
	}

	// A second launch copies nothing.
	r = e.launchOK(t, "-c", "pd", yaml)
	if strings.Contains(r.out(), "copied") || strings.Count(r.out(), "up to date") != 2 {
		t.Errorf("second launch should copy no binary:\n%s", r.out())
	}

	// A host dying under a running job: the job fails with a reason, in
	// bounded time, and a refresh reports the cluster not UP.
	e.must("exec", "-d", "pd", long)
	e.waitJob("pd", 2, 30*time.Second, "RUNNING", func(j job) bool { return j.Status == "RUNNING" })
	h.setLink(t, 1, false)
	start := time.Now()
	j := e.waitJob("pd", 2, 60*time.Second, "FAILED", func(j job) bool { return strings.HasPrefix(j.Status, "FAILED") })
	t.Logf("job ended %s %.1fs after its worker host went away: %s", j.Status, time.Since(start).Seconds(), j.FailureReason)
	if j.FailureReason == "" {
		t.Errorf("job on a dead host ended %s without a reason", j.Status)
	}
	logs := e.exec(cmdTimeout, nil, "logs", "pd", "2", "--no-follow")
	if !strings.Contains(logs.out(), "reaching node 1 ("+h.IPs[1]+")") {
		t.Errorf("job log should name the node that could not be reached:\n%s", logs.out())
	}
	cl = e.status(true)["pd"]
	if cl.Status == "UP" || cl.LaunchStatusReason == nil || !strings.Contains(*cl.LaunchStatusReason, "1 of 2 nodes are up") {
		t.Errorf("sky status -r with a dead host: %+v (reason %v)", cl, deref(cl.LaunchStatusReason))
	}
	h.setLink(t, 1, true)
	e.must("down", "-y", "pd")

	// A launch failing half-way (the binary cannot be installed on the
	// head) stays INIT with the reason; fixed, a re-launch converges.
	h.onHost(t, 0, "rm -rf ~/.sky/bin && echo not-a-dir > ~/.sky/bin")
	one := writeFile(t, "one.yaml", fmt.Sprintf("resources:\n  infra: ssh/%s\nrun: echo converged\n", e2ePool))
	if r := e.exec(3*time.Minute, nil, "launch", "-y", "-c", "pe", one); r.code == 0 {
		t.Fatalf("launch with a broken ~/.sky/bin on the head should fail: %s", r)
	}
	cl = e.status(false)["pe"]
	if cl.Status != "INIT" || cl.LaunchStatusReason == nil || !strings.Contains(*cl.LaunchStatusReason, "starting agents failed") {
		t.Errorf("half-launched cluster: want INIT with a reason, got %+v (reason %v)", cl, deref(cl.LaunchStatusReason))
	}
	if r := e.must("status", "-v"); !strings.Contains(r.stdout, "starting agents failed") {
		t.Errorf("sky status -v does not show the reason:\n%s", r.stdout)
	}
	h.onHost(t, 0, "rm -f ~/.sky/bin")
	r = e.launchOK(t, "-c", "pe", one)
	if !strings.Contains(r.out(), "converged") || !strings.Contains(r.out(), "copied") {
		t.Errorf("re-launch should copy the binary again and run:\n%s", r.out())
	}
	if cl = e.status(false)["pe"]; cl.Status != "UP" {
		t.Errorf("re-launched cluster: %+v", cl)
	}

	// ssh down refuses while a cluster holds hosts, then cleans up.
	if r := e.exec(cmdTimeout, nil, "ssh", "down"); r.code == 0 || !strings.Contains(r.out(), "pe (pool "+e2ePool+")") {
		t.Errorf("sky ssh down with a cluster on the pool should refuse naming it: %s", r)
	}
	// Autostop on a pool can only tear down; the server carries it out,
	// since the head cannot call back.
	if r := e.exec(cmdTimeout, nil, "autostop", "-y", "pe", "-i", "5"); r.code != 0 || !strings.Contains(r.stdout, "--down") ||
		!strings.Contains(r.stdout, "Cluster(s) failed.") {
		t.Errorf("autostop without --down on an SSH cluster should be refused pointing at --down: %s", r)
	}
	e.must("autostop", "-y", "pe", "-i", "0", "--down")
	if !waitFor(45*time.Second, func() bool { _, ok := e.status(false)["pe"]; return !ok }) {
		t.Errorf("autostop --down did not tear the SSH cluster down within 45 s: %+v", e.status(false)["pe"])
		e.must("down", "-y", "pe")
	}
	if out := e.serverLogTail(); !strings.Contains(out, "autostop: cluster pe") {
		t.Errorf("the server log does not record the autostop teardown:\n%s", out)
	}
	e.must("ssh", "down")
	for i := range h.IPs {
		if out := h.onHost(t, i, "ls -a ~/.sky 2>/dev/null | grep -v '^\\.*$'; true"); strings.Contains(out, "bin") {
			t.Errorf("host %s after sky ssh down still has ~/.sky/bin:\n%s", h.IPs[i], out)
		}
	}
}

// jobShellOnSSH is TestSSHNodePool's step for the job's shell on cluster
// pc (jobs 3 and 4): each host's ~/.bashrc reaches run and setup, and a
// setup failing on one host kills the other host's setup at once.
func (h *e2eHosts) jobShellOnSSH(t *testing.T, e *skyEnv) {
	t.Helper()
	for i := 0; i < 2; i++ {
		h.onHost(t, i, `cp -p ~/.bashrc ~/.bashrc.e2e-orig 2>/dev/null; echo "export TEST_VAR=bashrc-on-$(hostname)" >> ~/.bashrc`)
	}
	defer func() {
		for i := 0; i < 2; i++ {
			h.onHost(t, i, `if [ -e ~/.bashrc.e2e-orig ]; then mv ~/.bashrc.e2e-orig ~/.bashrc; else rm -f ~/.bashrc; fi`)
		}
	}()
	r := e.must("exec", "pc", "--num-nodes", "2", "--", `echo "shell rank=$SKYPILOT_NODE_RANK var=${TEST_VAR:-TEST_VAR is not set}"`)
	for i := 0; i < 2; i++ {
		if want := fmt.Sprintf("shell rank=%d var=bashrc-on-%s", i, h.Names[i]); !strings.Contains(r.stdout, want) {
			t.Errorf("sky exec on the SSH cluster lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.out(), "job control") || strings.Contains(r.out(), "terminal process group") {
		t.Errorf("bash's job-control complaints reach the user:\n%s", r.out())
	}

	// Node 1 fails once node 0's setup sleeps; the hosts share one pid
	// namespace, so node 1 can see that sleep in /proc.
	const mark = "SKYGO_E2E_SETUP_MARK=s3tup"
	first := e.queue("pc")[1]
	spec, _ := json.Marshal(map[string]any{
		"num_nodes": 2, "user": first.Username, "user_hash": first.UserHash,
		"envs": map[string]string{"SKYGO_E2E_SETUP_MARK": "s3tup"},
		"setup": `if [ "$SKYPILOT_SETUP_NODE_RANK" = 0 ]; then SKYGO_E2E_SLEEPER=1 sleep 10000; fi
for i in $(seq 400); do grep -qla SKYGO_E2E_SLEEPER=1 /proc/[0-9]*/environ 2>/dev/null && break; sleep 0.05; done
echo "setup on $(hostname) fails"; exit 5`,
		"run": "echo run-should-not-start",
	})
	sub := runCmdStdin(t, cmdTimeout, os.Environ(), string(spec), "ssh", h.sshArgs(0, "~/.sky/bin/sky-node agent submit --json")...)
	var res struct {
		JobID int `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(sub.stdout), &res); err != nil || sub.code != 0 || res.JobID != 4 {
		t.Fatalf("submitting a job with a setup to the head agent: %s\nwant job 4", sub)
	}
	logs := e.exec(cmdTimeout, nil, "logs", "pc", "4")
	if logs.code != 100 || !setupFailedLine.MatchString(logs.stdout) || !strings.Contains(logs.stdout, "setup on "+h.Names[1]+" fails") {
		t.Errorf("sky logs of the failed setup: want exit 100, node 1's output and SkyPilot's setup failure line:\n%q", logs.out())
	}
	if strings.Contains(logs.stdout, "run-should-not-start") {
		t.Errorf("run started after the failed setup:\n%s", logs.stdout)
	}
	if j := e.queue("pc")[4]; j.Status != "FAILED_SETUP" || fmt.Sprint(j.ReturnCodes) != "[137 5]" {
		t.Errorf("job 4 = %+v, want FAILED_SETUP with return codes [137 5]", j)
	}
	for i := 0; i < 2; i++ {
		if left := h.markedProcs(t, i, mark); len(left) > 0 {
			t.Errorf("after the failed setup, host %s still runs:\n%s", h.IPs[i], strings.Join(left, "\n"))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// --- benchmarks ---

// sshBenchEnv is a server with the pool set up (binary on every host).
func sshBenchEnv(b *testing.B) (*skyEnv, *e2eHosts) {
	h := sshPoolHosts(b)
	e := newEnv(b)
	h.writePool(b, e)
	e.must("ssh", "up")
	return e, h
}

// sshTrue is one `ssh host true` with the system client: the baseline,
// a full connection set-up like the one a `sky exec` needs at most.
func sshTrue(b *testing.B, h *e2eHosts) time.Duration {
	start := time.Now()
	if r := runCmd(b, 30*time.Second, os.Environ(), "ssh", h.sshArgs(0, "true")...); r.code != 0 {
		b.Fatal(r)
	}
	return time.Since(start)
}

// BenchmarkSSHExecDetach: `sky exec -d` on a 1-node SSH cluster against
// `ssh host true` (goal: ratio ≤ 1.5).
func BenchmarkSSHExecDetach(b *testing.B) {
	e, h := sshBenchEnv(b)
	e.launchOK(b, "-c", "bx", "--infra", "ssh/"+e2ePool)
	var sum, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum += timeRun(b, e.env, "", e.bin, "exec", "-d", "bx", "--", "true")
		b.StopTimer()
		base += sshTrue(b, h)
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "exec", sum, base, b.N)
}

// BenchmarkSSHBootstrap: a fresh host (no node runtime) to a cluster with
// its agent running: `sky launch` with nothing to run, which probes,
// copies the binary and starts the agent (goal ≤ 2 s).
func BenchmarkSSHBootstrap(b *testing.B) {
	e, h := sshBenchEnv(b)
	var sum, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h.onHost(b, 0, "rm -f ~/.sky/bin/sky-node")
		name := fmt.Sprintf("bb%d", i)
		b.StartTimer()
		start := time.Now()
		r := e.launchOK(b, "-c", name, "--infra", "ssh/"+e2ePool)
		sum += time.Since(start)
		b.StopTimer()
		if !strings.Contains(r.out(), "copied") {
			b.Fatalf("bootstrap of a fresh host did not copy the binary:\n%s", r.out())
		}
		base += sshTrue(b, h)
		e.must("down", "-y", name)
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "bootstrap", sum, base, b.N)
}

// BenchmarkSSHLaunchTwoNodes: `sky launch` of a 2-node task on the pool,
// from no cluster to SUCCEEDED (binaries already installed by ssh up).
func BenchmarkSSHLaunchTwoNodes(b *testing.B) {
	e, h := sshBenchEnv(b)
	yaml := filepath.Join(b.TempDir(), "two.yaml")
	if err := os.WriteFile(yaml, []byte(fmt.Sprintf("num_nodes: 2\nresources:\n  infra: ssh/%s\nrun: echo hi-$SKYPILOT_NODE_RANK\n", e2ePool)), 0o644); err != nil {
		b.Fatal(err)
	}
	var sum, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bl%d", i)
		sum += timeRun(b, e.env, "hi-1", e.bin, "launch", "-y", "-c", name, yaml)
		b.StopTimer()
		base += sshTrue(b, h)
		e.must("down", "-y", name)
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "launch2", sum, base, b.N)
}
