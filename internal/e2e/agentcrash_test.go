package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// headAgentPid reads the head agent daemon's pid of a cluster and checks
// that it is a live process of this test's installation.
func (e *skyEnv) headAgentPid(name string) int {
	e.t.Helper()
	pidFile := filepath.Join(e.nodeHome(name, 0), ".sky", "agent", "daemon.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		e.t.Fatalf("head agent pid file: %v", err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || len(procsWithEnvPid(pid, e.home)) == 0 {
		e.t.Fatalf("head agent pid %q from %s is not a live process of this test", b, pidFile)
	}
	return pid
}

// liveHeadAgent reports the head agent's pid when its pid file names a
// live process other than old (0 otherwise).
func (e *skyEnv) liveHeadAgent(name string, old int) int {
	b, err := os.ReadFile(filepath.Join(e.nodeHome(name, 0), ".sky", "agent", "daemon.pid"))
	if err != nil {
		return 0
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid == old || len(procsWithEnvPid(pid, e.home)) == 0 {
		return 0
	}
	return pid
}

// TestAgentCrashRepairedByServer (issue 10, point 4): kill -9 of the head
// agent while a 2-node job runs. With no command from the user, the
// server finds the dead agent and restarts it; the job it lost ends
// FAILED_DRIVER with a reason, a follower of its log that was attached
// before the crash ends, and the cluster is UP and usable again.
func TestAgentCrashRepairedByServer(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	marker := fmt.Sprintf("E2E_MARKER=agentcrash-%d", rand.Int64())
	e.must("launch", "-y", "-d", "-c", "ac", "--num-nodes", "2", "--env", marker, "--", "echo job-started; sleep 300")
	e.waitJob("ac", 1, 30*time.Second, "RUNNING", func(j job) bool { return j.Status == "RUNNING" })

	follower := e.start("logs", "ac", "1")
	follower.waitOutput("job-started", 30*time.Second)

	pid := e.headAgentPid("ac")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return len(procsWithEnvPid(pid, e.home)) == 0 }) {
		t.Fatalf("head agent pid %d still alive after SIGKILL", pid)
	}

	// Only reads from here on: the repair must come from the server.
	var j job
	repaired := waitFor(30*time.Second, func() bool {
		q := e.exec(cmdTimeout, nil, "queue", "ac", "-o", "json")
		if q.code != 0 {
			return false
		}
		var out map[string][]job
		if err := json.Unmarshal([]byte(q.stdout), &out); err != nil {
			return false
		}
		for _, got := range out["ac"] {
			if got.JobID == 1 {
				j = got
			}
		}
		return j.Status == "FAILED_DRIVER"
	})
	if !repaired {
		t.Fatalf("job 1 not FAILED_DRIVER within 30 s of the head agent's kill -9 (last seen %+v)\n%s", j, e.serverLogTail())
	}
	if j.FailureReason == "" {
		t.Errorf("job 1 is FAILED_DRIVER without a reason: %+v", j)
	}

	follower.wait(30 * time.Second)
	if !strings.Contains(follower.stdout.String()+follower.stderr.String(), "FAILED_DRIVER") {
		t.Errorf("the follower attached before the crash ended without saying the job failed:\n%s", follower)
	}
	if r := e.exec(30*time.Second, nil, "logs", "ac", "1"); r.code == -1 || !strings.Contains(r.out(), "FAILED_DRIVER") {
		t.Errorf("logs of the lost job after the repair:\n%s", r)
	}

	if c := e.status(false)["ac"]; c.Status != "UP" {
		t.Errorf("cluster after the agent was restarted: %+v, want UP", c)
	}
	if e.liveHeadAgent("ac", pid) == 0 {
		t.Errorf("no live head agent other than the killed pid %d after the repair", pid)
	}
	var left []proc
	if !waitFor(10*time.Second, func() bool { left = procsWithEnv(marker); return len(left) == 0 }) {
		t.Errorf("processes of the lost job survive the agent restart: %v", left)
	}
	if r := e.must("exec", "ac", "--", "echo alive-again"); !strings.Contains(r.stdout, "alive-again") {
		t.Errorf("exec after the repair:\n%s", r)
	}
}

// TestStartForceRestartsAgents: `sky start -f` of an UP cluster restarts
// its agents (a new head daemon), where without -f it is left alone.
func TestStartForceRestartsAgents(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-c", "sf", "--num-nodes", "2", "--", "echo hi")
	pid := e.headAgentPid("sf")

	if r := e.must("start", "sf", "-y"); !strings.Contains(r.out(), "already has status UP") {
		t.Errorf("start without -f of an UP cluster:\n%s", r)
	}
	if got := e.headAgentPid("sf"); got != pid {
		t.Errorf("start without -f replaced the head agent (pid %d -> %d)", pid, got)
	}

	e.must("start", "sf", "-y", "-f")
	if !waitFor(5*time.Second, func() bool { return len(procsWithEnvPid(pid, e.home)) == 0 }) {
		t.Errorf("the old head agent (pid %d) still runs after start -f", pid)
	}
	if e.liveHeadAgent("sf", pid) == 0 {
		t.Errorf("no new live head agent after start -f (old pid %d)", pid)
	}
	if c := e.status(false)["sf"]; c.Status != "UP" {
		t.Errorf("cluster after start -f: %+v, want UP", c)
	}
	if r := e.must("exec", "sf", "--", "echo after-force"); !strings.Contains(r.stdout, "after-force") {
		t.Errorf("exec after start -f:\n%s", r)
	}
}
