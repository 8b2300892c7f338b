package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// managedHostOf is the host (index) whose processes carry marker, or -1.
func (h *e2eHosts) managedHostOf(t testing.TB, marker string, skip int) int {
	t.Helper()
	for i := range h.IPs {
		if i != skip && len(h.markedProcs(t, i, marker)) > 0 {
			return i
		}
	}
	return -1
}

// TestManagedJobSSHPreemption: a managed job on an SSH node pool whose
// host drops off the network (its link cut inside its namespace, the
// job's processes still running there, unreachable) is RECOVERING within
// 10 s, runs again on another host of the pool, and ends SUCCEEDED with
// one recovery. Once the host is back, nothing of the job is left on it.
func TestManagedJobSSHPreemption(t *testing.T) {
	// One at a time with the other tests of the sshd hosts (e2eSet): a pool on them is one test's.
	sshHarness.parallel(t)
	h := sshPoolHosts(t)
	e := managedEnv(t)
	h.writePool(t, e)
	t.Cleanup(func() {
		for i := range h.IPs {
			_ = exec.Command("ip", "netns", "exec", h.Names[i], "ip", "link", "set", "eth0", "up").Run()
		}
		// The hosts go back as they came (TestSSHNodePool, sharing them,
		// expects `sky ssh up` to copy the binary to each).
		e.exec(cmdTimeout, nil, "jobs", "cancel", "-a", "-y")
		e.exec(cmdTimeout, nil, "down", "-a", "-y")
		if r := e.exec(cmdTimeout, nil, "ssh", "down"); r.code != 0 {
			t.Errorf("cleanup: %s", r)
		}
	})
	began := time.Now()
	const marker = "SKYGO_E2E_MJ_MARK=sshrec"
	// The hosts share /var/tmp: the first run leaves a file there and
	// runs long (it is cut off), the second finds it and ends soon.
	first := filepath.Join("/var/tmp", "skygo-e2e-mj-"+filepath.Base(e.home))
	t.Cleanup(func() { os.Remove(first) })
	e.must("jobs", "launch", "-y", "-d", "-n", "sshrec", "--infra", "ssh/"+e2ePool, "--env", "SKYGO_E2E_MJ_MARK=sshrec",
		"--", fmt.Sprintf(`echo "run on $(hostname)"; if [ -e %[1]s ]; then sleep 6; else touch %[1]s; sleep 300; fi; echo "done on $(hostname)"`, first))

	var q map[int]mjob
	if !waitFor(90*time.Second, func() bool { q = e.queueByID(); return q[1].Status == "RUNNING" }) {
		t.Fatalf("job 1 not RUNNING after 90s: %v\n%s", q[1], e.controllerLog(1))
	}
	host := -1
	if !waitFor(15*time.Second, func() bool { host = h.managedHostOf(t, marker, -1); return host >= 0 }) {
		t.Fatalf("job 1 is RUNNING but no host runs it\n%s", e.controllerLog(1))
	}
	t.Logf("job 1 RUNNING on host %s %.1fs after launch", h.Names[host], time.Since(began).Seconds())

	// A blip (the link down for a second and a half) is ridden out.
	h.setLink(t, host, false)
	time.Sleep(1500 * time.Millisecond)
	h.setLink(t, host, true)
	blip := time.Now()
	for time.Since(blip) < 10*time.Second {
		if q = e.queueByID(); q[1].Status != "RUNNING" || q[1].RecoveryCount != 0 {
			t.Fatalf("a 1.5s network blip of the job's host made it %v\n%s", q[1], e.controllerLog(1))
		}
		time.Sleep(250 * time.Millisecond)
	}

	h.setLink(t, host, false)
	cut := time.Now()
	if !waitFor(20*time.Second, func() bool { q = e.queueByID(); return q[1].Status != "RUNNING" }) {
		t.Fatalf("job 1 still RUNNING 20s after its host's network was cut: %v\n%s\n%s", q[1], e.controllerLog(1), e.serverLogTail())
	}
	seen := time.Since(cut)
	t.Logf("job 1 %s %.1fs after the cut (at %s)", q[1].Status, seen.Seconds(), cut.UTC().Format("15:04:05.000"))
	if q[1].Status != "RECOVERING" && q[1].Status != "STARTING" {
		t.Fatalf("job 1 after the cut: %v, want RECOVERING\n%s", q[1], e.controllerLog(1))
	}
	if seen > 10*time.Second {
		t.Errorf("job 1 took %.1fs to be RECOVERING after its host's network was cut, want within 10s", seen.Seconds())
	}

	if !waitFor(60*time.Second, func() bool { q = e.queueByID(); return q[1].Status == "RUNNING" }) {
		t.Fatalf("job 1 not RUNNING again within 60s of the cut: %v\n%s", q[1], e.controllerLog(1))
	}
	t.Logf("job 1 RUNNING again %.1fs after the cut", time.Since(cut).Seconds())
	second := -1
	if !waitFor(15*time.Second, func() bool { second = h.managedHostOf(t, marker, host); return second >= 0 }) {
		t.Fatalf("job 1 is RUNNING again but on no other host\n%s", e.controllerLog(1))
	}
	if q[1].RecoveryCount != 1 {
		t.Errorf("job 1 recovered: %v, want recovery_count 1", q[1])
	}

	if !waitFor(60*time.Second, func() bool { q = e.queueByID(); return terminal(q[1].Status) }) {
		t.Fatalf("job 1 did not end: %v\n%s", q[1], e.controllerLog(1))
	}
	if q[1].Status != "SUCCEEDED" || q[1].RecoveryCount != 1 {
		t.Errorf("job 1 ended %v, want SUCCEEDED after 1 recovery\n%s", q[1], e.controllerLog(1))
	}
	t.Logf("job 1 %s on host %s %.1fs after the launch", q[1].Status, h.Names[second], time.Since(began).Seconds())
	logs := e.exec(cmdTimeout, nil, "jobs", "logs", "1", "--no-follow")
	if want := "done on " + h.Names[second]; !strings.Contains(logs.out(), want) {
		t.Errorf("sky jobs logs 1: want %q:\n%s", want, logs.out())
	}

	if !waitFor(30*time.Second, func() bool { q = e.queueByID(); return q[1].ScheduleState != nil && *q[1].ScheduleState == "DONE" }) {
		t.Errorf("job 1 never DONE: %v", q[1])
	}
	if st := e.status(false); len(st) > 0 {
		t.Errorf("clusters left after the job ended: %v", st)
	}

	// The host comes back still running the first attempt, which its
	// teardown could not reach: before the host serves another cluster
	// that attempt is killed and its files removed.
	h.setLink(t, host, true)
	if !waitFor(20*time.Second, func() bool {
		return runCmd(t, 30*time.Second, os.Environ(), "ssh", h.sshArgs(host, "true")...).code == 0
	}) {
		t.Fatalf("host %s does not answer ssh after its link came back", h.Names[host])
	}
	if len(h.markedProcs(t, host, marker)) == 0 {
		t.Fatalf("host %s no longer runs the cut-off attempt: the check below would prove nothing", h.Names[host])
	}
	e.launchOK(t, "-c", "after", "--num-nodes", fmt.Sprint(e2eNumHosts), "--infra", "ssh/"+e2ePool, "--", "true")
	if left := h.markedProcs(t, host, marker); len(left) > 0 {
		t.Errorf("host %s serves a new cluster while the cut-off attempt still runs there:\n%s", h.Names[host], strings.Join(left, "\n"))
	}
	e.must("down", "-y", "after")
	t.Logf("test took %.1fs", time.Since(began).Seconds())
}
