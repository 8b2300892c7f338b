package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/upload"
	"github.com/skygo/skygo/internal/ux"
)

var groupName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func valueErr(format string, args ...any) error {
	return &op.Error{Type: "ValueError", Message: fmt.Sprintf(format, args...)}
}

// Submit records a submission: one job, or NumJobs jobs of an array, each
// PENDING and WAITING for the scheduler. Each job keeps its own copy of
// the files its client uploaded, for as long as it may relaunch.
func (e *Env) Submit(ctx context.Context, b api.JobsLaunchBody, u api.User, workspace string, log io.Writer) (api.JobsLaunchResult, error) {
	if len(b.Tasks) == 0 {
		return api.JobsLaunchResult{}, valueErr("the managed job has no task")
	}
	parallel := b.Execution == "parallel"
	if b.Execution != "" && b.Execution != "serial" && !parallel {
		return api.JobsLaunchResult{}, valueErr("execution %q: want serial or parallel", b.Execution)
	}
	if b.NumJobs < 0 {
		return api.JobsLaunchResult{}, valueErr("--num-jobs %d: want 1 or more", b.NumJobs)
	}
	if err := CheckSize(b, e.SubmitLimits()); err != nil {
		return api.JobsLaunchResult{}, err
	}
	if b.Pool != "" {
		if err := e.checkPoolJob(ctx, &b, u, log); err != nil {
			return api.JobsLaunchResult{}, err
		}
	}
	name := b.Name
	if name == "" && len(b.Tasks) == 1 {
		name = b.Tasks[0].Name
	}
	if name == "" {
		var r [2]byte
		_, _ = rand.Read(r[:])
		name = "sky-" + hex.EncodeToString(r[:]) + "-" + strings.ToLower(u.Name)
	}
	// Task names: a single task shares the job's name; an unnamed
	// pipeline task i is <name>-<i>; a group's tasks are named.
	names := make([]string, len(b.Tasks))
	seen := map[string]bool{}
	for i, t := range b.Tasks {
		switch {
		case len(b.Tasks) == 1:
			names[i] = name
		case t.Name != "":
			names[i] = t.Name
		default:
			names[i] = fmt.Sprintf("%s-%d", name, i)
		}
		if parallel {
			if t.Name == "" || !groupName.MatchString(t.Name) {
				return api.JobsLaunchResult{}, valueErr("job group %q: every task needs a name of letters, digits, '-' and '_' (task %d has %q)", name, i, t.Name)
			}
			if seen[t.Name] {
				return api.JobsLaunchResult{}, valueErr("job group %q: task name %q is used twice; names must be unique", name, t.Name)
			}
			seen[t.Name] = true
		}
	}
	if parallel && !groupName.MatchString(name) {
		return api.JobsLaunchResult{}, valueErr("job group name %q: use letters, digits, '-' and '_' only", name)
	}
	prio, prioClass, err := priorityOf(b.Tasks)
	if err != nil {
		return api.JobsLaunchResult{}, err
	}
	for _, p := range b.PrimaryTasks {
		if !seen[p] {
			return api.JobsLaunchResult{}, valueErr("primary_tasks names %q, which is not a task of job group %q", p, name)
		}
	}
	if !parallel && (len(b.PrimaryTasks) > 0 || len(b.TerminationDelay) > 0) {
		return api.JobsLaunchResult{}, valueErr("primary_tasks and termination_delay are job group fields (execution: parallel)")
	}
	for _, d := range b.DependsOn {
		dep, err := e.Store.GetManagedJob(ctx, d, false)
		if errors.Is(err, state.ErrNotFound) || (err == nil && dep.UserHash != u.ID && u.Role != "admin") {
			return api.JobsLaunchResult{}, valueErr("--depends-on: managed job %d does not exist", d)
		}
		if err != nil {
			return api.JobsLaunchResult{}, err
		}
		if st := dep.JobStatus(); api.ManagedTerminal(st) && st != api.ManagedSucceeded {
			return api.JobsLaunchResult{}, valueErr("--depends-on: managed job %d has already ended %s, so this job could never start", d, st)
		}
	}
	parent := 0
	if b.JobGroup != "" {
		if parent, err = e.resolveRunning(ctx, b.JobGroup, u); err != nil {
			return api.JobsLaunchResult{}, err
		}
	}
	// Hold each task's upload while the jobs take their copies.
	trees := make([]string, len(b.Tasks))
	for i, t := range b.Tasks {
		if len(upload.Roots(t, true)) == 0 {
			continue
		}
		if t.UploadID == "" {
			return api.JobsLaunchResult{}, valueErr("task %d names local files but its client did not upload them; use a SkyGo client of this version", i)
		}
		tree, release, err := upload.Open(paths.Uploads(e.Home), u.ID, t.UploadID)
		if err != nil {
			if errors.Is(err, upload.ErrNoTree) {
				return api.JobsLaunchResult{}, valueErr("%v", err)
			}
			return api.JobsLaunchResult{}, err
		}
		defer release()
		trees[i] = tree
	}
	spec, err := json.Marshal(b)
	if err != nil {
		return api.JobsLaunchResult{}, err
	}
	// The shortest job.wait_for_scheduling_timeout of the tasks bounds
	// how long the job may wait for its first start.
	var deadline float64
	for _, t := range b.Tasks {
		if t.WaitForSchedulingTimeout > 0 && (deadline == 0 || e.now()+t.WaitForSchedulingTimeout < deadline) {
			deadline = e.now() + t.WaitForSchedulingTimeout
		}
	}
	n := max(b.NumJobs, 1)
	jobs := make([]*state.ManagedJob, n)
	for r := range n {
		j := &state.ManagedJob{Name: name, UserHash: u.ID, UserName: u.Name, Workspace: workspace, Pool: b.Pool,
			Priority: prio, PriorityClass: prioClass, ScheduleState: api.ScheduleWaiting, ParentJobID: parent,
			Execution: "serial", DependsOn: b.DependsOn, NumJobs: n, JobRank: r, Entrypoint: b.Command, UserYAML: b.YAML,
			PrimaryTasks: b.PrimaryTasks, TerminationDelay: b.TerminationDelay, SchedulingDeadline: deadline}
		if parallel {
			j.Execution = "parallel"
		}
		for i, t := range b.Tasks {
			mt := &state.ManagedTask{TaskID: i, Name: names[i], Status: api.ManagedPending, Resources: backend.RequestedResources(t)}
			if parallel {
				p := len(b.PrimaryTasks) == 0 || slices.Contains(b.PrimaryTasks, t.Name)
				mt.Primary = &p
			}
			j.Tasks = append(j.Tasks, mt)
		}
		jobs[r] = j
	}
	if err := e.Store.CreateManagedJobs(ctx, jobs, spec); err != nil {
		return api.JobsLaunchResult{}, err
	}
	res := api.JobsLaunchResult{Name: name}
	fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("Launching managed job '%s' from jobs controller...", name)))
	for i, j := range jobs {
		if ctx.Err() != nil {
			// The request was cancelled: the jobs not yet given their
			// files end now rather than wait for a launch that would fail.
			e.abandon(jobs[i:], "the launch request was cancelled before the job was fully submitted")
			return res, ctx.Err()
		}
		if err := e.keepFiles(j.JobID, trees); err != nil {
			_, _ = e.failController(ctx, j, "copying the uploaded files failed: "+err.Error())
			return res, err
		}
		res.JobIDs = append(res.JobIDs, j.JobID)
		e.note(j.JobID, "Job %d (%s) submitted by %s: %d task(s), priority %d.", j.JobID, name, u.Name, len(j.Tasks), prio)
		fmt.Fprintln(log, ux.Starting(fmt.Sprintf("Job submitted, ID: %d", j.JobID)))
	}
	e.kick()
	return res, nil
}

// abandon ends jobs that were recorded but whose submission did not
// finish, as CANCELLED; it runs after the request's context is done.
func (e *Env) abandon(jobs []*state.ManagedJob, why string) {
	ctx := context.Background()
	t0 := e.now()
	for _, j := range jobs {
		_, _ = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			if n.ScheduleState != api.ScheduleWaiting {
				return nil, state.ErrNoChange
			}
			var ev []state.ManagedEventIn
			for _, t := range n.Tasks {
				if api.ManagedTerminal(t.Status) {
					continue
				}
				t.Status, t.EndAt, t.FailureReason = api.ManagedCancelled, t0, why
				ev = append(ev, state.TaskEvent(t.TaskID, t.Status, why))
			}
			n.ScheduleState = api.ScheduleDone
			return ev, nil
		})
	}
}

// priorityOf is the job's priority: every task that sets one must agree.
func priorityOf(tasks []api.TaskSpec) (int, string, error) {
	prio, class, set := 0, "", false
	for i, t := range tasks {
		r := &t.Resources.Resources
		if r.Priority != nil {
			if set && *r.Priority != prio {
				return 0, "", valueErr("task %d asks for priority %d but an earlier task asks for %d; all tasks of a managed job share one priority", i, *r.Priority, prio)
			}
			if *r.Priority < -1000 || *r.Priority > 1000 {
				return 0, "", valueErr("priority %d: want -1000 to 1000", *r.Priority)
			}
			prio, set = *r.Priority, true
		}
		if r.PriorityClass != "" {
			class = r.PriorityClass
		}
	}
	return prio, class, nil
}

// resolveRunning finds a job that has not ended by id or unique name.
func (e *Env) resolveRunning(ctx context.Context, ref string, u api.User) (int, error) {
	f := state.ManagedFilter{NotDone: true}
	if u.Role != "admin" {
		f.UserHash = u.ID
	}
	if id, err := strconv.Atoi(ref); err == nil {
		f.IDs = []int{id}
	} else {
		f.Name = ref
	}
	js, err := e.Store.ListManagedJobs(ctx, f)
	if err != nil {
		return 0, err
	}
	switch len(js) {
	case 0:
		return 0, valueErr("--job-group %s: no managed job of that id or name is running", ref)
	case 1:
		return js[0].JobID, nil
	}
	return 0, valueErr("--job-group %s: %d running jobs have that name; give the job ID", ref, len(js))
}

// keepFiles gives a job its own hard-linked copy of each task's uploaded
// tree (filesDir/<task index>): the upload store may collect the
// originals long before a recovery needs them.
func (e *Env) keepFiles(jobID int, trees []string) error {
	for i, tree := range trees {
		if tree == "" {
			continue
		}
		if err := upload.LinkTree(tree, filepath.Join(filesDir(e.Home, jobID), strconv.Itoa(i))); err != nil {
			return err
		}
	}
	return nil
}
