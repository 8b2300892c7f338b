package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/replicaset"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

// Pools: sets of worker clusters kept UP for managed jobs (`sky jobs
// launch --pool`). Two reconcilers on the controller runner look after
// them, and their only state is the pools table:
//
//   - the pool controller (one key per pool) decides how many workers of
//     which version the pool should have — the fixed count or the
//     queue-length autoscaler's target, and during an update the rolling
//     or blue-green swap — and records new workers PENDING and the ones to
//     go SHUTTING_DOWN; on `pool down` it cancels the pool's jobs, then
//     tears every worker down and removes the pool;
//   - the worker controller (one key per worker, "<pool>/<id>") brings a
//     worker up (backend.Launch of cluster <pool>-<id> with the pool
//     task's setup and file mounts, its setup job tagged so a cut-off
//     launch is found), marks it READY when the setup succeeded, watches a
//     READY worker's cluster, and tears down a worker that must go.
//
// Worker names are deterministic and every move is one conditional
// update of the pool's row, so a reconcile killed anywhere and run again
// finds the cluster and the setup job it made.

// poolCtl holds the pool controllers of an Env.
type poolCtl struct {
	pools   *controller.Controller
	workers *controller.Controller
	mu      sync.Mutex
}

// poolControllers builds the pool and worker controllers.
func (e *Env) poolControllers(m *controller.Metrics, log *slog.Logger) []*controller.Controller {
	e.pool.mu.Lock()
	defer e.pool.mu.Unlock()
	e.pool.pools = controller.New(controller.ReconcilerFunc(e.reconcilePool), controller.Options{
		Name: "pools", Workers: 8, Logger: log, Metrics: m, Timeout: 10 * time.Minute,
		BaseBackoff: time.Second, MaxBackoff: 30 * time.Second,
		Resync: e.poolKeys, ResyncEvery: e.timings().ResyncEvery,
	})
	e.pool.workers = controller.New(controller.ReconcilerFunc(e.reconcileWorker), controller.Options{
		Name: "pool-workers", Workers: 32, Logger: log, Metrics: m, Timeout: 30 * time.Minute,
		BaseBackoff: time.Second, MaxBackoff: 30 * time.Second,
		Resync: e.workerKeys, ResyncEvery: e.timings().ResyncEvery,
	})
	return []*controller.Controller{e.pool.pools, e.pool.workers}
}

func (e *Env) pokePool(name string) {
	e.pool.mu.Lock()
	c := e.pool.pools
	e.pool.mu.Unlock()
	if c != nil {
		c.Enqueue(name)
	}
}

func (e *Env) pokeWorker(pool string, id int) {
	e.pool.mu.Lock()
	c := e.pool.workers
	e.pool.mu.Unlock()
	if c != nil {
		c.Enqueue(replicaset.Key(pool, id))
	}
}

func (e *Env) poolKeys(ctx context.Context) ([]string, error) {
	ps, err := e.Store.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.Name
	}
	return keys, nil
}

func (e *Env) workerKeys(ctx context.Context) ([]string, error) {
	ps, err := e.Store.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, p := range ps {
		for _, w := range p.Workers {
			keys = append(keys, replicaset.Key(p.Name, w.ID))
		}
	}
	return keys, nil
}

// workerCluster is worker id's cluster: <pool>-<id>.
func workerCluster(pool string, id int) string { return fmt.Sprintf("%s-%d", pool, id) }

// workerCommand is the creation command recorded on a pool's worker
// clusters, by which the pool tells its own from a cluster that only
// has a worker's name.
func workerCommand(pool string) string { return "sky jobs pool apply -p " + pool }

// workerTag tags a worker's setup job.
func workerTag(pool string, id, attempt int) string {
	return fmt.Sprintf("pool/%s/%d/%d", pool, id, attempt)
}

// PoolControllerLogPath is `sky jobs pool logs --controller`'s file.
func PoolControllerLogPath(home, pool string) string {
	return filepath.Join(home, "sky_logs", "pool_controller", pool+".log")
}

// WorkerLogPath is a worker's launch and setup log.
func WorkerLogPath(home, pool string, id int) string {
	return filepath.Join(home, "sky_logs", "pools", pool, fmt.Sprintf("worker-%d.log", id))
}

// poolFilesDir holds a pool version's own copy of its uploaded files.
func poolFilesDir(home, pool string, version int) string {
	return filepath.Join(paths.ServerDir(home), "pools", pool, "v"+strconv.Itoa(version))
}

// poolNote writes one timestamped line to a pool's controller log.
func (e *Env) poolNote(pool, format string, args ...any) {
	ux.Note(PoolControllerLogPath(e.Home, pool), format, args...)
}

func poolOwner(p *state.Pool) backend.User {
	return backend.User{Name: p.UserName, Hash: p.UserHash}
}

// activeWorker says whether a worker counts toward the pool's size.
func activeWorker(s string) bool { return replicaset.PhaseOf(s).Live() }

// poolStatus derives a pool's status from its workers (service.md).
func poolStatus(p *state.Pool) string {
	if p.Down != nil {
		return api.PoolShuttingDown
	}
	failed, live := false, 0
	for _, w := range p.Workers {
		switch {
		case w.Status == api.WorkerReady:
			return api.PoolReady
		case api.ReplicaFailedStatus(w.Status):
			failed = true
		case activeWorker(w.Status):
			live++
		}
	}
	switch {
	case failed:
		return api.PoolFailed
	case live == 0:
		return api.PoolNoReplica
	}
	return api.PoolReplicaInit
}

// poolJobs lists the pool's jobs that have not ended.
func (e *Env) poolJobs(ctx context.Context, pool string) ([]*state.ManagedJob, error) {
	return e.Store.ListManagedJobs(ctx, state.ManagedFilter{Pool: pool, NotDone: true})
}

// busyWorkers counts, per worker cluster, the pool's jobs on it that have
// not ended, and how many of the pool's jobs wait for a worker.
func busyWorkers(jobs []*state.ManagedJob) (busy map[string][]int, queued int) {
	busy = map[string][]int{}
	for _, j := range jobs {
		for _, t := range j.Tasks {
			if api.ManagedTerminal(t.Status) {
				continue
			}
			if t.ClusterName != "" && !t.ClusterGone {
				busy[t.ClusterName] = append(busy[t.ClusterName], j.JobID)
			} else if t.Status == api.ManagedPending || t.Status == api.ManagedRecovering {
				queued++
			}
			break
		}
	}
	return busy, queued
}

// reconcilePool takes the next step of one pool.
func (e *Env) reconcilePool(ctx context.Context, name string) (controller.Result, error) {
	p, err := e.Store.GetPool(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if p.Down != nil {
		return e.poolDownSteps(ctx, p)
	}
	// Under the assignment lock: a worker with a job being assigned to
	// it is seen busy, and one picked to go is not assigned.
	unlock, err := e.lockPool(ctx, name)
	if err != nil {
		return controller.Result{}, err
	}
	defer unlock()
	jobs, err := e.poolJobs(ctx, name)
	if err != nil {
		return controller.Result{}, err
	}
	busy, queued := busyWorkers(jobs)
	tm := e.timings()
	t0 := e.now()
	var added, removed, dropped []int
	p, err = e.Store.UpdatePool(ctx, name, func(n *state.Pool) error {
		if n.Down != nil {
			return state.ErrNoChange
		}
		changed := decideTarget(n, queued, t0, tm)
		add, remove := planWorkers(n, busyCounts(n, busy))
		added, removed, dropped = nil, nil, nil
		for range add {
			n.NextWorkerID++
			id := n.NextWorkerID
			n.Workers = append(n.Workers, &state.PoolWorker{ID: id, SpecVersion: n.SpecVersion, Status: api.WorkerPending,
				Cluster: workerCluster(n.Name, id), CreatedAt: t0})
			added = append(added, id)
		}
		for _, id := range remove {
			n.Worker(id).Status = api.WorkerShuttingDown
			removed = append(removed, id)
		}
		// Failed workers of older versions have said what they had to:
		// a newer version replaces them (their clusters are gone).
		// Versions no worker runs any more are dropped, the newest kept.
		ls := make([]replicaset.Listed, len(n.Workers))
		for i, w := range n.Workers {
			ls[i] = replicaset.Listed{ID: w.ID, Version: w.SpecVersion, Status: w.Status, CleanedUp: w.CleanedUp}
		}
		var gone []int
		gone, dropped = replicaset.Prune(ls, n.SpecVersion, slices.Collect(maps.Keys(n.Specs)), replicaset.NoLimit)
		n.Workers = slices.DeleteFunc(n.Workers, func(w *state.PoolWorker) bool { return slices.Contains(gone, w.ID) })
		for _, v := range dropped {
			delete(n.Specs, v)
		}
		changed = changed || len(gone)+len(dropped) > 0
		if len(added) == 0 && len(removed) == 0 && !changed {
			return state.ErrNoChange
		}
		return nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	for _, id := range added {
		e.poolNote(name, "Worker %d (cluster %s, version %d) added; the pool wants %d.", id, workerCluster(name, id), p.SpecVersion, p.Target)
	}
	for _, id := range removed {
		e.poolNote(name, "Worker %d is shutting down.", id)
	}
	for _, v := range dropped {
		// No worker runs the version any more: its copy of the upload goes.
		_ = os.RemoveAll(poolFilesDir(e.Home, name, v))
	}
	for _, w := range p.Workers {
		e.pokeWorker(name, w.ID)
	}
	return controller.Result{RequeueAfter: min(tm.poolDecideEvery(p.Target), tm.ResyncEvery)}, nil
}

// busyCounts maps worker ids to the number of jobs on them.
func busyCounts(p *state.Pool, busy map[string][]int) map[int]int {
	out := map[int]int{}
	for _, w := range p.Workers {
		out[w.ID] = len(busy[w.Cluster])
	}
	return out
}

// poolDecideEvery is the pool autoscaler's decision interval at a
// target: PoolDecideFromZero while it is 0 (a pool scaled to zero comes
// back faster), else PoolDecideEvery.
func (t Timings) poolDecideEvery(target int) time.Duration {
	if target == 0 {
		return t.PoolDecideFromZero
	}
	return t.PoolDecideEvery
}

// decideTarget sets the pool's target at time t (unix seconds): the
// fixed worker count, or the queue-length autoscaler's decision when one
// is due (service.md §Autoscaler facts), tm giving the intervals (with
// defaults). It says whether the record changed.
func decideTarget(p *state.Pool, queued int, t float64, tm Timings) bool {
	tm = tm.withDefaults()
	spec := p.Specs[p.SpecVersion]
	if spec == nil {
		return false
	}
	pol := spec.Policy
	if !pol.Autoscaling() {
		want := pol.Min()
		if p.Target == want {
			return false
		}
		p.Target = want
		return true
	}
	if p.LastDecisionAt > 0 && t-p.LastDecisionAt < tm.poolDecideEvery(p.Target).Seconds() {
		return false
	}
	p.LastDecisionAt = t
	p.Target, p.UpCount, p.DownCount = autoscale(pol, p.Target, queued, p.UpCount, p.DownCount, tm.PoolDecideEvery)
	return true
}

// autoscale is one decision of the queue-length autoscaler: no queue
// wants no workers (but never none while jobs wait), a queue above the
// threshold one more, below it one fewer; clipped to [min, max]. The
// move is taken after more than int(delay / every) consecutive
// decisions wanting it (every: the decision interval, 20 s), at once
// from a target of 0.
func autoscale(pol api.PoolPolicy, cur, queued, up, down int, every time.Duration) (target, upCount, downCount int) {
	thr := max(pol.QueueLengthThreshold, 1)
	raw := cur
	switch {
	case queued == 0:
		raw = 0
	case queued > thr:
		raw = cur + 1
	case queued < thr:
		raw = cur - 1
	}
	if queued > 0 {
		raw = max(raw, 1)
	}
	raw = min(max(raw, pol.Min()), pol.Max())
	if cur == 0 {
		return raw, 0, 0
	}
	decide := every.Seconds()
	switch {
	case raw > cur:
		up++
		if up > int(pol.UpscaleDelaySeconds/decide) {
			return raw, 0, 0
		}
		return cur, up, 0
	case raw < cur:
		down++
		if down > int(pol.DownscaleDelaySeconds/decide) {
			return raw, 0, 0
		}
		return cur, 0, down
	}
	return cur, 0, 0
}

// planWorkers decides which workers to add (how many, of the newest
// version) and which to shut down, given the jobs on each: the replica
// set's plan (replicaset.Decide) with no cap, one new worker at a time
// in a rolling update, and busy workers kept. A busy old-version worker
// is replaced once its jobs ended, and new jobs go to the newest
// version's workers.
//
// If a worker of the newest version failed its setup and none is READY,
// nothing more is launched (the update is broken; another apply fixes it).
func planWorkers(p *state.Pool, busy map[int]int) (add int, remove []int) {
	in := replicaset.Input{Latest: p.SpecVersion, Target: p.Target, Mode: replicaset.ModeOf(p.UpdateMode),
		Cap: replicaset.NoCap, MaxStarting: 1}
	failedLatest, newReady := false, 0
	for _, w := range p.Workers {
		ph := replicaset.PhaseOf(w.Status)
		in.Members = append(in.Members, replicaset.Member{ID: w.ID, Version: w.SpecVersion, Phase: ph, Busy: busy[w.ID]})
		if w.SpecVersion == p.SpecVersion {
			failedLatest = failedLatest || api.ReplicaFailedStatus(w.Status)
			if ph == replicaset.Ready {
				newReady++
			}
		}
	}
	in.Broken = failedLatest && newReady == 0
	pl := replicaset.Decide(in)
	return pl.Launch, pl.Remove
}

// poolDownSteps carries out `pool down`: the pool's jobs are cancelled
// and waited for (at most Timings.PoolDownJobsWait), then every worker is
// retired and torn down by its controller, then the pool is removed.
func (e *Env) poolDownSteps(ctx context.Context, p *state.Pool) (controller.Result, error) {
	jobs, err := e.poolJobs(ctx, p.Name)
	if err != nil {
		return controller.Result{}, err
	}
	if p.Down.JobsCancelledAt == 0 {
		for _, j := range jobs {
			if j.Cancel == nil {
				if err := e.requestCancel(ctx, j.JobID, state.ManagedCancel{At: e.now(), By: p.Down.By,
					Reason: fmt.Sprintf("its pool %s is being torn down", p.Name)}); err != nil {
					return controller.Result{}, err
				}
			}
		}
		if p, err = e.Store.UpdatePool(ctx, p.Name, func(n *state.Pool) error {
			if n.Down == nil || n.Down.JobsCancelledAt != 0 {
				return state.ErrNoChange
			}
			n.Down.JobsCancelledAt = e.now()
			return nil
		}); err != nil {
			return controller.Result{}, err
		}
		e.poolNote(p.Name, "Pool down: %d job(s) of the pool asked to cancel.", len(jobs))
	}
	if len(jobs) > 0 && e.now()-p.Down.JobsCancelledAt < e.timings().PoolDownJobsWait.Seconds() {
		return controller.Result{RequeueAfter: 2 * time.Second}, nil
	}
	// Every worker goes through its own controller (replicaset.Step:
	// drop), as a retired one does; the pool goes once none is left.
	p, err = e.Store.UpdatePool(ctx, p.Name, func(n *state.Pool) error {
		changed := false
		for _, w := range n.Workers {
			if replicaset.Retiring(w.Status, w.CleanedUp) {
				w.Status, changed = api.WorkerShuttingDown, true
			}
		}
		if !changed {
			return state.ErrNoChange
		}
		return nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	pending := 0
	for _, w := range p.Workers {
		if w.Status == api.WorkerShuttingDown {
			pending++
			e.pokeWorker(p.Name, w.ID)
		}
	}
	if pending > 0 {
		return controller.Result{RequeueAfter: 500 * time.Millisecond}, nil
	}
	if err := e.Store.DeletePool(ctx, p.Name, p.Version); err != nil {
		if errors.Is(err, state.ErrConflict) {
			return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
		return controller.Result{}, err
	}
	_ = os.RemoveAll(filepath.Join(paths.ServerDir(e.Home), "pools", p.Name))
	e.poolNote(p.Name, "Pool %s torn down.", p.Name)
	return controller.Result{}, nil
}

// downWorkerCluster tears a worker's cluster down if it exists.
func (e *Env) downWorkerCluster(ctx context.Context, p *state.Pool, cluster string, log io.Writer) error {
	return e.Backend.DownIfExists(ctx, cluster, poolOwner(p), "worker", log)
}

// reconcileWorker takes the next step of one worker (replicaset.Step).
func (e *Env) reconcileWorker(ctx context.Context, key string) (controller.Result, error) {
	return replicaset.Reconcile(ctx, key, func(ctx context.Context, name string, id int) (replicaset.Members, *replicaset.Stepped, error) {
		p, err := e.Store.GetPool(ctx, name)
		if errors.Is(err, state.ErrNotFound) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		w := p.Worker(id)
		if w == nil || (p.Down != nil && w.Status != api.WorkerShuttingDown) {
			return nil, nil, nil // the pool's down steps retire it first
		}
		return e.workerSet(p), &replicaset.Stepped{ID: id, Status: w.Status, Cluster: w.Cluster, CleanedUp: w.CleanedUp,
			Force: p.Down != nil && p.Down.Purge}, nil
	})
}

// setWorker applies edit to worker id if it is still in one of the from
// statuses; it returns the worker as written (nil when gone or moved).
func (e *Env) setWorker(ctx context.Context, pool string, id int, from []string, edit func(w *state.PoolWorker)) (*state.Pool, *state.PoolWorker, error) {
	moved := false
	p, err := e.Store.UpdatePool(ctx, pool, func(n *state.Pool) error {
		w := n.Worker(id)
		moved = w == nil || n.Down != nil || !slices.Contains(from, w.Status)
		if moved {
			return state.ErrNoChange
		}
		edit(w)
		return nil
	})
	if err != nil || moved {
		return p, nil, err
	}
	return p, p.Worker(id), nil
}

// workers is a pool's workers as the replica-set lifecycle moves them
// (replicaset.Set); row is the pool as last read or written.
type workers struct {
	e   *Env
	row *state.Pool
}

func (e *Env) workerSet(p *state.Pool) *workers { return &workers{e: e, row: p} }

func (x *workers) Noun() string { return "Worker" }

// Move refuses, as setWorker does, once the pool is going down: its down
// steps own the workers then.
func (x *workers) Move(ctx context.Context, id int, from []string, edit func(*replicaset.Fields)) (bool, error) {
	p, w, err := x.e.setWorker(ctx, x.row.Name, id, from, func(w *state.PoolWorker) {
		f := workerFields(w)
		edit(&f)
		w.Status, w.Reason, w.Attempt, w.Tries, w.NextTryAt = f.Status, f.Reason, f.Attempt, f.Tries, f.NextTryAt
		w.CleanedUp = f.CleanedUp
		if f.Disowned {
			// The cluster of that name is not the worker's: no job is
			// matched to it and the worker never tears it down.
			w.Cluster = ""
		}
	})
	if p != nil {
		x.row = p
	}
	return w != nil, err
}

func (x *workers) Remove(ctx context.Context, id int, from []string) error {
	if _, err := x.e.Store.UpdatePool(ctx, x.row.Name, func(n *state.Pool) error {
		for i, w := range n.Workers {
			if w.ID == id && slices.Contains(from, w.Status) {
				n.Workers = append(n.Workers[:i], n.Workers[i+1:]...)
				return nil
			}
		}
		return state.ErrNoChange
	}); err != nil {
		return err
	}
	_ = os.Remove(WorkerLogPath(x.e.Home, x.row.Name, id))
	return nil
}

func (x *workers) Down(ctx context.Context, id int, cluster string) error {
	log := ux.AppendLog(WorkerLogPath(x.e.Home, x.row.Name, id))
	defer log.Close()
	return x.e.downWorkerCluster(ctx, x.row, cluster, log)
}

func (x *workers) Note(format string, args ...any) { x.e.poolNote(x.row.Name, format, args...) }

func (x *workers) Poke() { x.e.pokePool(x.row.Name) }

func (x *workers) Launch(ctx context.Context, id int) (controller.Result, error) {
	return x.e.launchWorker(ctx, x.row, x.row.Worker(id))
}

func (x *workers) Watch(ctx context.Context, id int) (controller.Result, error) {
	if w := x.row.Worker(id); w.Status == api.WorkerStarting {
		return x.e.watchSetup(ctx, x.row, w)
	}
	return x.e.watchWorker(ctx, x.row, x.row.Worker(id))
}

// Drain lets a worker go at once: the pool controller retires only
// workers with no job on them, under the assignment lock.
func (x *workers) Drain(context.Context, int) time.Duration { return 0 }

func (x *workers) CleanUp(ctx context.Context, id int) (controller.Result, error) {
	w := x.row.Worker(id)
	return replicaset.CleanUp(ctx, x, id, w.Status, w.Cluster)
}

// workerFields are a worker's lifecycle fields.
func workerFields(w *state.PoolWorker) replicaset.Fields {
	return replicaset.Fields{Status: w.Status, Reason: w.Reason, Attempt: w.Attempt, Tries: w.Tries, NextTryAt: w.NextTryAt, CleanedUp: w.CleanedUp}
}

// launchWorker runs one launch attempt of a worker: adopt the setup job
// a cut-off attempt left, or launch the cluster with the pool task's
// setup and file mounts (run once per worker: the launch's job is the
// setup alone).
func (e *Env) launchWorker(ctx context.Context, p *state.Pool, w *state.PoolWorker) (controller.Result, error) {
	set := e.workerSet(p)
	if res, ok, err := replicaset.Begin(ctx, set, w.ID, workerFields(w), e.now()); !ok {
		return res, err
	}
	p = set.row
	w = p.Worker(w.ID)
	spec := p.Specs[w.SpecVersion]
	if spec == nil {
		return replicaset.Retire(ctx, set, w.ID, api.WorkerProvisioning, "its pool version is gone")
	}
	log := ux.AppendLog(WorkerLogPath(e.Home, p.Name, w.ID))
	defer log.Close()
	ts := spec.Task
	ts.Envs = cloneMap(ts.Envs)
	ts.Envs["SKYPILOT_POOL_WORKER_ID"] = strconv.Itoa(w.ID)
	ts.Envs["SKYPILOT_SERVE_REPLICA_ID"] = strconv.Itoa(w.ID)
	ts.Run = "" // a worker runs the jobs given it, not the pool task's run
	a := replicaset.Attempt{ID: w.ID, Attempt: w.Attempt, Job: "setup job", Log: log,
		Body: api.LaunchBody{Task: ts, ClusterName: w.Cluster, Detach: true, Workspace: p.Workspace, PlanShown: true,
			Command: workerCommand(p.Name),
			Managed: &api.ManagedLaunch{Tag: workerTag(p.Name, w.ID, w.Attempt), TaskID: fmt.Sprintf("sky-pool-%s-%d-%d", p.Name, w.ID, w.Attempt)}},
		// Not a worker this pool made (a user's cluster, a managed job's
		// <name>-<id>): it is neither adopted nor ever torn down.
		Foreign:  fmt.Sprintf("a cluster named %s already exists and is not a worker of pool %s; tear it down or give the pool another name", w.Cluster, p.Name),
		Announce: fmt.Sprintf("Launching worker %d of pool %s (version %d, attempt %d) on cluster %s.", w.ID, p.Name, w.SpecVersion, w.Attempt, w.Cluster)}
	return replicaset.Launch(ctx, set, e.poolCloud(p), a, func(jobID int) (controller.Result, error) {
		return e.setupSubmitted(ctx, p, w, jobID)
	}, e.retryGap, e.now)
}

// setupSubmitted records a worker's setup job (0: no setup: READY now).
func (e *Env) setupSubmitted(ctx context.Context, p *state.Pool, w *state.PoolWorker, jobID int) (controller.Result, error) {
	infra, res := e.clusterInfo(ctx, w.Cluster)
	var np *state.Pool
	var nw *state.PoolWorker
	took, next, err := replicaset.Launched(ctx, e.workerSet(p), w.ID, w.Cluster, func() (bool, bool, error) {
		var err error
		np, nw, err = e.setWorker(ctx, p.Name, w.ID, []string{api.WorkerProvisioning}, func(w *state.PoolWorker) {
			w.SetupJobID, w.Status, w.Tries, w.NextTryAt, w.Reason = jobID, api.WorkerStarting, 0, 0, ""
			w.LaunchedAt, w.Infra, w.Resources = e.now(), infra, res
		})
		return nw != nil, np != nil && np.Worker(w.ID) == nil, err
	})
	if !took {
		return next, err
	}
	return e.watchSetup(ctx, np, nw)
}

// clusterInfo is a cluster's infra and resources strings.
func (e *Env) clusterInfo(ctx context.Context, name string) (infra, res string) {
	c, err := e.Store.GetCluster(ctx, name)
	if err != nil {
		return "", ""
	}
	h, err := backend.HandleOf(c)
	if err != nil {
		return "", ""
	}
	return h.Infra, backend.ClusterResources(c.NumNodes, h)
}

// watchSetup follows a worker's setup job to its end (replicaset.Watch:
// a worker whose cluster or job went is PREEMPTED, and launched again):
// READY when it succeeded, FAILED when it failed.
func (e *Env) watchSetup(ctx context.Context, p *state.Pool, w *state.PoolWorker) (controller.Result, error) {
	if w.SetupJobID == 0 {
		return e.setupEnded(ctx, p, w, agentapi.StatusSucceeded)
	}
	wd := replicaset.Watched{ID: w.ID, Status: api.WorkerStarting, Cluster: w.Cluster, JobID: w.SetupJobID,
		Every: time.Second, LostWhy: "its cluster was lost during setup"}
	return replicaset.Watch(ctx, e.workerSet(p), e.poolCloud(p), wd, func(seen replicaset.Verdict, job *agentapi.Job) (controller.Result, error) {
		if seen != replicaset.JobEnded {
			return controller.Result{RequeueAfter: 300 * time.Millisecond}, nil
		}
		log := ux.AppendLog(WorkerLogPath(e.Home, p.Name, w.ID))
		fmt.Fprintf(log, "Setup job %d ended %s. Its log:\n", w.SetupJobID, job.Status)
		_ = e.Backend.CopyJobLog(ctx, w.Cluster, poolOwner(p), w.SetupJobID, 0, false, log)
		log.Close()
		return e.setupEnded(ctx, p, w, job.Status)
	})
}

// setupEnded makes a worker whose setup ended READY, or FAILED when the
// setup did not succeed (its next step tears its cluster down).
func (e *Env) setupEnded(ctx context.Context, p *state.Pool, w *state.PoolWorker, status agentapi.Status) (controller.Result, error) {
	next, reason := api.WorkerReady, ""
	if status != agentapi.StatusSucceeded {
		next, reason = api.WorkerFailed, fmt.Sprintf("setup ended %s; see sky jobs pool logs %s %d", status, p.Name, w.ID)
	}
	t0 := e.now()
	_, nw, err := e.setWorker(ctx, p.Name, w.ID, []string{api.WorkerStarting}, func(w *state.PoolWorker) {
		w.Status, w.Reason = next, reason
	})
	if err != nil || nw == nil {
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, err
	}
	if next == api.WorkerReady {
		if _, err := e.Store.UpdatePool(ctx, p.Name, func(n *state.Pool) error {
			if n.ReadyAt != 0 {
				return state.ErrNoChange
			}
			n.ReadyAt = t0
			return nil
		}); err != nil {
			return controller.Result{}, err
		}
		e.poolNote(p.Name, "Worker %d (%s) is READY.", w.ID, w.Cluster)
		e.pokePool(p.Name)
		return controller.Result{RequeueAfter: e.timings().WorkerWatchEvery}, nil
	}
	e.poolNote(p.Name, "Worker %d FAILED: %s.", w.ID, reason)
	e.pokePool(p.Name)
	return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
}

// watchWorker looks at a READY worker's cluster (replicaset.Watch: one
// that is gone is PREEMPTED, and replaced by the pool controller), and
// ends the runs cancelled jobs left on it.
func (e *Env) watchWorker(ctx context.Context, p *state.Pool, w *state.PoolWorker) (controller.Result, error) {
	wd := replicaset.Watched{ID: w.ID, Status: w.Status, Cluster: w.Cluster, Every: e.timings().WorkerWatchEvery}
	return replicaset.Watch(ctx, e.workerSet(p), e.poolCloud(p), wd, func(replicaset.Verdict, *agentapi.Job) (controller.Result, error) {
		if len(w.Leftovers) > 0 {
			return e.endLeftovers(ctx, p, w)
		}
		return controller.Result{RequeueAfter: e.timings().WorkerWatchEvery}, nil
	})
}

// poolCloud is what the pool's workers are launched and watched through.
func (e *Env) poolCloud(p *state.Pool) replicaset.Cloud {
	return replicaset.Cloud{Store: e.Store, Backend: e.Backend, Plan: e.Plan, Owner: poolOwner(p)}
}

// endLeftovers ends the runs that cancelled jobs left on a worker that
// did not answer when they were cancelled; the worker takes jobs again
// once none is left.
func (e *Env) endLeftovers(ctx context.Context, p *state.Pool, w *state.PoolWorker) (controller.Result, error) {
	log := ux.AppendLog(WorkerLogPath(e.Home, p.Name, w.ID))
	defer log.Close()
	var ended []int
	for _, id := range w.Leftovers {
		if err := e.endJobsOn(ctx, w.Cluster, poolOwner(p), id, log); err != nil {
			fmt.Fprintf(log, "Ending cancelled job %d's run on %s failed; trying again: %s\n", id, w.Cluster, firstLine(err.Error()))
			continue
		}
		ended = append(ended, id)
	}
	if len(ended) == 0 {
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	_, nw, err := e.setWorker(ctx, p.Name, w.ID, []string{api.WorkerReady, api.WorkerNotReady}, func(w *state.PoolWorker) {
		w.Leftovers = slices.DeleteFunc(w.Leftovers, func(id int) bool { return slices.Contains(ended, id) })
	})
	if err != nil || nw == nil {
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, err
	}
	e.poolNote(p.Name, "Worker %d: the run of cancelled job(s) %v on it ended.", w.ID, ended)
	if len(nw.Leftovers) > 0 {
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	e.kick() // jobs waiting for a worker may take it
	return controller.Result{RequeueAfter: e.timings().WorkerWatchEvery}, nil
}

// demand is what a task asks of a worker's node.
type demand struct {
	CPUs, Mem float64
	GPUs      map[string]float64
}

// workerView is a READY worker as assignment sees it.
type workerView struct {
	Cluster string
	Version int
	// Known says the worker's launched resources are known (CPUs > 0).
	Known     bool
	CPUs, Mem float64
	GPUs      map[string]float64
	Used      []demand // the demands of the jobs on it
	Jobs      int
}

// fits says whether d fits in what w has left.
func (w workerView) fits(d demand) bool {
	cpus, mem := w.CPUs, w.Mem
	gpus := map[string]float64{}
	for k, v := range w.GPUs {
		gpus[strings.ToUpper(k)] = v
	}
	for _, u := range w.Used {
		cpus -= u.CPUs
		mem -= u.Mem
		for k, v := range u.GPUs {
			gpus[strings.ToUpper(k)] -= v
		}
	}
	const eps = 1e-9
	if d.CPUs > cpus+eps || (d.Mem > 0 && w.Mem > 0 && d.Mem > mem+eps) {
		return false
	}
	for k, v := range d.GPUs {
		if v > gpus[strings.ToUpper(k)]+eps {
			return false
		}
	}
	return true
}

// pickWorker chooses the worker a pool job runs on (managed-jobs.md
// §Pools): with resource demands and known worker resources, the first
// worker any of the task's options fits in; otherwise the first worker
// with no job. Workers of the newest version come first. -1: none.
func pickWorker(ws []workerView, options []demand, latest int) int {
	order := make([]int, 0, len(ws))
	for i := range ws {
		if ws[i].Version == latest {
			order = append(order, i)
		}
	}
	for i := range ws {
		if ws[i].Version != latest {
			order = append(order, i)
		}
	}
	for _, i := range order {
		w := ws[i]
		if len(options) > 0 && w.Known {
			for _, d := range options {
				if w.fits(d) {
					return i
				}
			}
			continue
		}
		if w.Jobs == 0 {
			return i
		}
	}
	return -1
}
