package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/upload"
	"github.com/skygo/skygo/internal/ux"
)

// now is the machine's time in unix seconds (the Env's clock is e.now).
func now() float64 { return unixSeconds(time.Now()) }

// reconcileJob takes the next step of one job.
func (e *Env) reconcileJob(ctx context.Context, key string) (controller.Result, error) {
	id, err := strconv.Atoi(key)
	if err != nil {
		return controller.Result{}, controller.Terminal(fmt.Errorf("managed job key %q is not an id", key))
	}
	j, err := e.Store.GetManagedJob(ctx, id, true)
	if errors.Is(err, state.ErrNotFound) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if j.ScheduleState == api.ScheduleDone || j.ScheduleState == api.ScheduleInactive {
		return controller.Result{}, nil
	}
	var spec api.JobsLaunchBody
	if err := json.Unmarshal(j.Spec, &spec); err != nil || len(spec.Tasks) != len(j.Tasks) {
		return e.failController(ctx, j, "the job's recorded spec cannot be read")
	}
	if j.Cancel != nil {
		return e.cancelSteps(ctx, j)
	}
	if e.pastSchedulingDeadline(ctx, j) {
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
	}
	if j.ScheduleState == api.ScheduleWaiting {
		return controller.Result{}, nil // the scheduler's until claimed
	}
	// Clusters of tasks that ended go first (their logs saved): a step
	// cut off after a task ended left them for this one.
	if changed, err := e.cleanupEnded(ctx, j); err != nil {
		return controller.Result{}, err
	} else if changed {
		if j, err = e.Store.GetManagedJob(ctx, id, true); err != nil {
			return controller.Result{}, err
		}
	}
	if allEnded(j) {
		return e.finish(ctx, j)
	}
	if j.Execution == "parallel" {
		return e.stepGroup(ctx, j, &spec)
	}
	for _, t := range j.Tasks {
		if !api.ManagedTerminal(t.Status) {
			return e.stepTask(ctx, j, &spec, t.TaskID)
		}
	}
	return controller.Result{}, nil
}

func allEnded(j *state.ManagedJob) bool {
	for _, t := range j.Tasks {
		if !api.ManagedTerminal(t.Status) {
			return false
		}
	}
	return true
}

// wantsLaunch says whether a task is waiting for its cluster.
func wantsLaunch(t *state.ManagedTask) bool {
	return t.Status == api.ManagedPending || t.Status == api.ManagedStarting || t.Status == api.ManagedRecovering
}

// stepTask advances one task of a serial job.
func (e *Env) stepTask(ctx context.Context, j *state.ManagedJob, spec *api.JobsLaunchBody, tid int) (controller.Result, error) {
	t := j.Tasks[tid]
	switch {
	case wantsLaunch(t):
		if j.ScheduleState != api.ScheduleLaunching {
			return e.askSlot(ctx, j, tid)
		}
		return e.launchTask(ctx, j, spec, tid)
	case t.Status == api.ManagedRunning:
		return e.monitor(ctx, j, spec, tid)
	}
	return controller.Result{RequeueAfter: monitorEvery}, nil
}

// askSlot makes a job whose task must launch (the next of a pipeline, a
// recovery) wait for the scheduler's slot.
func (e *Env) askSlot(ctx context.Context, j *state.ManagedJob, tid int) (controller.Result, error) {
	t := j.Tasks[tid]
	want := api.ScheduleAliveWaiting
	if t.NextTryAt > e.now() {
		want = api.ScheduleAliveBackoff
	}
	if j.ScheduleState != want && j.ScheduleState != api.ScheduleAliveBackoff {
		if _, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			if n.ScheduleState != j.ScheduleState || n.Cancel != nil {
				return nil, state.ErrNoChange
			}
			n.ScheduleState = want
			return nil, nil
		}); err != nil {
			return controller.Result{}, err
		}
	}
	e.kick()
	if t.NextTryAt > e.now() {
		return controller.Result{RequeueAfter: time.Duration((t.NextTryAt - e.now()) * float64(time.Second))}, nil
	}
	return controller.Result{RequeueAfter: resyncEvery}, nil
}

// launchTask runs one launch attempt of a task: mark it, adopt what an
// earlier cut-off attempt left, or tear down leftovers and launch.
func (e *Env) launchTask(ctx context.Context, j *state.ManagedJob, spec *api.JobsLaunchBody, tid int) (controller.Result, error) {
	if j.Pool != "" {
		return e.launchOnPool(ctx, j, spec, tid)
	}
	clk := e.clock()
	ts, runTS := unixSeconds(clk), runTimestamp(clk)
	fresh := false // this step began the attempt: no job can carry its tag yet
	j, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		fresh = false
		t := n.Tasks[tid]
		if !wantsLaunch(t) || n.Cancel != nil || (n.ScheduleState != api.ScheduleLaunching && n.Execution != "parallel") {
			return nil, state.ErrNoChange
		}
		var ev []state.ManagedEventIn
		if t.Launching {
			return nil, state.ErrNoChange // an attempt cut off: same attempt again
		}
		t.Launching, fresh = true, true
		t.Attempt++
		if t.ClusterName == "" {
			t.ClusterName = clusterName(t.Name, n.JobID)
		}
		if t.SubmittedAt == 0 {
			t.SubmittedAt = ts
		}
		if t.RunTimestamp == "" {
			t.RunTimestamp = "sky-" + runTS
		}
		switch t.Status {
		case api.ManagedPending:
			reason := "Job is starting"
			if t.Attempt > 1 || t.Tries > 0 {
				reason = "Job is restarting"
			}
			if t.RecoveryCount > 0 || t.Blocked != nil || t.PinnedTo != "" || t.Restarts > 0 || t.StartAt > 0 {
				t.Status = api.ManagedRecovering
			} else {
				t.Status = api.ManagedStarting
			}
			ev = append(ev, state.TaskEvent(tid, t.Status, reason))
		case api.ManagedRecovering:
			if t.Tries > 0 {
				ev = append(ev, state.TaskEvent(tid, t.Status, "Job is restarting"))
			}
		}
		return ev, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	t := j.Tasks[tid]
	if !t.Launching {
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	user := e.actor(j)
	tag := taskTag(j.JobID, tid, t.Attempt)
	log := e.clog(j.JobID)
	defer log.Close()
	// Only an attempt cut off is looked for: a fresh attempt's cluster
	// (on a recovery, the lost one) holds no job of it, and asking a head
	// that may not answer would hold the recovery.
	if !fresh {
		if job, err := e.Backend.TaggedJob(ctx, t.ClusterName, user, tag); err == nil && job != nil {
			fmt.Fprintf(log, "Found job %d of attempt %d on cluster %s, submitted before a restart: following it.\n", job.JobID, t.Attempt, t.ClusterName)
			return e.started(ctx, j, tid, job.JobID)
		}
	}
	// A cluster of that name that the controller did not make for a
	// job (the user's own, a pool's worker) is never torn down for it.
	if c, err := e.Store.GetCluster(ctx, t.ClusterName); err == nil && (!c.IsManaged || strings.HasPrefix(c.LastCreationCommand, workerCommand(""))) {
		// The task forgets the name, so no cleanup ever touches it.
		if j, err = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			n.Tasks[tid].ClusterName = ""
			return nil, nil
		}); err != nil {
			return controller.Result{}, err
		}
		return e.failTask(ctx, j, tid, api.ManagedFailedPrechecks, fmt.Sprintf(
			"A cluster named %s that is not this job's already exists, and the job's cluster would take its name. Rename the job (-n) or tear that cluster down.", t.ClusterName))
	}
	// Whatever is on the cluster is not this attempt's job: the
	// previous attempt's cluster, or a launch of this attempt cut off
	// before its job was submitted. Either way it goes, and the attempt
	// starts clean.
	if err := e.downCluster(ctx, j, t.ClusterName, log); err != nil {
		return controller.Result{}, err
	}
	lctx, done := e.launching(ctx, j.JobID)
	defer done()
	body, err := e.launchBody(j, spec, tid)
	if err != nil {
		return e.failTask(ctx, j, tid, api.ManagedFailedPrechecks, err.Error())
	}
	body.Managed.Progress = e.launchProgress(ctx, j.JobID, tid, t.Attempt, log)
	plan, err := e.planFor(lctx, body, t, log)
	if err != nil {
		return e.launchFailed(ctx, j, tid, err, log)
	}
	fmt.Fprintf(log, "Launching task %d (%s), attempt %d, on cluster %s.\n", tid, t.Name, t.Attempt, t.ClusterName)
	res, err := e.Backend.Launch(lctx, body, user, plan, log)
	if err != nil {
		if ctx.Err() != nil {
			return controller.Result{}, ctx.Err()
		}
		if lctx.Err() != nil { // a cancel interrupted it
			return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
		return e.launchFailed(ctx, j, tid, err, log)
	}
	return e.started(ctx, j, tid, res.JobID)
}

// launchBody is the launch of a task's attempt: its spec with the
// managed-job variables, its cluster, its tag, and its files from the
// job's own copy of the upload.
func (e *Env) launchBody(j *state.ManagedJob, spec *api.JobsLaunchBody, tid int) (api.LaunchBody, error) {
	t := j.Tasks[tid]
	ts := spec.Tasks[tid]
	ts.Envs = cloneMap(ts.Envs)
	ts.Name = t.Name
	ids := make([]string, len(j.Tasks))
	for i, x := range j.Tasks {
		ids[i] = taskIDString(j, x)
	}
	ts.Envs["SKYPILOT_TASK_IDS"] = strings.Join(ids, ",")
	ts.Envs["SKYPILOT_MANAGED_JOB_ID"] = strconv.Itoa(j.JobID)
	ts.Envs["SKYPILOT_JOB_RANK"] = strconv.Itoa(j.JobRank)
	ts.Envs["SKYPILOT_NUM_JOBS"] = strconv.Itoa(max(j.NumJobs, 1))
	if j.Execution == "parallel" {
		ts.Envs["SKYPILOT_JOBGROUP_NAME"] = j.Name
		ts.Run = groupWait(j.Name) + ts.Run
	}
	if ts.UploadID != "" {
		dir := filepath.Join(filesDir(e.Home, j.JobID), strconv.Itoa(tid))
		if _, err := os.Stat(dir); err != nil {
			return api.LaunchBody{}, fmt.Errorf("the job's copy of its uploaded files is gone (%v); launch the job again", err)
		}
		upload.Rebase(&ts, dir, true)
	}
	// A pin that is no infra (never written so) launches anywhere, as
	// a failed pinned launch would go on to.
	if inf, err := resources.ParseInfra(t.PinnedTo); t.PinnedTo != "" && err == nil {
		r := ts.Resources.Copy()
		r.Infra = inf
		ts.Resources = resources.Spec{Resources: *r}
	}
	return api.LaunchBody{Task: ts, ClusterName: t.ClusterName, Detach: true, Command: j.Entrypoint,
		Workspace: j.Workspace, EnvVars: spec.EnvVars, PlanShown: true,
		Managed: &api.ManagedLaunch{Tag: taskTag(j.JobID, tid, t.Attempt), TaskID: taskIDString(j, t)}}, nil
}

// taskIDString is SKYPILOT_TASK_ID of a managed task:
// sky-managed-<run timestamp>_<job name>[_<task name>]_<job id>-<task index>.
func taskIDString(j *state.ManagedJob, t *state.ManagedTask) string {
	ts := strings.TrimPrefix(t.RunTimestamp, "sky-")
	if ts == "" {
		ts = runTimestamp(time.Unix(0, int64(j.SubmittedAt*1e9)))
	}
	name := j.Name
	if len(j.Tasks) > 1 {
		name += "_" + t.Name
	}
	return fmt.Sprintf("sky-managed-%s_%s_%d-%d", ts, name, j.JobID, t.TaskID)
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+6)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// planFor is the optimizer call of an attempt, with the places its
// recovery strategy blocks first: when nothing else is left, the blocked
// places are allowed again (EAGER_NEXT_REGION prefers another region;
// it does not give up the job for want of one).
func (e *Env) planFor(ctx context.Context, body api.LaunchBody, t *state.ManagedTask, log io.Writer) (backend.Planner, error) {
	base, err := e.Plan(ctx, body, log)
	if err != nil {
		return nil, err
	}
	if len(t.Blocked) == 0 {
		return base, nil
	}
	var extra []optimizer.Blocked
	for _, b := range t.Blocked {
		cloud, region, _ := strings.Cut(b, "/")
		extra = append(extra, optimizer.Blocked{Cloud: cloud, Region: region})
	}
	first := true
	return func(ctx context.Context, r *resources.Resources, n int, blocked []optimizer.Blocked) (*optimizer.Plan, error) {
		if first {
			first = false
			if p, err := base(ctx, r, n, append(slices.Clone(extra), blocked...)); err == nil {
				return p, nil
			}
			fmt.Fprintf(log, "No other place than %s fits; trying it again.\n", strings.Join(t.Blocked, ", "))
		}
		return base(ctx, r, n, blocked)
	}, nil
}

// launchFailed decides what a failed launch attempt means: a request no
// infrastructure can satisfy fails the job at once (FAILED_PRECHECKS);
// an out-of-memory setup is FAILED_SETUP; anything else (no capacity
// now, a node that did not come up) is retried after a backoff.
func (e *Env) launchFailed(ctx context.Context, j *state.ManagedJob, tid int, lerr error, log io.Writer) (controller.Result, error) {
	msg := lerr.Error()
	fmt.Fprintf(log, "Launch attempt failed: %s\n", msg)
	switch afterLaunchFailure(lerr, j.Tasks[tid].PinnedTo) {
	case launchFailSetup:
		return e.failTask(ctx, j, tid, api.ManagedFailedSetup, msg)
	case launchUnpin:
		fmt.Fprintf(log, "Relaunching on %s failed; trying anywhere.\n", j.Tasks[tid].PinnedTo)
		_, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			t := n.Tasks[tid]
			if !t.Launching || t.PinnedTo == "" {
				return nil, state.ErrNoChange
			}
			t.Launching, t.PinnedTo = false, ""
			return nil, nil
		})
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, err
	case launchFailPrechecks:
		return e.failTask(ctx, j, tid, api.ManagedFailedPrechecks, msg)
	case launchDenied:
		return e.failTask(ctx, j, tid, api.ManagedFailedPrechecks, deniedReason(j.Tasks[tid].ClusterName, lerr))
	}
	if err := e.downCluster(ctx, j, j.Tasks[tid].ClusterName, log); err != nil {
		return controller.Result{}, err
	}
	var gap time.Duration
	j, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		t := n.Tasks[tid]
		if !t.Launching || n.Cancel != nil {
			return nil, state.ErrNoChange
		}
		t.Launching, t.LaunchProgress = false, ""
		t.Tries++
		gap = e.retryGap(t.Tries)
		if n.Pool != "" {
			gap = time.Second
		}
		t.NextTryAt = e.now() + gap.Seconds()
		if t.Status == api.ManagedStarting {
			t.Status = api.ManagedPending
		}
		if n.Execution != "parallel" {
			n.ScheduleState = api.ScheduleAliveBackoff
		}
		return []state.ManagedEventIn{{TaskID: &tid, Status: t.Status, Reason: "Job is in backoff", Code: firstLine(msg)}}, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	fmt.Fprintf(log, "Retrying in %s (attempt %d failed).\n", gap.Round(time.Millisecond), j.Tasks[tid].Tries)
	e.kick()
	return controller.Result{RequeueAfter: gap}, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// started records that a task's job is on its cluster.
func (e *Env) started(ctx context.Context, j *state.ManagedJob, tid int, agentJob int) (controller.Result, error) {
	var cloud, region, zone, infraID, res string
	var nodes []string
	var ips [][2]string
	if c, err := e.Store.GetCluster(ctx, j.Tasks[tid].ClusterName); err == nil {
		if h, err := backend.HandleOf(c); err == nil && h.Info != nil {
			cloud, region, zone, infraID = h.Info.Cloud, h.Info.Region, h.Info.Zone, h.Infra
			for _, n := range h.Info.Nodes {
				nodes = append(nodes, n.ID)
				ips = append(ips, [2]string{n.InternalIP, n.ExternalIP})
			}
			res = backend.ClusterResources(c.NumNodes, h)
		}
	}
	t0 := e.now()
	j, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		t := n.Tasks[tid]
		if !t.Launching || n.Cancel != nil {
			return nil, state.ErrNoChange
		}
		recovering := t.Status == api.ManagedRecovering
		t.Launching, t.Tries, t.NextTryAt, t.FailedSeenAt, t.TroubleSince = false, 0, 0, 0, 0
		t.LaunchProgress = ""
		t.Blocked, t.PinnedTo = nil, ""
		t.Status, t.AgentJobID = api.ManagedRunning, agentJob
		t.Cloud, t.Region, t.Zone, t.Infra, t.ClusterResources, t.NodeNames, t.IPs = cloud, region, zone, infraID, res, nodes, ips
		t.LogsSaved, t.ClusterGone = false, false
		if t.StartAt == 0 {
			t.StartAt = t0
		}
		t.LastRecoveredAt = t0
		reason := "Job has started"
		if recovering {
			t.RecoveryCount++
			reason = "Job has recovered"
		}
		if n.Execution != "parallel" || allLaunched(n) {
			n.ScheduleState = api.ScheduleAlive
		}
		return []state.ManagedEventIn{state.TaskEvent(tid, api.ManagedRunning, reason)}, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	e.kick()
	t := j.Tasks[tid]
	if t.Status != api.ManagedRunning {
		return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
	}
	e.note(j.JobID, "Task %d (%s) is RUNNING as job %d on cluster %s (%s).", tid, t.Name, agentJob, t.ClusterName, orDash(infraID))
	if agentJob == 0 { // nothing to run: done at once
		return e.succeed(ctx, j, tid)
	}
	return controller.Result{RequeueAfter: 200 * time.Millisecond}, nil
}

func allLaunched(n *state.ManagedJob) bool {
	for _, t := range n.Tasks {
		if wantsLaunch(t) && t.Launching {
			return false
		}
	}
	return true
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// monitor looks at a RUNNING task: its job on the cluster, and the
// cluster when the job is not plainly running.
func (e *Env) monitor(ctx context.Context, j *state.ManagedJob, spec *api.JobsLaunchBody, tid int) (controller.Result, error) {
	t := j.Tasks[tid]
	user := e.actor(j)
	job, err := e.Backend.AgentJob(ctx, t.ClusterName, user, t.AgentJobID)
	if err != nil && classify(err) == faultDenied {
		// A refusal is an answer: the cluster is there, and waiting for
		// it to answer otherwise would only resubmit the job.
		return e.failTask(ctx, j, tid, api.ManagedFailedController, deniedReason(t.ClusterName, err))
	}
	if err != nil || job == nil {
		alive, aerr := e.Backend.ClusterAlive(ctx, t.ClusterName)
		t0 := e.now()
		switch act, kind, why := unanswered(err, aerr, alive, t.TroubleSince, t0, transientLimit, t.ClusterName, t.AgentJobID); act {
		case silenceRecover:
			return e.recover(ctx, j, spec, tid, why, kind)
		case silenceBegins:
			_, _ = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
				if n.Tasks[tid].Status != api.ManagedRunning || n.Tasks[tid].TroubleSince != 0 {
					return nil, state.ErrNoChange
				}
				n.Tasks[tid].TroubleSince = t0
				return nil, nil
			})
		}
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	if t.TroubleSince != 0 {
		_, _ = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			if n.Tasks[tid].TroubleSince == 0 {
				return nil, state.ErrNoChange
			}
			n.Tasks[tid].TroubleSince = 0
			return nil, nil
		})
	}
	switch act, why := watchJob(job, j.JobID); act {
	case watchSucceeded:
		return e.succeed(ctx, j, tid)
	case watchFailController:
		return e.failTask(ctx, j, tid, api.ManagedFailedController, why)
	case watchFailed:
		t0 := e.now()
		if mark, wait := failedGraceLeft(t.FailedSeenAt, t0, failedGrace); mark {
			_, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
				if n.Tasks[tid].Status != api.ManagedRunning || n.Tasks[tid].FailedSeenAt != 0 {
					return nil, state.ErrNoChange
				}
				n.Tasks[tid].FailedSeenAt = t0
				return nil, nil
			})
			return controller.Result{RequeueAfter: wait}, err
		} else if wait > 0 {
			return controller.Result{RequeueAfter: wait}, nil
		}
		alive, err := e.Backend.ClusterAlive(ctx, t.ClusterName)
		if err != nil {
			return controller.Result{}, err
		}
		v := afterJobFailed(alive, jobRecovery(spec.Tasks[tid]), t.Restarts, job, j.JobID, t.ClusterName)
		if v.recover {
			return e.recover(ctx, j, spec, tid, v.reason, v.kind)
		}
		return e.failTask(ctx, j, tid, v.status, v.reason)
	}
	return controller.Result{RequeueAfter: controller.Jitter(monitorEvery, 0.2)}, nil
}

func jobRecovery(ts api.TaskSpec) resources.JobRecovery {
	r := &ts.Resources.Resources
	if r.JobRecovery != nil {
		return *r.JobRecovery
	}
	list, _ := r.Candidates()
	for _, c := range list {
		if c.JobRecovery != nil {
			return *c.JobRecovery
		}
	}
	return resources.JobRecovery{}
}

// recover moves a RUNNING task to RECOVERING: the attempt's log is kept
// if the cluster still has it, the next attempt avoids (or prefers) the
// lost place as the strategy says, and the job waits for a launch slot.
func (e *Env) recover(ctx context.Context, j *state.ManagedJob, spec *api.JobsLaunchBody, tid int, reason string, kind recoverKind) (controller.Result, error) {
	t := j.Tasks[tid]
	p := planRecovery(kind, jobRecovery(spec.Tasks[tid]), t.Cloud, t.Region, t.Infra)
	if p.fail {
		return e.failTask(ctx, j, tid, api.ManagedFailed, reason+"; job_recovery is none, so the job is not recovered")
	}
	if p.saveLogs {
		e.saveLogs(ctx, j, tid)
	} else {
		e.logUnreadable(j, tid)
	}
	t0 := e.now()
	j, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		t := n.Tasks[tid]
		if t.Status != api.ManagedRunning || n.Cancel != nil {
			return nil, state.ErrNoChange
		}
		t.Status, t.RecoverReason = api.ManagedRecovering, reason
		if t.LastRecoveredAt > 0 {
			t.JobDuration += t0 - t.LastRecoveredAt
		}
		t.FailedSeenAt, t.TroubleSince, t.Launching, t.LaunchProgress = 0, 0, false, ""
		if p.restart {
			t.Restarts++
		}
		t.Blocked, t.PinnedTo = p.block, p.pin
		if !p.saveLogs {
			t.LogsSaved = true // nothing more can be had from that head
		}
		if n.Execution != "parallel" {
			n.ScheduleState = api.ScheduleAliveWaiting
		}
		return []state.ManagedEventIn{state.TaskEvent(tid, api.ManagedRecovering, reason)}, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	e.note(j.JobID, "Task %d (%s) is RECOVERING: %s.", tid, t.Name, strings.TrimRight(reason, ". "))
	e.kick()
	return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
}

// succeed ends a task that succeeded; a pipeline's next task then asks
// for a slot.
func (e *Env) succeed(ctx context.Context, j *state.ManagedJob, tid int) (controller.Result, error) {
	e.saveLogs(ctx, j, tid)
	t0 := e.now()
	j, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		t := n.Tasks[tid]
		if t.Status != api.ManagedRunning || n.Cancel != nil {
			return nil, state.ErrNoChange
		}
		t.Status, t.EndAt = api.ManagedSucceeded, t0
		if t.LastRecoveredAt > 0 {
			t.JobDuration += t0 - t.LastRecoveredAt
		}
		if n.Execution != "parallel" && !allEnded(n) {
			n.ScheduleState = api.ScheduleAliveWaiting
		}
		return []state.ManagedEventIn{state.TaskEvent(tid, api.ManagedSucceeded, "Job has succeeded")}, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	e.note(j.JobID, "Task %d (%s) SUCCEEDED.", tid, j.Tasks[tid].Name)
	e.kick()
	return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
}

// failTask ends a task with a failure status; in a pipeline the tasks
// after it are cancelled (they never ran), in a job group the others are
// cancelled too, since the group cannot succeed.
func (e *Env) failTask(ctx context.Context, j *state.ManagedJob, tid int, status, reason string) (controller.Result, error) {
	e.saveLogs(ctx, j, tid)
	t0 := e.now()
	j, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		t := n.Tasks[tid]
		if api.ManagedTerminal(t.Status) || n.Cancel != nil {
			return nil, state.ErrNoChange
		}
		if t.Status == api.ManagedRunning && t.LastRecoveredAt > 0 {
			t.JobDuration += t0 - t.LastRecoveredAt
		}
		t.Status, t.EndAt, t.FailureReason, t.Launching, t.LaunchProgress = status, t0, reason, false, ""
		ev := []state.ManagedEventIn{state.TaskEvent(tid, status, "Job failed: "+reason)}
		for _, o := range n.Tasks {
			if o.TaskID == tid || api.ManagedTerminal(o.Status) {
				continue
			}
			if n.Execution == "parallel" && o.Status == api.ManagedRunning {
				// Its cluster is torn down by the cleanup step below.
				o.Status, o.EndAt = api.ManagedCancelled, t0
			} else {
				o.Status, o.EndAt = api.ManagedCancelled, t0
			}
			ev = append(ev, state.TaskEvent(o.TaskID, api.ManagedCancelled, fmt.Sprintf("Job has been cancelled: task %d (%s) ended %s", tid, t.Name, status)))
		}
		return ev, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	e.note(j.JobID, "Task %d (%s) ended %s: %s", tid, j.Tasks[tid].Name, status, reason)
	return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
}

// failController ends every task of a job FAILED_CONTROLLER (an
// unreadable record: nothing else can be done with it).
func (e *Env) failController(ctx context.Context, j *state.ManagedJob, why string) (controller.Result, error) {
	t0 := e.now()
	_, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		var ev []state.ManagedEventIn
		for _, t := range n.Tasks {
			if api.ManagedTerminal(t.Status) {
				continue
			}
			t.Status, t.EndAt, t.FailureReason = api.ManagedFailedController, t0, "Unexpected error occurred: "+why
			ev = append(ev, state.TaskEvent(t.TaskID, t.Status, "Job failed: "+t.FailureReason))
		}
		n.ScheduleState = api.ScheduleDone
		return ev, nil
	})
	return controller.Result{}, err
}

// saveLogs copies a task's log from its cluster to the server, where
// `sky jobs logs` reads it once the cluster is gone. Each attempt's log
// is appended after the previous attempts'.
func (e *Env) saveLogs(ctx context.Context, j *state.ManagedJob, tid int) {
	t := j.Tasks[tid]
	if t.AgentJobID == 0 || t.LogsSaved || t.ClusterName == "" {
		return
	}
	f, err := ux.OpenAppend(TaskLogPath(e.Home, j.JobID, tid))
	if err != nil {
		return
	}
	defer f.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := e.Backend.CopyJobLog(cctx, t.ClusterName, e.actor(j), t.AgentJobID, 0, false, f); err != nil {
		fmt.Fprintf(f, "(the log of attempt %d could not be read from cluster %s: %s)\n", t.Attempt, t.ClusterName, firstLine(err.Error()))
	}
	_, _ = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		nt := n.Tasks[tid]
		if nt.AgentJobID != t.AgentJobID || nt.Attempt != t.Attempt || nt.LogsSaved {
			return nil, state.ErrNoChange
		}
		nt.LogsSaved = true
		return nil, nil
	})
}

// logUnreadable notes in a task's saved log that the attempt's log
// stayed on a cluster that did not answer.
func (e *Env) logUnreadable(j *state.ManagedJob, tid int) {
	t := j.Tasks[tid]
	if t.AgentJobID == 0 || t.LogsSaved || t.ClusterName == "" {
		return
	}
	f, err := ux.OpenAppend(TaskLogPath(e.Home, j.JobID, tid))
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "(the log of attempt %d could not be read: cluster %s did not answer)\n", t.Attempt, t.ClusterName)
}

// downCluster tears a task's cluster down if it exists (a pool job's
// worker is kept: only the job's jobs on it end).
func (e *Env) downCluster(ctx context.Context, j *state.ManagedJob, name string, log io.Writer) error {
	if name == "" {
		return nil
	}
	if j.Pool != "" {
		return e.releaseWorker(ctx, j, name, log)
	}
	if _, err := e.Store.GetCluster(ctx, name); errors.Is(err, state.ErrNotFound) {
		return nil
	}
	// Never --purge: a teardown that fails keeps the cluster's record, and
	// the job its cluster, until a later reconcile finishes it; dropping
	// the record would leave its processes and addresses with nothing to
	// find them by.
	err := e.Backend.Down(ctx, name, e.actor(j), true, false, log)
	if err != nil && classify(err) == faultDenied {
		// Not the job's user's cluster (any more): it is not the job's
		// to tear down.
		fmt.Fprintf(log, "Cluster %s is left: %s\n", name, firstLine(err.Error()))
		return nil
	}
	if err != nil && !backend.IsNotFound(err) {
		return fmt.Errorf("tearing down %s: %w", name, err)
	}
	fmt.Fprintf(log, "Cluster %s torn down.\n", name)
	return nil
}

// cleanupEnded saves the logs of ended tasks and tears their clusters
// down (a pool worker is kept: only its job is cancelled).
func (e *Env) cleanupEnded(ctx context.Context, j *state.ManagedJob) (changed bool, err error) {
	for _, t := range j.Tasks {
		if !api.ManagedTerminal(t.Status) || t.ClusterGone || t.ClusterName == "" {
			continue
		}
		e.saveLogs(ctx, j, t.TaskID)
		log := e.clog(j.JobID)
		err := e.downCluster(ctx, j, t.ClusterName, log)
		log.Close()
		if err != nil {
			return changed, err
		}
		tid := t.TaskID
		if _, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			if n.Tasks[tid].ClusterGone {
				return nil, state.ErrNoChange
			}
			n.Tasks[tid].ClusterGone = true
			return nil, nil
		}); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// finish closes a job whose tasks have all ended.
func (e *Env) finish(ctx context.Context, j *state.ManagedJob) (controller.Result, error) {
	if err := os.RemoveAll(filesDir(e.Home, j.JobID)); err != nil {
		return controller.Result{}, err
	}
	t0 := e.now()
	j, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		if n.ScheduleState == api.ScheduleDone || !allEnded(n) {
			return nil, state.ErrNoChange
		}
		n.ScheduleState, n.EndAt = api.ScheduleDone, t0
		return nil, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	e.note(j.JobID, "Job %d finished: %s.", j.JobID, j.JobStatus())
	e.kick()
	// Jobs attached to this one end with it.
	kids, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{ParentIDs: []int{j.JobID}, NotDone: true})
	if err == nil {
		for _, k := range kids {
			_ = e.requestCancel(ctx, k.JobID, state.ManagedCancel{At: t0, Reason: fmt.Sprintf("its job group %d ended", j.JobID)})
		}
	}
	return controller.Result{}, nil
}

// cancelSteps carries out a cancellation: every task that has not ended
// goes CANCELLING, its log is saved and its cluster torn down (even one
// a cut-off launch was making), then CANCELLED; then the job is done.
func (e *Env) cancelSteps(ctx context.Context, j *state.ManagedJob) (controller.Result, error) {
	reason := "Job is cancelling"
	j, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		var ev []state.ManagedEventIn
		for _, t := range n.Tasks {
			if api.ManagedTerminal(t.Status) || t.Status == api.ManagedCancelling {
				continue
			}
			if t.ClusterName == "" && t.AgentJobID == 0 && !t.Launching {
				// Never launched: nothing to clean up.
				t.Status, t.EndAt = api.ManagedCancelled, e.now()
				ev = append(ev, state.TaskEvent(t.TaskID, api.ManagedCancelled, "Job has been cancelled"))
				continue
			}
			t.Status = api.ManagedCancelling
			ev = append(ev, state.TaskEvent(t.TaskID, api.ManagedCancelling, reason))
		}
		if len(ev) == 0 {
			return nil, state.ErrNoChange
		}
		return ev, nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	log := e.clog(j.JobID)
	defer log.Close()
	var wg sync.WaitGroup
	errs := make([]error, len(j.Tasks))
	for _, t := range j.Tasks {
		if t.Status != api.ManagedCancelling {
			continue
		}
		wg.Add(1)
		go func(t *state.ManagedTask) {
			defer wg.Done()
			if j.Cancel.Graceful && t.AgentJobID > 0 {
				e.gracefulStop(ctx, j, t)
			}
			e.saveLogs(ctx, j, t.TaskID)
			if err := e.downCluster(ctx, j, t.ClusterName, log); err != nil {
				if j.Pool == "" {
					errs[t.TaskID] = err // a cluster is never left running
					return
				}
				// A worker that does not answer must not hold the
				// cancel: after a few attempts the job ends anyway.
				giveUp, ferr := e.releaseFailed(ctx, j, t.TaskID, err, log)
				if ferr != nil || !giveUp {
					errs[t.TaskID] = errors.Join(err, ferr)
					return
				}
			}
			t0 := e.now()
			_, errs[t.TaskID] = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
				nt := n.Tasks[t.TaskID]
				if nt.Status != api.ManagedCancelling {
					return nil, state.ErrNoChange
				}
				if nt.LastRecoveredAt > 0 && nt.StartAt > 0 && nt.EndAt == 0 {
					nt.JobDuration += t0 - nt.LastRecoveredAt
				}
				nt.Status, nt.EndAt, nt.ClusterGone, nt.Launching = api.ManagedCancelled, t0, true, false
				return []state.ManagedEventIn{state.TaskEvent(t.TaskID, api.ManagedCancelled, "Job has been cancelled")}, nil
			})
		}(t)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return controller.Result{}, err
	}
	if j, err = e.Store.GetManagedJob(ctx, j.JobID, false); err != nil {
		return controller.Result{}, err
	}
	if _, err := e.cleanupEnded(ctx, j); err != nil {
		return controller.Result{}, err
	}
	e.note(j.JobID, "Job %d cancelled%s.", j.JobID, cancelledBy(j.Cancel))
	return e.finish(ctx, j)
}

func cancelledBy(c *state.ManagedCancel) string {
	switch {
	case c == nil:
		return ""
	case c.Reason != "":
		return ": " + c.Reason
	case c.By != "":
		s := " by " + c.By
		if c.RequestID != "" {
			s += " (request " + c.RequestID + ")"
		}
		return s
	}
	return ""
}

// gracefulStop cancels a task's job on its cluster and waits, up to the
// graceful timeout (5 minutes when unset), for it to end before the
// cluster goes.
func (e *Env) gracefulStop(ctx context.Context, j *state.ManagedJob, t *state.ManagedTask) {
	wait := 5 * time.Minute
	if j.Cancel.GracefulTimeout != nil {
		wait = time.Duration(*j.Cancel.GracefulTimeout) * time.Second
	}
	user := e.actor(j)
	cctx, cancel := context.WithTimeout(ctx, releaseTimeout) // a head that never answers must not hold the cancel
	_, err := e.Backend.Cancel(cctx, t.ClusterName, user, []int{t.AgentJobID}, false, true)
	cancel()
	if err != nil {
		return
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		job, err := e.Backend.AgentJob(ctx, t.ClusterName, user, t.AgentJobID)
		if err != nil || job == nil || job.Status.Terminal() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pastSchedulingDeadline cancels a job that has not started by its
// job.wait_for_scheduling_timeout (a later recovery does not re-arm it)
// and says whether it did.
func (e *Env) pastSchedulingDeadline(ctx context.Context, j *state.ManagedJob) bool {
	t0 := e.now()
	return deadlinePassed(j, t0) && e.expire(ctx, j, t0)
}

// expire cancels a job past its scheduling deadline and says whether it
// did.
func (e *Env) expire(ctx context.Context, j *state.ManagedJob, now float64) bool {
	reason := "it was not scheduled within its job.wait_for_scheduling_timeout"
	// The cancellation's own note (now or when it is carried out) says
	// why in the controller log.
	return e.requestCancel(ctx, j.JobID, state.ManagedCancel{At: now, Reason: reason}) == nil
}

// launchProgress records an infrastructure's launch-progress texts (a
// Slurm allocation's pending reason) on the attempt being launched: the
// latest is the task's details, and every change is an event of the job,
// so the wait's history outlives the allocation.
func (e *Env) launchProgress(ctx context.Context, jobID, tid, attempt int, log io.Writer) func(string) {
	return func(text string) {
		fmt.Fprintln(log, text)
		_, err := e.Store.UpdateManagedJob(context.WithoutCancel(ctx), jobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			t := n.Tasks[tid]
			if !t.Launching || t.Attempt != attempt || t.LaunchProgress == text {
				return nil, state.ErrNoChange
			}
			t.LaunchProgress = text
			return []state.ManagedEventIn{state.TaskEvent(tid, t.Status, text)}, nil
		})
		if err != nil {
			fmt.Fprintf(log, "Recording the launch progress failed: %v\n", err)
		}
	}
}
