package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/jobs"
)

// poolWorker is a row of the Pool Workers table of `sky jobs pool status`.
type poolWorker struct {
	id, version int
	status      string
}

// poolWorkers reads the workers of pool from `sky jobs pool status`: the
// table's ID and VERSION columns, and STATUS, the column before USED_BY
// (LAUNCHED and RESOURCES hold spaces, so the row is read from both ends).
func (e *skyEnv) poolWorkers(pool string) []poolWorker {
	e.t.Helper()
	r := e.must("jobs", "pool", "status", pool)
	var out []poolWorker
	inWorkers := false
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if strings.HasPrefix(line, "POOL_NAME") {
			inWorkers = true
			continue
		}
		if !inWorkers || len(f) < 5 || f[0] != pool {
			continue
		}
		id, _ := strconv.Atoi(f[1])
		v, _ := strconv.Atoi(f[2])
		out = append(out, poolWorker{id: id, version: v, status: f[len(f)-2]})
	}
	return out
}

// waitPool polls the pool's workers until ok holds.
func (e *skyEnv) waitPool(pool string, timeout time.Duration, what string, ok func([]poolWorker) bool) []poolWorker {
	e.t.Helper()
	var ws []poolWorker
	if !waitFor(timeout, func() bool { ws = e.poolWorkers(pool); return ok(ws) }) {
		e.t.Fatalf("pool %s: not %s after %s (workers: %+v)\n%s", pool, what, timeout, ws, e.serverLogTail())
	}
	return ws
}

// allReady says whether there are n workers, all READY, of version v.
func allReady(n, v int) func([]poolWorker) bool {
	return func(ws []poolWorker) bool {
		if len(ws) != n {
			return false
		}
		for _, w := range ws {
			if w.status != "READY" || w.version != v {
				return false
			}
		}
		return true
	}
}

// poolJob is the part of a `sky jobs queue -o json` record pool tests read.
type poolJob struct {
	JobID         int     `json:"job_id"`
	Status        string  `json:"status"`
	Pool          *string `json:"pool"`
	Worker        *string `json:"current_cluster_name"`
	WorkerJobID   *int    `json:"job_id_on_pool_cluster"`
	JobRank       int     `json:"job_rank"`
	NumJobs       int     `json:"num_jobs"`
	FailureReason *string `json:"failure_reason"`
	RecoveryCount int     `json:"recovery_count"`
	JobName       string  `json:"job_name"`
}

func (e *skyEnv) poolJobs() map[int]poolJob {
	e.t.Helper()
	var recs []poolJob
	e.mustJSON(&recs, "jobs", "queue", "-a", "-v", "-o", "json")
	out := map[int]poolJob{}
	for _, r := range recs {
		out[r.JobID] = r
	}
	return out
}

func (e *skyEnv) waitPoolJobs(ids []int, timeout time.Duration, want string) map[int]poolJob {
	e.t.Helper()
	var js map[int]poolJob
	ok := waitFor(timeout, func() bool {
		js = e.poolJobs()
		for _, id := range ids {
			if js[id].Status != want {
				return false
			}
		}
		return true
	})
	if !ok {
		e.t.Fatalf("jobs %v: not all %s after %s: %+v\n%s", ids, want, timeout, js, e.serverLogTail())
	}
	return js
}

func submittedIDs(t *testing.T, r result) []int {
	t.Helper()
	var ids []int
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		id, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("-o id printed %q: %s", line, r)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestManagedPool: a pool of 2 workers runs its setup once on each; an
// array of 4 jobs on it gets ranks 0-3, all SUCCEEDED on those 2 workers
// (each job checks the setup ran exactly once where it runs), and the
// workers stay UP; --workers 3 adds one; a rolling update replaces the
// workers one at a time, a new one READY before an old one goes; a
// cancelled pool job leaves its worker UP; `pool down` cancels the
// pool's running job and tears every worker down.
func TestManagedPool(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.env = append(e.env, "SKYGO_JOBS_RETRY_GAP=1s")
	poolYAML := writeFile(t, "pool.yaml", `pool:
  workers: 2
setup: |
  echo v1 >> ~/setup_marker
run: echo the pool task's run is not run
`)
	jobYAML := writeFile(t, "job.yaml", `name: pj
run: |
  echo "rank $SKYPILOT_JOB_RANK of $SKYPILOT_NUM_JOBS"
  test "$(cat ~/setup_marker)" = v1
  sleep 1
`)
	r := e.must("jobs", "pool", "apply", "-y", "-p", "mp", poolYAML)
	if !strings.Contains(r.out(), "sky jobs pool status mp") {
		t.Errorf("pool apply printed no hint: %s", r)
	}
	e.waitPool("mp", 60*time.Second, "2 READY workers", allReady(2, 1))
	for _, c := range []string{"mp-1", "mp-2"} {
		b, err := os.ReadFile(filepath.Join(e.nodeHome(c, 0), "setup_marker"))
		if err != nil || string(b) != "v1\n" {
			t.Errorf("worker %s: setup marker %q (%v), want the setup run once", c, b, err)
		}
	}

	// An array of 4 on 2 workers.
	r = e.must("jobs", "launch", "-y", "-o", "id", "-p", "mp", "--num-jobs", "4", jobYAML)
	ids := submittedIDs(t, r)
	if len(ids) != 4 {
		t.Fatalf("--num-jobs 4 submitted %v", ids)
	}
	js := e.waitPoolJobs(ids, 90*time.Second, "SUCCEEDED")
	var ranks []int
	used := map[string]bool{}
	for _, id := range ids {
		j := js[id]
		ranks = append(ranks, j.JobRank)
		if j.Pool == nil || *j.Pool != "mp" || j.Worker == nil || j.WorkerJobID == nil || j.NumJobs != 4 {
			t.Errorf("job %d: pool/worker fields %+v", id, j)
			continue
		}
		if *j.Worker != "mp-1" && *j.Worker != "mp-2" {
			t.Errorf("job %d ran on %s, not a worker of mp", id, *j.Worker)
		}
		used[*j.Worker] = true
		// The job's log on the worker is the job with that id there.
		out := e.must("logs", *j.Worker, strconv.Itoa(*j.WorkerJobID), "--no-follow").out()
		if !strings.Contains(out, fmt.Sprintf("rank %d of 4", j.JobRank)) {
			t.Errorf("job %d: worker %s job %d log lacks its rank: %s", id, *j.Worker, *j.WorkerJobID, out)
		}
	}
	sort.Ints(ranks)
	if fmt.Sprint(ranks) != "[0 1 2 3]" {
		t.Errorf("ranks %v, want [0 1 2 3]", ranks)
	}
	if len(used) != 2 {
		t.Errorf("4 jobs used workers %v, want both", used)
	}
	st := e.status(false)
	for _, c := range []string{"mp-1", "mp-2"} {
		if st[c].Status != "UP" {
			t.Errorf("worker %s is %q after its jobs ended, want UP", c, st[c].Status)
		}
	}

	// A job on a missing pool is refused at once.
	if r := e.exec(cmdTimeout, nil, "jobs", "launch", "-y", "-d", "-p", "nopool", "--", "true"); r.code == 0 || !strings.Contains(r.out(), "nopool") {
		t.Errorf("launch on a missing pool: %s", r)
	}

	// Resize.
	e.must("jobs", "pool", "apply", "-p", "mp", "--workers", "3", "-y")
	e.waitPool("mp", 60*time.Second, "3 READY workers", allReady(3, 1))

	// Rolling update of 3 workers to a new setup.
	v2 := writeFile(t, "pool2.yaml", `pool:
  workers: 3
setup: |
  echo v2 >> ~/setup_marker
`)
	r = e.must("jobs", "pool", "apply", "-y", "-p", "mp", v2)
	if !strings.Contains(r.out(), "version 2 (rolling update)") {
		t.Errorf("update output: %s", r)
	}
	ws := e.waitPool("mp", 90*time.Second, "3 READY workers of version 2", allReady(3, 2))
	for _, w := range ws {
		if w.id <= 3 {
			t.Errorf("worker %d of version 1 is still there: %+v", w.id, ws)
		}
		b, _ := os.ReadFile(filepath.Join(e.nodeHome(fmt.Sprintf("mp-%d", w.id), 0), "setup_marker"))
		if string(b) != "v2\n" {
			t.Errorf("new worker %d: setup marker %q, want v2 once", w.id, b)
		}
	}
	checkRolling(t, e, "mp")

	// Cancelling a pool job ends its job on the worker and keeps the worker.
	r = e.must("jobs", "launch", "-y", "-o", "id", "-p", "mp", "--", "sleep 300")
	long := submittedIDs(t, r)
	js = e.waitPoolJobs(long, 60*time.Second, "RUNNING")
	worker := *js[long[0]].Worker
	e.must("jobs", "cancel", "-y", strconv.Itoa(long[0]))
	e.waitPoolJobs(long, 60*time.Second, "CANCELLED")
	if s := e.status(false)[worker].Status; s != "UP" {
		t.Errorf("worker %s is %q after its job was cancelled, want UP", worker, s)
	}
	if !waitFor(30*time.Second, func() bool {
		q := e.queue(worker)[*js[long[0]].WorkerJobID]
		return q.Status == "CANCELLED"
	}) {
		t.Errorf("the cancelled job's job %d on %s did not end: %+v", *js[long[0]].WorkerJobID, worker, e.queue(worker))
	}

	// pool down cancels the pool's running job, then takes every worker.
	r = e.must("jobs", "launch", "-y", "-o", "id", "-p", "mp", "--", "sleep 300")
	last := submittedIDs(t, r)
	e.waitPoolJobs(last, 60*time.Second, "RUNNING")
	r = e.must("jobs", "pool", "down", "-y", "mp")
	if !strings.Contains(r.out(), "Pool 'mp' is torn down.") {
		t.Errorf("pool down output: %s", r)
	}
	if j := e.poolJobs()[last[0]]; j.Status != "CANCELLED" {
		t.Errorf("the pool's running job is %s after pool down, want CANCELLED", j.Status)
	}
	for name := range e.status(false) {
		if strings.HasPrefix(name, "mp-") {
			t.Errorf("worker %s survived pool down", name)
		}
	}
	if out := e.must("jobs", "pool", "status").stdout; !strings.Contains(out, "No existing pools.") {
		t.Errorf("pool status after down: %s", out)
	}
}

// checkRolling reads the pool controller log of the update: new workers
// were added one at a time (each READY before the next was added), and
// no old worker went before a new one was READY.
func checkRolling(t *testing.T, e *skyEnv, pool string) {
	t.Helper()
	raw, err := os.ReadFile(jobs.PoolControllerLogPath(e.home, pool))
	if err != nil {
		t.Fatal(err)
	}
	log := string(raw)
	i := strings.Index(log, "to version 2 (rolling update)")
	if i < 0 {
		t.Fatalf("controller log has no update:\n%s", log)
	}
	inflight, ready := 0, 0
	for _, line := range strings.Split(log[i:], "\n") {
		switch {
		case strings.Contains(line, "version 2) added"):
			inflight++
			if inflight > 1 {
				t.Errorf("two new workers launched at once in a rolling update:\n%s", log[i:])
				return
			}
		case strings.Contains(line, "is READY."):
			inflight--
			ready++
		case strings.Contains(line, "is shutting down."):
			if ready == 0 {
				t.Errorf("an old worker went before any new one was READY:\n%s", log[i:])
				return
			}
		}
	}
	if ready != 3 {
		t.Errorf("%d new workers READY in the update log, want 3:\n%s", ready, log[i:])
	}
}

// poolKillServer kill -9s the API server and waits until it is dead.
func (e *skyEnv) poolKillServer(t *testing.T) {
	t.Helper()
	pid := e.serverPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	if !waitFor(10*time.Second, func() bool { return !alive(pid) }) {
		t.Fatalf("API server pid %d alive 10s after kill -9", pid)
	}
}

// poolClusters lists the clusters in `sky status` named <pool>-*, after
// a retry while a restarted server comes up.
func (e *skyEnv) poolClusters(pool string) []string {
	e.t.Helper()
	var names []string
	for name := range e.statusAfterCrash() {
		if strings.HasPrefix(name, pool+"-") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// TestManagedPoolRecovery: a pool job whose worker is preempted recovers
// onto another worker and succeeds, and the pool replaces the worker;
// the API server killed (-9) right after jobs were submitted to the
// pool, and again right after a resize, leaves every job SUCCEEDED and
// exactly the pool's workers as clusters — none launched twice, none
// leaked.
func TestManagedPoolRecovery(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.env = append(e.env, "SKYGO_JOBS_RETRY_GAP=1s")
	poolYAML := writeFile(t, "pool.yaml", "pool:\n  workers: 2\nsetup: echo ready > ~/setup_marker\n")
	e.must("jobs", "pool", "apply", "-y", "-p", "rp", poolYAML)
	e.waitPool("rp", 60*time.Second, "2 READY workers", allReady(2, 1))

	r := e.must("jobs", "launch", "-y", "-o", "id", "-p", "rp", "--", "echo started; sleep 12; echo finished")
	id := submittedIDs(t, r)
	js := e.waitPoolJobs(id, 60*time.Second, "RUNNING")
	lost := *js[id[0]].Worker
	time.Sleep(time.Second)
	e.preemptNode(lost)
	t0 := time.Now()
	// RECOVERING lasts only until a free worker takes the job (a few
	// ms here): the move is seen in where the job runs and its count.
	var moved poolJob
	if !waitFor(30*time.Second, func() bool {
		moved = e.poolJobs()[id[0]]
		return moved.RecoveryCount == 1 && moved.Status == "RUNNING" && moved.Worker != nil && *moved.Worker != lost
	}) {
		t.Fatalf("job %d not RUNNING elsewhere 30s after %s was preempted: %+v\n%s", id[0], lost, moved, e.serverLogTail())
	}
	t.Logf("recovered onto %s %s after the preemption of %s", *moved.Worker, time.Since(t0).Round(100*time.Millisecond), lost)
	// Exit 101: the job has not finished.
	if ev := e.exec(cmdTimeout, nil, "jobs", "logs", "--controller", "--no-follow", strconv.Itoa(id[0])).stdout; !strings.Contains(ev, "is RECOVERING") {
		t.Errorf("the controller log does not show the recovery:\n%s", ev)
	}
	js = e.waitPoolJobs(id, 60*time.Second, "SUCCEEDED")
	if js[id[0]].RecoveryCount != 1 {
		t.Errorf("recovery_count %d, want 1", js[id[0]].RecoveryCount)
	}
	ws := e.waitPool("rp", 60*time.Second, "2 READY workers again", allReady(2, 1))
	for _, w := range ws {
		if fmt.Sprintf("rp-%d", w.id) == lost {
			t.Errorf("the lost worker %s is still listed: %+v", lost, ws)
		}
	}

	// kill -9 right after a submission of 3 jobs to the 2 workers.
	r = e.must("jobs", "launch", "-y", "-o", "id", "-p", "rp", "--num-jobs", "3", "--", "sleep 2; echo rank $SKYPILOT_JOB_RANK")
	ids := submittedIDs(t, r)
	time.Sleep(300 * time.Millisecond)
	e.poolKillServer(t)
	js = e.waitPoolJobs(ids, 90*time.Second, "SUCCEEDED")
	// Each job ran once: the workers hold 3 jobs of the array's name, one
	// per job, each where the job's record says.
	runs := 0
	for _, w := range e.poolWorkers("rp") {
		for _, q := range e.queue(fmt.Sprintf("rp-%d", w.id)) {
			if q.JobName == js[ids[0]].JobName {
				runs++
			}
		}
	}
	for _, id := range ids {
		if js[id].Worker == nil || js[id].WorkerJobID == nil {
			t.Errorf("job %d: no worker recorded: %+v", id, js[id])
			continue
		}
		if q, ok := e.queue(*js[id].Worker)[*js[id].WorkerJobID]; !ok || q.Status != "SUCCEEDED" {
			t.Errorf("job %d: its job %d on %s is %+v", id, *js[id].WorkerJobID, *js[id].Worker, q)
		}
	}
	if runs != 3 {
		t.Errorf("the 3 jobs ran %d times on the workers, want 3", runs)
	}

	// kill -9 right after a resize to 4.
	e.must("jobs", "pool", "apply", "-y", "-p", "rp", "--workers", "4")
	time.Sleep(200 * time.Millisecond)
	e.poolKillServer(t)
	ws = e.waitPool("rp", 90*time.Second, "4 READY workers", allReady(4, 1))
	var want []string
	for _, w := range ws {
		want = append(want, fmt.Sprintf("rp-%d", w.id))
	}
	sort.Strings(want)
	if got := e.poolClusters("rp"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("clusters %v after the crashes, want exactly the workers %v", got, want)
	}
	// kill -9 while a pool down is cancelling the pool's running job: the
	// restarted server finishes the down.
	r = e.must("jobs", "launch", "-y", "-o", "id", "-p", "rp", "--", "sleep 300")
	last := submittedIDs(t, r)
	e.waitPoolJobs(last, 60*time.Second, "RUNNING")
	e.must("jobs", "pool", "down", "-y", "--async", "rp")
	time.Sleep(300 * time.Millisecond)
	e.poolKillServer(t)
	if !waitFor(90*time.Second, func() bool {
		return strings.Contains(e.exec(cmdTimeout, nil, "jobs", "pool", "status").stdout, "No existing pools.")
	}) {
		t.Fatalf("pool rp still listed 90s after a down cut off by a kill:\n%s", e.serverLogTail())
	}
	if j := e.poolJobs()[last[0]]; j.Status != "CANCELLED" {
		t.Errorf("the pool's running job is %s after the down, want CANCELLED", j.Status)
	}
	if got := e.poolClusters("rp"); len(got) != 0 {
		t.Errorf("clusters %v survived pool down", got)
	}
}

// TestManagedPoolAutoscaleShareBlueGreen: a queue-length autoscaled pool
// starts with no worker, grows to max_workers while jobs queue, and goes
// back to none once they ended; jobs that ask for one CPU share a
// 2-CPU worker, a third waits for a free one (DETAILS says so); a job's
// own setup is ignored with a warning; a blue-green update brings all
// new workers up before an old one goes.
func TestManagedPoolAutoscaleShareBlueGreen(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	auto := writeFile(t, "auto.yaml", `pool:
  min_workers: 0
  max_workers: 2
  queue_length_threshold: 1
  upscale_delay_seconds: 0
  downscale_delay_seconds: 0
setup: echo up
`)
	e.must("jobs", "pool", "apply", "-y", "-p", "ap", auto)
	time.Sleep(6 * time.Second) // one decision from zero
	if ws := e.poolWorkers("ap"); len(ws) != 0 {
		t.Fatalf("an idle autoscaled pool with min_workers 0 has workers: %+v", ws)
	}
	// One worker at once (from zero), a second at the next decision
	// (20 s) while jobs still queue.
	r := e.must("jobs", "launch", "-y", "-o", "id", "-p", "ap", "--num-jobs", "4", "--", "sleep 15")
	ids := submittedIDs(t, r)
	e.waitPool("ap", 15*time.Second, "1 worker", func(ws []poolWorker) bool { return len(ws) == 1 })
	e.waitPool("ap", 45*time.Second, "grown to 2 workers", func(ws []poolWorker) bool { return len(ws) == 2 })
	e.waitPoolJobs(ids, 120*time.Second, "SUCCEEDED")
	e.waitPool("ap", 60*time.Second, "back to no workers", func(ws []poolWorker) bool { return len(ws) == 0 })
	e.must("jobs", "pool", "down", "-y", "ap")

	one := writeFile(t, "one.yaml", "pool:\n  workers: 1\nsetup: echo v1 > ~/version\n")
	e.must("jobs", "pool", "apply", "-y", "-p", "sp", one)
	e.waitPool("sp", 60*time.Second, "1 READY worker", allReady(1, 1))
	job := writeFile(t, "cpu1.yaml", "resources:\n  cpus: 1\nsetup: echo never\nrun: sleep 6\n")
	r = e.must("jobs", "launch", "-y", "-o", "id", "-p", "sp", "--num-jobs", "3", job)
	if !strings.Contains(r.out(), "Warning: the setup of task 0 is ignored on pool sp") {
		t.Errorf("no warning that the job's setup is ignored: %s", r)
	}
	ids = submittedIDs(t, r)
	var js map[int]poolJob
	if !waitFor(30*time.Second, func() bool {
		js = e.poolJobs()
		n := 0
		for _, id := range ids {
			if js[id].Status == "RUNNING" {
				n++
			}
		}
		return n == 2
	}) {
		t.Fatalf("two 1-CPU jobs did not run side by side on the 2-CPU worker: %+v", js)
	}
	var waiting []struct {
		JobID   int     `json:"job_id"`
		Status  string  `json:"status"`
		Details *string `json:"details"`
	}
	// The pool's controller marks the third job as waiting for a worker
	// on its own pass, which may come a moment after the other two run.
	found := waitFor(30*time.Second, func() bool {
		e.mustJSON(&waiting, "jobs", "queue", "-v", "-o", "json")
		for _, w := range waiting {
			if w.Status == "PENDING" && w.Details != nil && strings.Contains(*w.Details, "Waiting for a free worker of pool sp") {
				return true
			}
		}
		return false
	})
	if !found {
		t.Errorf("the third job is not shown waiting for a worker: %+v", waiting)
	}
	e.waitPoolJobs(ids, 90*time.Second, "SUCCEEDED")
	for _, id := range ids {
		if w := e.poolJobs()[id].Worker; w == nil || *w != "sp-1" {
			t.Errorf("job %d ran on %v, want sp-1", id, w)
		}
	}

	two := writeFile(t, "two.yaml", "pool:\n  workers: 2\nsetup: echo v2 > ~/version\n")
	r = e.must("jobs", "pool", "apply", "-y", "-p", "sp", "--mode", "blue_green", two)
	if !strings.Contains(r.out(), "(blue_green update)") {
		t.Errorf("update output: %s", r)
	}
	e.waitPool("sp", 60*time.Second, "2 READY workers of version 2", allReady(2, 2))
	raw, err := os.ReadFile(jobs.PoolControllerLogPath(e.home, "sp"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(raw)
	log = log[strings.Index(log, "blue_green update"):]
	ready, goneEarly := 0, false
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "is READY.") {
			ready++
		}
		if strings.Contains(line, "Worker 1 is shutting down.") && ready < 2 {
			goneEarly = true
		}
	}
	if goneEarly || ready != 2 || !strings.Contains(log, "Worker 1 is shutting down.") {
		t.Errorf("blue-green: the old worker must go after both new ones are READY:\n%s", log)
	}
	e.must("jobs", "pool", "down", "-y", "sp")

	// A cluster that only has a worker's name is not the pool's: it is
	// neither used nor torn down.
	e.must("launch", "-y", "-c", "cx-1", "--", "echo mine")
	e.must("jobs", "pool", "apply", "-y", "-p", "cx", one)
	if !waitFor(30*time.Second, func() bool {
		return strings.Contains(e.must("jobs", "pool", "status", "-a", "-v", "cx").stdout, "FAILED_PROVISION")
	}) {
		t.Fatalf("pool cx over the user's cluster cx-1: %s", e.must("jobs", "pool", "status", "-a", "-v", "cx"))
	}
	if out := e.must("jobs", "pool", "status", "-a", "-v", "cx").stdout; !strings.Contains(out, "already exists and is not a worker of pool cx") {
		t.Errorf("the failed worker does not say why: %s", out)
	}
	e.must("jobs", "pool", "down", "-y", "cx")
	if s := e.status(false)["cx-1"].Status; s != "UP" {
		t.Errorf("the user's cluster cx-1 is %q after pool cx went, want UP", s)
	}
	e.must("down", "-y", "cx-1")
}

// TestManagedPoolSetupFails: a worker whose setup fails is FAILED with
// why, its cluster is torn down by its own step (the member controller's
// clean-up, not the watch that saw the setup end), the pool is FAILED
// and launches no other worker of the broken version; `pool down` then
// removes the pool, failed worker and all.
func TestManagedPoolSetupFails(t *testing.T) {
	e := managedEnv(t)
	y := writeFile(t, "pool.yaml", "pool:\n  workers: 1\nsetup: echo broken; exit 3\n")
	e.must("jobs", "pool", "apply", "-y", "-p", "sf", y)
	var out string
	if !waitFor(60*time.Second, func() bool {
		out = e.must("jobs", "pool", "status", "-a", "-v", "sf").stdout
		return strings.Contains(out, "setup ended FAILED")
	}) {
		t.Fatalf("no FAILED worker:\n%s\n%s", out, e.serverLogTail())
	}
	if !waitFor(30*time.Second, func() bool { _, up := e.status(false)["sf-1"]; return !up }) {
		t.Errorf("the failed worker's cluster sf-1 is still there: %+v", e.status(false)["sf-1"])
	}
	out = e.must("jobs", "pool", "status", "-a", "-v", "sf").stdout
	if f := strings.Fields(strings.Split(out, "\n")[2]); !strings.Contains(out, "setup ended FAILED_SETUP; see sky jobs pool logs sf 1") || len(f) < 4 || f[3] != "FAILED" {
		t.Errorf("the failed worker does not say why, or the pool is not FAILED:\n%s", out)
	}
	if log := e.must("jobs", "pool", "logs", "--no-follow", "sf", "1").stdout; !strings.Contains(log, "broken") || !strings.Contains(log, "Worker cluster sf-1 torn down.") {
		t.Errorf("worker log: want the setup's output and its cluster's teardown:\n%s", log)
	}
	// The version is broken: no other worker is launched.
	if out = e.must("jobs", "pool", "status", "-a", "sf").stdout; strings.Contains(out, "sf         2") {
		t.Errorf("another worker was launched after the failure:\n%s", out)
	}
	if r := e.must("jobs", "pool", "down", "-y", "sf"); !strings.Contains(r.out(), "Pool 'sf' is torn down.") {
		t.Errorf("pool down: %s", r)
	}
	if r := e.exec(cmdTimeout, nil, "jobs", "pool", "status", "sf"); r.code == 0 {
		t.Errorf("pool sf still listed after down: %s", r)
	}
}

// TestManagedPoolServerKilled: the API server, which runs the pool and
// worker controllers, is killed -9 while a pool's workers launch and
// run their setup, and again while the pool goes down. Each next
// command starts a new server, whose controllers take every step again
// or find it taken: the pool ends with its two workers READY, each
// having run its setup once (a cut-off launch's setup job is adopted,
// not submitted again), no other cluster made; and after the down no
// cluster is left.
func TestManagedPoolServerKilled(t *testing.T) {
	e := managedEnv(t)
	y := writeFile(t, "pool.yaml", "pool:\n  workers: 2\nsetup: sleep 2; echo once >> ~/setup_marker\n")
	e.must("jobs", "pool", "apply", "-y", "-p", "kp", y)
	for _, after := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond} {
		time.Sleep(after)
		if !e.killServer(t) {
			t.Logf("no server to kill after %s", after)
		}
		e.poolWorkers("kp") // starts a new server
	}
	e.waitPool("kp", 90*time.Second, "2 READY workers", allReady(2, 1))
	clusters := e.status(false)
	for name := range clusters {
		if name != "kp-1" && name != "kp-2" {
			t.Errorf("cluster %s made beside the workers: %+v", name, clusters)
		}
	}
	for _, w := range []string{"kp-1", "kp-2"} {
		if b, _ := os.ReadFile(filepath.Join(e.nodeHome(w, 0), "setup_marker")); string(b) != "once\n" {
			t.Errorf("worker %s: setup marker %q, want its setup run once", w, b)
		}
	}
	// The down is recorded, then the server dies under it: the next
	// server's controllers finish it. A job running on each worker keeps
	// the down in its first step (the pool's jobs are cancelled, then
	// waited for) long enough to be seen: without them, tearing two local
	// workers down can take less than one poll.
	r := e.must("jobs", "launch", "-y", "-o", "id", "-p", "kp", "--num-jobs", "2", "--", "sleep 300")
	running := submittedIDs(t, r)
	e.waitPoolJobs(running, 60*time.Second, "RUNNING")
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.exec(cmdTimeout, nil, "jobs", "pool", "down", "-y", "kp")
	}()
	if !waitFor(30*time.Second, func() bool {
		r := e.exec(cmdTimeout, nil, "jobs", "pool", "status", "kp")
		if r.code != 0 {
			t.Fatalf("pool kp gone before it was seen going down: %s\n%s", r, e.serverLogTail())
		}
		return strings.Contains(r.stdout, "SHUTTING_DOWN")
	}) {
		t.Fatalf("pool kp not going down:\n%s", e.serverLogTail())
	}
	e.killServer(t)
	<-done
	if !waitFor(90*time.Second, func() bool {
		return e.exec(cmdTimeout, nil, "jobs", "pool", "status", "kp").code != 0 && len(e.status(false)) == 0
	}) {
		t.Fatalf("pool kp or its clusters still there after down: %+v\n%s", e.status(false), e.serverLogTail())
	}
	js := e.poolJobs()
	for _, id := range running {
		if js[id].Status != "CANCELLED" {
			t.Errorf("job %d of the pool is %q after the pool went down, want CANCELLED", id, js[id].Status)
		}
	}
}
