package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
)

// The hostile multi-user suite for pools (issue 26, item 5): bob attacks
// alice's pool; the admin must still reach it; the controller acts on a
// pool's workers with the rights its jobs were admitted with; a cancel
// always ends a pool job.

// teamPool makes a pool of one worker as user and waits for it to be
// READY. Its setup leaves a marker, so the pool is seen to be up.
func (tm *team) teamPool(user, name string) {
	tm.t.Helper()
	y := writeFile(tm.t, "pool.yaml", "pool:\n  workers: 1\nsetup: echo ready > ~/pool_setup\n")
	tm.mustAs(user, "jobs", "pool", "apply", "-y", "-p", name, y)
	if !waitFor(90*time.Second, func() bool {
		for _, p := range tm.poolsAs(user) {
			if p.Name == name && p.ReadyWorkers == 1 {
				return true
			}
		}
		return false
	}) {
		tm.t.Fatalf("pool %s of %s: no READY worker after 90s: %+v\n%s", name, user, tm.poolsAs(user), tm.serverLogTail())
	}
}

// poolsAs is /jobs/pool_status (every pool) as user sees it.
func (tm *team) poolsAs(user string) []api.PoolRecord {
	tm.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	recs, err := client.Call(ctx, tm.clientAs(user), apiop.PoolStatus, api.PoolStatusBody{})
	if err != nil {
		tm.t.Fatalf("pool status as %s: %v", user, err)
	}
	return recs
}

// jobsAs is user's managed jobs (sky jobs queue -v -o json).
func (tm *team) jobsAs(user string) map[int]poolJob {
	tm.t.Helper()
	r := tm.mustAs(user, "jobs", "queue", "-v", "-o", "json")
	var recs []poolJob
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		tm.t.Fatalf("jobs queue -o json as %s: %v\n%s", user, err, r.stdout)
	}
	out := map[int]poolJob{}
	for _, j := range recs {
		out[j.JobID] = j
	}
	return out
}

// waitJobAs waits until user's managed job id has status want.
func (tm *team) waitJobAs(user string, id int, timeout time.Duration, want string) poolJob {
	tm.t.Helper()
	var j poolJob
	if !waitFor(timeout, func() bool { j = tm.jobsAs(user)[id]; return j.Status == want }) {
		tm.t.Fatalf("%s's job %d is not %s after %s: %+v\n%s", user, id, want, timeout, j, tm.serverLogTail())
	}
	return j
}

// launchIDAs submits a detached managed job as user and returns its id.
func (tm *team) launchIDAs(user string, args ...string) int {
	tm.t.Helper()
	r := tm.mustAs(user, append([]string{"jobs", "launch", "-y", "-d", "-o", "id"}, args...)...)
	id, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if err != nil {
		tm.t.Fatalf("%s's launch did not print one job id: %s", user, r)
	}
	return id
}

// TestHostilePoolLaunchRefused: bob's `sky jobs launch -p alices-pool`
// is refused with the very error a pool that does not exist gives, so it
// neither runs his code on her worker nor tells him her pool exists; her
// own pool jobs run.
func TestHostilePoolLaunchRefused(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	tm.teamPool("alice", "apool")

	r := tm.as("bob", "jobs", "launch", "-y", "-d", "-p", "apool", "--", "touch ~/bob_was_here")
	if r.code == 0 {
		t.Fatalf("bob's launch on alice's pool was accepted: %s", r)
	}
	missing := tm.as("bob", "jobs", "launch", "-y", "-d", "-p", "nopool", "--", "touch ~/bob_was_here")
	if missing.code == 0 {
		t.Fatalf("a launch on a missing pool was accepted: %s", missing)
	}
	if got, want := r.stderr, strings.ReplaceAll(missing.stderr, "nopool", "apool"); got != want {
		t.Errorf("bob's launch on alice's pool is refused differently from one on a missing pool (tells him it exists):\n got: %s\nwant: %s", got, want)
	}
	if strings.Contains(r.out(), "alice") {
		t.Errorf("the refusal names alice: %s", r)
	}
	// An array is refused the same way, before any job is recorded.
	if r := tm.as("bob", "jobs", "launch", "-y", "-d", "-p", "apool", "--num-jobs", "3", "--", "touch ~/bob_was_here"); r.code == 0 {
		t.Errorf("bob's array on alice's pool was accepted: %s", r)
	}
	if js := tm.jobsAs("bob"); len(js) != 0 {
		t.Errorf("bob has managed jobs after refused launches: %+v", js)
	}

	id := tm.launchIDAs("alice", "-p", "apool", "--", "test -f ~/pool_setup && echo alices job")
	j := tm.waitJobAs("alice", id, 90*time.Second, "SUCCEEDED")
	if j.Worker == nil || *j.Worker != "apool-1" {
		t.Errorf("alice's job ran on %v, want her worker apool-1", j.Worker)
	}
	if _, err := os.Stat(filepath.Join(tm.nodeHome("apool-1", 0), "bob_was_here")); err == nil {
		t.Errorf("bob's code ran on alice's worker")
	}
}

// TestHostilePoolOwnerOnly: bob cannot see, read the logs of, resize or
// tear down alice's pool, and is told no more than that no such pool
// exists; the admin sees it, reads its logs and tears it down.
func TestHostilePoolOwnerOnly(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	tm.teamPool("alice", "apool")
	tm.teamPool("bob", "bpool")

	names := func(user string) []string {
		var out []string
		for _, p := range tm.poolsAs(user) {
			out = append(out, p.Name)
		}
		return out
	}
	if got := strings.Join(names("bob"), ","); got != "bpool" {
		t.Errorf("bob's pool status lists %q, want only his own bpool", got)
	}
	if got := strings.Join(names("alice"), ","); got != "apool" {
		t.Errorf("alice's pool status lists %q, want only her own apool", got)
	}
	if r := tm.mustAs("bob", "status"); strings.Contains(r.stdout, "apool") {
		t.Errorf("bob's sky status shows alice's pool:\n%s", r.stdout)
	}
	if r := tm.mustAs("bob", "jobs", "pool", "status"); strings.Contains(r.stdout, "apool") {
		t.Errorf("bob's pool status table shows alice's pool:\n%s", r.stdout)
	}

	// Every way bob may name her pool: refused as a missing pool is.
	for _, args := range [][]string{
		{"jobs", "pool", "status", "POOL"},
		{"jobs", "pool", "logs", "--controller", "--no-follow", "POOL"},
		{"jobs", "pool", "logs", "--no-follow", "POOL", "1"},
		{"jobs", "pool", "logs", "--sync-down", "POOL"},
		{"jobs", "pool", "apply", "-p", "POOL", "--workers", "3", "-y"},
		{"jobs", "pool", "down", "-y", "POOL"},
	} {
		with := func(name string) []string {
			out := make([]string, len(args))
			for i, a := range args {
				out[i] = strings.ReplaceAll(a, "POOL", name)
			}
			return out
		}
		r := tm.as("bob", with("apool")...)
		missing := tm.as("bob", with("nopool")...)
		if r.code == 0 {
			t.Errorf("bob: sky %s succeeded on alice's pool: %s", strings.Join(with("apool"), " "), r)
			continue
		}
		if missing.code == 0 {
			t.Errorf("bob: sky %s succeeded on a missing pool: %s", strings.Join(with("nopool"), " "), missing)
			continue
		}
		if got, want := r.stderr, strings.ReplaceAll(missing.stderr, "nopool", "apool"); got != want || strings.Contains(r.out(), "alice") {
			t.Errorf("bob: sky %s is refused differently from a missing pool:\n got: %s\nwant: %s", strings.Join(with("apool"), " "), got, want)
		}
	}
	// Nothing bob did touched her pool.
	if r := tm.mustAs("bob", "jobs", "pool", "down", "-a", "-y"); strings.Contains(r.out(), "apool") {
		t.Errorf("bob's pool down -a names alice's pool: %s", r)
	}
	ps := tm.poolsAs("alice")
	if len(ps) != 1 || ps[0].Name != "apool" || ps[0].Target != 1 || ps[0].ReadyWorkers != 1 || ps[0].Status != api.PoolReady {
		t.Fatalf("alice's pool after bob's attempts: %+v", ps)
	}

	// The admin reaches it.
	admin := names("admin")
	if !strings.Contains(strings.Join(admin, ","), "apool") {
		t.Errorf("the admin's pool status lists %v, want alice's apool too", admin)
	}
	tm.mustAs("admin", "jobs", "pool", "status", "apool")
	if r := tm.mustAs("admin", "jobs", "pool", "logs", "--no-follow", "apool", "1"); !strings.Contains(r.out(), "apool-1") {
		t.Errorf("the admin's worker log of alice's pool: %s", r)
	}
	if r := tm.mustAs("admin", "jobs", "pool", "down", "-y", "apool"); !strings.Contains(r.out(), "Pool 'apool' is torn down.") {
		t.Errorf("the admin's pool down of alice's pool: %s", r)
	}
	if ps := tm.poolsAs("alice"); len(ps) != 0 {
		t.Errorf("alice's pool after the admin's down: %+v", ps)
	}
}

// TestHostilePoolControllerRights: a job the admin submits to alice's
// pool is run by the controller with the rights it was admitted with,
// not checked as the admin's own cluster: it is submitted once and
// SUCCEEDS (the controller used to read "belongs to user alice" as a
// worker that does not answer, and submitted it again every minute).
func TestHostilePoolControllerRights(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	tm.teamPool("alice", "apool")
	id := tm.launchIDAs("admin", "-p", "apool", "--", "echo run >> ~/admin_runs; sleep 3")
	j := tm.waitJobAs("admin", id, 120*time.Second, "SUCCEEDED")
	if j.RecoveryCount != 0 {
		t.Errorf("the admin's job recovered %d time(s), want none: %+v", j.RecoveryCount, j)
	}
	b, err := os.ReadFile(filepath.Join(tm.nodeHome("apool-1", 0), "admin_runs"))
	if err != nil || string(b) != "run\n" {
		t.Errorf("the admin's job ran %q on alice's worker (%v), want once", b, err)
	}
	// Her own jobs go on using the worker.
	aid := tm.launchIDAs("alice", "-p", "apool", "--", "true")
	tm.waitJobAs("alice", aid, 90*time.Second, "SUCCEEDED")
}

// freezeNode stops every process of a local node (its agent daemon, its
// supervisor, its jobs), and keeps stopping any the server starts there,
// as a host that no longer runs anything would be: calls to its agent
// are accepted and never answered. thaw lets them all go on.
func (tm *team) freezeNode(cluster string) (thaw func()) {
	marker := "SKYGO_LOCAL_NODE=" + tm.nodeHome(cluster, 0) + "\x00"
	stopped := map[int]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	freeze := func() int {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procsWithEnv(marker) {
			if syscall.Kill(p.pid, syscall.SIGSTOP) == nil {
				stopped[p.pid] = true
			}
		}
		return len(stopped)
	}
	// A job the controller already calls RUNNING may still be starting
	// on the node (its agent daemon is started on demand), so wait for a
	// process of the node to appear rather than expect one at once.
	if !waitFor(30*time.Second, func() bool { return freeze() > 0 }) {
		tm.t.Fatalf("node %s has no process to stop", cluster)
	}
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
				freeze()
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		for pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
}

// TestHostilePoolCancelUnreachableWorker: `sky jobs cancel` of a pool
// job whose worker does not answer (every process of the node is
// stopped) ends CANCELLED within a bounded time; once the worker answers
// again the job's run there is ended, and the pool's next job runs.
func TestHostilePoolCancelUnreachableWorker(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	tm.teamPool("alice", "apool")
	id := tm.launchIDAs("alice", "-p", "apool", "--", "sleep 600")
	j := tm.waitJobAs("alice", id, 90*time.Second, "RUNNING")
	if j.WorkerJobID == nil {
		t.Fatalf("running pool job has no job id on its worker: %+v", j)
	}

	thaw := tm.freezeNode("apool-1")
	t.Cleanup(thaw)
	tm.mustAs("alice", "jobs", "cancel", "-y", strconv.Itoa(id))
	tm.waitJobAs("alice", id, 150*time.Second, "CANCELLED")
	thaw()

	// The run the cancel could not reach is ended once the worker answers
	// again, or with the worker, if the pool took it for lost meanwhile
	// and replaced it.
	marker := "SKYGO_LOCAL_NODE=" + tm.nodeHome("apool-1", 0) + "\x00"
	var last string
	if !waitFor(60*time.Second, func() bool {
		r := tm.as("alice", "queue", "apool-1", "-o", "json")
		if r.code != 0 && strings.Contains(r.stderr, "does not exist") {
			last = fmt.Sprintf("worker gone, processes left: %v", procsWithEnv(marker))
			return len(procsWithEnv(marker)) == 0
		}
		var q map[string][]job
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &q) != nil {
			last = r.String()
			return false
		}
		for _, x := range q["apool-1"] {
			if x.JobID == *j.WorkerJobID {
				last = x.Status
				return x.Status == "CANCELLED"
			}
		}
		last = r.stdout
		return false
	}) {
		t.Errorf("the cancelled job's run (job %d on apool-1) did not end: %s", *j.WorkerJobID, last)
	}
	next := tm.launchIDAs("alice", "-p", "apool", "--", "echo next")
	tm.waitJobAs("alice", next, 120*time.Second, "SUCCEEDED")
}
