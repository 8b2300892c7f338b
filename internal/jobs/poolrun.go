package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
)

// Jobs on pools: a pool job launches no cluster. Each attempt of a task
// picks a READY worker of the pool (pickWorker), records it as the task's
// cluster, and submits the task's run there as `sky exec` would, tagged
// like a launched task's job so that a controller cut off after the
// submit finds it. Monitoring, recovery and logs are the launched
// tasks'; cleanup cancels the job on the worker and keeps the worker.

// launchOnPool runs one attempt of a pool job's task.
func (e *Env) launchOnPool(ctx context.Context, j *state.ManagedJob, spec *api.JobsLaunchBody, tid int) (controller.Result, error) {
	t := j.Tasks[tid]
	if t.Launching && t.ClusterName != "" {
		// An attempt cut off after it chose its worker: its job may be
		// there already.
		if job, err := e.Backend.TaggedJob(ctx, t.ClusterName, e.actor(j), taskTag(j.JobID, tid, t.Attempt)); err == nil && job != nil {
			e.note(j.JobID, "Found job %d of attempt %d on worker %s, submitted before a restart: following it.", job.JobID, t.Attempt, t.ClusterName)
			return e.started(ctx, j, tid, job.JobID)
		}
		return e.execOnWorker(ctx, j, spec, tid)
	}
	// One assignment at a time per pool (on every server of the
	// database), so two jobs never take the same free worker, and the
	// pool controller never picks a worker to go while a job takes it.
	unlock, err := e.lockPool(ctx, j.Pool)
	if err != nil {
		return controller.Result{}, err
	}
	p, err := e.Store.GetPool(ctx, j.Pool)
	if errors.Is(err, state.ErrNotFound) || (err == nil && p.Down != nil) {
		unlock()
		return e.failTask(ctx, j, tid, api.ManagedFailedPrechecks, fmt.Sprintf("pool %s does not exist (any more); create it with `sky jobs pool apply -p %s POOL_YAML`", j.Pool, j.Pool))
	}
	if err != nil {
		unlock()
		return controller.Result{}, err
	}
	demands := taskDemands(spec.Tasks[tid])
	views, err := e.readyWorkers(ctx, p, j.JobID, len(demands) > 0)
	if err != nil {
		unlock()
		return controller.Result{}, err
	}
	pick := pickWorker(views, demands, p.SpecVersion)
	if pick < 0 {
		unlock()
		return e.waitForWorker(ctx, j, tid)
	}
	worker := views[pick].Cluster
	clk := e.clock()
	ts, runTS := unixSeconds(clk), runTimestamp(clk)
	j, err = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		t := n.Tasks[tid]
		if !wantsLaunch(t) || n.Cancel != nil || t.Launching || n.ScheduleState != api.ScheduleLaunching {
			return nil, state.ErrNoChange
		}
		t.Launching, t.ClusterName, t.ClusterGone = true, worker, false
		t.Attempt++
		if t.SubmittedAt == 0 {
			t.SubmittedAt = ts
		}
		if t.RunTimestamp == "" {
			t.RunTimestamp = "sky-" + runTS
		}
		reason := fmt.Sprintf("Job is starting on worker %s of pool %s", worker, n.Pool)
		if t.Status == api.ManagedPending && (t.RecoveryCount > 0 || t.Restarts > 0 || t.StartAt > 0) {
			t.Status = api.ManagedRecovering
		} else if t.Status == api.ManagedPending {
			t.Status = api.ManagedStarting
		}
		return []state.ManagedEventIn{state.TaskEvent(tid, t.Status, reason)}, nil
	})
	unlock()
	if err != nil {
		return controller.Result{}, err
	}
	if t := j.Tasks[tid]; !t.Launching || t.ClusterName != worker {
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
	}
	e.note(j.JobID, "Task %d (%s), attempt %d, assigned to worker %s of pool %s.", tid, j.Tasks[tid].Name, j.Tasks[tid].Attempt, worker, j.Pool)
	return e.execOnWorker(ctx, j, spec, tid)
}

// waitForWorker leaves a pool job's task PENDING (RECOVERING when it ran
// before) until a worker is free: it asks the scheduler again in
// Timings.PoolWaitEvery, holding no launch slot meanwhile.
func (e *Env) waitForWorker(ctx context.Context, j *state.ManagedJob, tid int) (controller.Result, error) {
	_, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		t := n.Tasks[tid]
		if !wantsLaunch(t) || n.Cancel != nil || t.Launching {
			return nil, state.ErrNoChange
		}
		var ev []state.ManagedEventIn
		if t.Tries == 0 {
			t.Tries = 1
			ev = append(ev, state.TaskEvent(tid, t.Status, fmt.Sprintf("Waiting for a free worker of pool %s", n.Pool)))
		}
		if t.Status == api.ManagedStarting {
			t.Status = api.ManagedPending
		}
		t.ClusterName, t.NextTryAt = "", e.now()+e.timings().PoolWaitEvery.Seconds()
		n.ScheduleState = api.ScheduleAliveBackoff
		return ev, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	e.kick()
	return controller.Result{RequeueAfter: e.timings().PoolWaitEvery}, nil
}

// execOnWorker submits the task's run on its worker (the job's setup and
// file mounts are not run: the worker ran the pool's).
func (e *Env) execOnWorker(ctx context.Context, j *state.ManagedJob, spec *api.JobsLaunchBody, tid int) (controller.Result, error) {
	t := j.Tasks[tid]
	lb, err := e.launchBody(j, spec, tid)
	if err != nil {
		return e.failTask(ctx, j, tid, api.ManagedFailedPrechecks, err.Error())
	}
	ts := lb.Task
	ts.Setup, ts.FileMounts = "", nil
	body := api.ExecBody{Task: ts, ClusterName: t.ClusterName, Detach: true, Command: j.Entrypoint, Managed: lb.Managed}
	lctx, done := e.launching(ctx, j.JobID)
	defer done()
	log := e.clog(j.JobID)
	defer log.Close()
	fmt.Fprintf(log, "Submitting task %d (%s), attempt %d, to worker %s.\n", tid, t.Name, t.Attempt, t.ClusterName)
	res, err := e.Backend.Exec(lctx, body, e.actor(j), log)
	if err == nil {
		return e.started(ctx, j, tid, res.JobID)
	}
	if ctx.Err() != nil {
		return controller.Result{}, ctx.Err()
	}
	if lctx.Err() != nil { // a cancel interrupted it
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
	}
	var ce *backend.ClusterError
	if errors.As(err, &ce) && ce.Type == "ResourcesMismatchError" {
		return e.failTask(ctx, j, tid, api.ManagedFailedPrechecks, fmt.Sprintf("the task does not fit the workers of pool %s: %s", j.Pool, ce.Msg))
	}
	if classify(err) == faultDenied {
		// An answer, not silence: submitting again would be refused again.
		fmt.Fprintf(log, "Worker %s refused the submit: %s\n", t.ClusterName, firstLine(err.Error()))
		return e.failTask(ctx, j, tid, api.ManagedFailedPrechecks, deniedReason(t.ClusterName, err))
	}
	// The worker went (or does not answer): the attempt lets it go and
	// picks a worker again.
	fmt.Fprintf(log, "Submitting to worker %s failed: %s\n", t.ClusterName, firstLine(err.Error()))
	if _, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		nt := n.Tasks[tid]
		if !nt.Launching || nt.Attempt != t.Attempt || n.Cancel != nil {
			return nil, state.ErrNoChange
		}
		nt.Launching, nt.ClusterName = false, ""
		if nt.Status == api.ManagedStarting {
			nt.Status = api.ManagedPending
		}
		nt.NextTryAt = e.now() + e.timings().PoolWaitEvery.Seconds()
		n.ScheduleState = api.ScheduleAliveBackoff
		return nil, nil
	}); err != nil {
		return controller.Result{}, err
	}
	e.kick()
	return controller.Result{RequeueAfter: e.timings().PoolWaitEvery}, nil
}

// releaseWorker ends a pool job's jobs on worker (every attempt's, a
// cut-off one's too) and keeps the worker: the pool's cleanup where a
// launched task's cluster would be torn down.
func (e *Env) releaseWorker(ctx context.Context, j *state.ManagedJob, worker string, log io.Writer) error {
	return e.endJobsOn(ctx, worker, e.actor(j), j.JobID, log)
}

// endJobsOn cancels managed job id's jobs on worker. A worker that is
// gone took them with it; one that refuses the controller (faultDenied)
// cannot be made to end them, and asking again changes nothing, so that
// is noted and not an error.
func (e *Env) endJobsOn(ctx context.Context, worker string, user backend.User, id int, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, e.timings().ReleaseTimeout) // a stopped agent accepts the call and never answers
	defer cancel()
	jobs, err := e.Backend.Queue(ctx, worker, user, true, false)
	if err != nil {
		switch classify(err) {
		case faultGone:
			return nil
		case faultDenied:
			fmt.Fprintf(log, "Worker %s refused the controller (%s): job %d's jobs there are left to its owner.\n", worker, firstLine(err.Error()), id)
			return nil
		}
		if alive, aerr := e.Backend.ClusterAlive(ctx, worker); aerr == nil && !alive {
			return nil // the worker is gone, and its jobs with it
		}
		return fmt.Errorf("reading the jobs of worker %s: %w", worker, err)
	}
	prefix := fmt.Sprintf("%d/", id)
	var ids []int
	for _, x := range jobs {
		if tag, _ := x.Metadata[api.MetaManagedTag].(string); strings.HasPrefix(tag, prefix) && !x.Status.Terminal() {
			ids = append(ids, x.JobID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := e.Backend.Cancel(ctx, worker, user, ids, false, true); err != nil {
		switch classify(err) {
		case faultGone:
			return nil
		case faultDenied:
			fmt.Fprintf(log, "Worker %s refused the controller (%s): job(s) %v there are left to its owner.\n", worker, firstLine(err.Error()), ids)
			return nil
		}
		return fmt.Errorf("cancelling job(s) %v on worker %s: %w", ids, worker, err)
	}
	fmt.Fprintf(log, "Cancelled job(s) %v on worker %s; the worker is kept.\n", ids, worker)
	return nil
}

// cancelTries is how many attempts a cancelled pool job makes to end its
// job on its worker before it is CANCELLED anyway: a cancel always ends
// the job, and the worker's controller ends the job left there
// (PoolWorker.Leftovers) once the worker answers again.
const cancelTries = 3

// cancelGiveUp says whether a cancelled pool task stops trying to end
// its job on its worker after tries failed attempts.
func cancelGiveUp(tries int) bool { return tries >= cancelTries }

// releaseFailed records a failed attempt of a cancelled pool task to end
// its job on its worker, and says whether the cancel gives up on it: the
// job is then a leftover of the worker, which takes no job until its
// controller has ended it.
func (e *Env) releaseFailed(ctx context.Context, j *state.ManagedJob, tid int, rerr error, log io.Writer) (giveUp bool, err error) {
	t := j.Tasks[tid]
	tries := 0
	if _, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		nt := n.Tasks[tid]
		if nt.Status != api.ManagedCancelling {
			return nil, state.ErrNoChange
		}
		nt.CancelTries++
		tries = nt.CancelTries
		return nil, nil
	}); err != nil {
		return false, err
	}
	fmt.Fprintf(log, "Ending task %d's job on worker %s failed (attempt %d of %d): %s\n", tid, t.ClusterName, tries, cancelTries, firstLine(rerr.Error()))
	if !cancelGiveUp(tries) {
		return false, nil
	}
	w := 0
	if _, err := e.Store.UpdatePool(ctx, j.Pool, func(p *state.Pool) error {
		for _, x := range p.Workers {
			if x.Cluster == t.ClusterName {
				w = x.ID
				if !slices.Contains(x.Leftovers, j.JobID) {
					x.Leftovers = append(x.Leftovers, j.JobID)
					return nil
				}
			}
		}
		return state.ErrNoChange
	}); err != nil && !errors.Is(err, state.ErrNotFound) {
		return false, err
	}
	if w > 0 {
		e.poolNote(j.Pool, "Worker %d (%s) did not answer to end cancelled job %d's run; it takes no job until that run is ended.", w, t.ClusterName, j.JobID)
		e.pokeWorker(j.Pool, w)
	}
	return true, nil
}

// readyWorkers is the pool's READY workers with the jobs on each (jobs
// of other pool jobs than self that have not ended), and with demands
// what those jobs take of them.
func (e *Env) readyWorkers(ctx context.Context, p *state.Pool, self int, demands bool) ([]workerView, error) {
	jobs, err := e.poolJobs(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	on := map[string][]*state.ManagedJob{}
	for _, oj := range jobs {
		if oj.JobID == self {
			continue
		}
		for _, t := range oj.Tasks {
			if !api.ManagedTerminal(t.Status) {
				if t.ClusterName != "" && !t.ClusterGone {
					on[t.ClusterName] = append(on[t.ClusterName], oj)
				}
				break
			}
		}
	}
	var out []workerView
	for _, w := range p.Workers {
		if w.Status != api.WorkerReady || len(w.Leftovers) > 0 {
			continue // not ready, or a cancelled job may still run there
		}
		v := workerView{Cluster: w.Cluster, Version: w.SpecVersion, Jobs: len(on[w.Cluster])}
		c, err := e.Store.GetCluster(ctx, w.Cluster)
		if errors.Is(err, state.ErrNotFound) || (err == nil && c.Status != state.ClusterUp) {
			continue // lost; its watcher has not said so yet
		}
		if err == nil {
			if h, err := backend.HandleOf(c); err == nil && h.CPUs > 0 {
				v.Known, v.CPUs, v.Mem, v.GPUs = true, h.CPUs, h.MemoryGB, h.GPUs
			}
		}
		for _, oj := range on[w.Cluster] {
			if demands && v.Known {
				v.Used = append(v.Used, e.jobDemand(ctx, oj.JobID))
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// jobDemand is what a pool job's running task takes of its worker: its
// first resource option (the one assignment fitted first).
func (e *Env) jobDemand(ctx context.Context, id int) demand {
	j, err := e.Store.GetManagedJob(ctx, id, true)
	if err != nil {
		return demand{}
	}
	var spec api.JobsLaunchBody
	if json.Unmarshal(j.Spec, &spec) != nil {
		return demand{}
	}
	for _, t := range j.Tasks {
		if !api.ManagedTerminal(t.Status) && t.TaskID < len(spec.Tasks) {
			if ds := taskDemands(spec.Tasks[t.TaskID]); len(ds) > 0 {
				return ds[0]
			}
			// A job that asks for nothing takes the whole worker as far
			// as idle-only assignment goes; as demands go, one CPU.
			return demand{CPUs: 1}
		}
	}
	return demand{}
}

// taskDemands lists what each of a task's resource options asks of a
// node; nil when the task asks for nothing in particular.
func taskDemands(ts api.TaskSpec) []demand {
	r := &ts.Resources.Resources
	opts, _ := r.Candidates()
	if len(opts) == 0 {
		opts = []*resources.Resources{r}
	}
	var out []demand
	for _, c := range opts {
		var d demand
		if c.CPUs != nil && !c.CPUs.PerCPU {
			d.CPUs = c.CPUs.Value
		}
		if c.Memory != nil && !c.Memory.PerCPU {
			d.Mem = c.Memory.Value
		}
		if name := c.AcceleratorName(); name != "" {
			d.GPUs = map[string]float64{name: c.AcceleratorCount()}
		}
		if d.CPUs > 0 || d.Mem > 0 || len(d.GPUs) > 0 {
			out = append(out, d)
		}
	}
	if len(out) < len(opts) {
		return nil // an option that asks for nothing: idle workers only
	}
	return out
}

// checkPoolJob refuses a submission to a pool that does not exist (or
// is going down), that u may not use (mayUsePool: told as a pool that
// does not exist), or that the pool cannot run, and warns that the job's
// own setup and file mounts are not run: the workers ran the pool's.
func (e *Env) checkPoolJob(ctx context.Context, b *api.JobsLaunchBody, u api.User, log io.Writer) error {
	p, err := e.usablePool(ctx, u, b.Pool)
	if errors.Is(err, state.ErrNotFound) {
		return valueErr("pool %q does not exist: create it with `sky jobs pool apply -p %s POOL_YAML`", b.Pool, b.Pool)
	}
	if err != nil {
		return err
	}
	if p.Down != nil {
		return valueErr("pool %q is being torn down; create it again with `sky jobs pool apply -p %s POOL_YAML`", b.Pool, b.Pool)
	}
	if b.Execution == "parallel" {
		return valueErr("a job group (execution: parallel) cannot run on a pool: drop --pool %s", b.Pool)
	}
	for i, t := range b.Tasks {
		var ignored []string
		if t.Setup != "" {
			ignored = append(ignored, "setup")
		}
		if len(t.FileMounts) > 0 {
			ignored = append(ignored, "file_mounts")
		}
		if len(ignored) > 0 {
			verb := "is"
			if len(ignored) > 1 {
				verb = "are"
			}
			fmt.Fprintf(log, "Warning: the %s of task %d %s ignored on pool %s: its workers ran the pool's setup and file mounts.\n", strings.Join(ignored, " and "), i, verb, b.Pool)
			// Not uploaded again per job; the workers have the pool's.
			b.Tasks[i].Setup, b.Tasks[i].FileMounts = "", nil
		}
	}
	return nil
}

// lockPool holds pool name's assignment lock (see launchOnPool).
func (e *Env) lockPool(ctx context.Context, name string) (func(), error) {
	return e.Store.LockCluster(ctx, "pool:"+name)
}
