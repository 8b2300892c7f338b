package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/state"
)

// Queue answers `sky jobs queue`: one record per task of each selected
// job, newest job first.
func (e *Env) Queue(ctx context.Context, b api.JobsQueueBody, u api.User) (api.JobsQueueResult, error) {
	f, infra, err := queueFilter(b, u)
	if err != nil {
		return api.JobsQueueResult{}, err
	}
	if infra == "" {
		f.Limit = b.Limit
	}
	jobs, err := e.Store.ListManagedJobs(ctx, f)
	if err != nil {
		return api.JobsQueueResult{}, err
	}
	if infra != "" {
		jobs = keepOnInfra(jobs, infra)
	}
	res := api.JobsQueueResult{Jobs: []api.ManagedJobRecord{}, InProgress: map[string]int{}}
	// The counts are over every selected job, not a page: the first page
	// says them, and the pages after it (a cursor) do not count again.
	first := b.BelowJobID == 0
	if first {
		counts, err := e.Store.CountManagedProgress(ctx, f)
		if err != nil {
			return api.JobsQueueResult{}, err
		}
		for st, n := range counts.NotDone {
			if !api.ManagedTerminal(st) {
				res.InProgress[st] = n
			}
		}
		if infra == "" {
			res.Total = counts.Total
		}
	}
	if infra != "" {
		res.Total = len(jobs)
		if b.Limit > 0 && len(jobs) > b.Limit {
			jobs = jobs[:b.Limit]
		}
	}
	maxWaiting, err := e.maxWaiting(ctx, b)
	if err != nil {
		return api.JobsQueueResult{}, err
	}
	if res.Jobs, err = e.appendRecords(ctx, res.Jobs, jobs, b, maxWaiting); err != nil {
		return api.JobsQueueResult{}, err
	}
	return res, nil
}

// queueEachPage is how many jobs QueueEach reads from the database at a
// time: what bounds what a listing holds, however long the queue.
const queueEachPage = 1000

// QueueEach hands each record Queue would list for b (without the cursor
// and the counts, which only a paging client needs) to emit, reading the
// jobs a page at a time, newest first, below the last job of the page
// before: the whole queue is never held, and never stored as a result.
// The next page is read (and its records decoded, most of the cost)
// while this one is handed out, so at most three pages are held.
func (e *Env) QueueEach(ctx context.Context, b api.JobsQueueBody, u api.User, emit func(*api.ManagedJobRecord) error) error {
	f, infra, err := queueFilter(b, u)
	if err != nil {
		return err
	}
	maxWaiting, err := e.maxWaiting(ctx, b)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	pages := make(chan queuePage, 1)
	go e.readQueuePages(ctx, f, infra == "", b.Limit, pages)
	defer func() {
		cancel()
		for range pages { // the reader has ended once it closes them
		}
	}()
	left := b.Limit // jobs still to list; 0: all
	var recs []api.ManagedJobRecord
	for p := range pages {
		if p.err != nil {
			return p.err
		}
		jobs := p.jobs
		if infra != "" {
			jobs = keepOnInfra(jobs, infra)
		}
		if b.Limit > 0 && len(jobs) >= left {
			jobs = jobs[:left]
		}
		left -= len(jobs)
		if recs, err = e.appendRecords(ctx, recs[:0], jobs, b, maxWaiting); err != nil {
			return err
		}
		for i := range recs {
			if err := emit(&recs[i]); err != nil {
				return err
			}
		}
		if b.Limit > 0 && left == 0 {
			return nil
		}
	}
	return nil
}

// queuePage is one page of jobs QueueEach's reader read, or its error.
type queuePage struct {
	jobs []*state.ManagedJob
	err  error
}

// readQueuePages sends the pages of f, newest first, until the last (a
// short one), an error, or ctx's end, then closes out. With exact (no
// filter after reading), limit (0: none) bounds the jobs it reads.
func (e *Env) readQueuePages(ctx context.Context, f state.ManagedFilter, exact bool, limit int, out chan<- queuePage) {
	defer close(out)
	read := 0
	for {
		f.Limit = queueEachPage
		if exact && limit > 0 {
			f.Limit = min(queueEachPage, limit-read)
		}
		jobs, err := e.Store.ListManagedJobs(ctx, f)
		select {
		case out <- queuePage{jobs, err}:
		case <-ctx.Done():
			return
		}
		read += len(jobs)
		if err != nil || len(jobs) < f.Limit || (exact && limit > 0 && read >= limit) {
			return
		}
		f.BelowID = jobs[len(jobs)-1].JobID
	}
}

// queueFilter is the selection of b for u, and its infra filter (which
// is applied to the jobs read: a task's infra is in its record).
func queueFilter(b api.JobsQueueBody, u api.User) (state.ManagedFilter, string, error) {
	f := state.ManagedFilter{IDs: b.JobIDs, After: b.After, Before: b.Before, Pool: b.Pool, HiddenWorkspaces: b.HiddenWorkspaces}
	if !b.AllUsers {
		f.UserHash = u.ID
	}
	if b.SkipFinished {
		f.NotDone = true
	}
	if len(b.Statuses) > 0 {
		f.Statuses = b.Statuses
	}
	if b.BelowJobID < 0 {
		return f, "", fmt.Errorf("below_job_id %d: want a job id, or 0 for the newest jobs", b.BelowJobID)
	}
	f.BelowID = b.BelowJobID
	return f, strings.ToLower(strings.TrimSpace(b.Infra)), nil
}

func keepOnInfra(jobs []*state.ManagedJob, infra string) []*state.ManagedJob {
	kept := jobs[:0]
	for _, j := range jobs {
		if onInfra(j, infra) {
			kept = append(kept, j)
		}
	}
	return kept
}

// maxWaiting is the highest priority of the jobs waiting to launch, which
// -v's details compare each job's with.
func (e *Env) maxWaiting(ctx context.Context, b api.JobsQueueBody) (int, error) {
	if !b.Verbose {
		return 0, nil
	}
	return e.Store.MaxManagedPriority(ctx, []string{api.ScheduleLaunching, api.ScheduleAliveBackoff,
		api.ScheduleWaiting, api.ScheduleAliveWaiting})
}

// appendRecords appends the records of jobs' tasks to dst.
func (e *Env) appendRecords(ctx context.Context, dst []api.ManagedJobRecord, jobs []*state.ManagedJob, b api.JobsQueueBody, maxWaiting int) ([]api.ManagedJobRecord, error) {
	var summaries map[int]api.ManagedEventSummary
	if b.Verbose && len(jobs) > 0 {
		ids := make([]int, len(jobs))
		for i, j := range jobs {
			ids[i] = j.JobID
		}
		var err error
		if summaries, err = e.Store.ManagedEventSummaries(ctx, ids); err != nil {
			return nil, err
		}
	}
	t0 := e.now()
	for _, j := range jobs {
		for _, t := range j.Tasks {
			rec := record(j, t, t0)
			if b.AllUsers {
				rec.UserName = ptr(j.UserName)
				if b.Verbose {
					rec.UserHash = ptr(j.UserHash)
				}
			}
			if b.Verbose {
				verbose(&rec, j, t, maxWaiting)
				if s, ok := summaries[j.JobID]; ok {
					rec.Events = &s
				}
			}
			dst = append(dst, rec)
		}
	}
	return dst, nil
}

func ptr[T any](v T) *T { return &v }

func onInfra(j *state.ManagedJob, want string) bool {
	for _, t := range j.Tasks {
		where := strings.ToLower(t.Infra)
		cloud := strings.ToLower(t.Cloud)
		if t.Region != "" {
			cloud += "/" + strings.ToLower(t.Region)
		}
		if where != "" && (where == want || strings.HasPrefix(where, want+"/")) {
			return true
		}
		if cloud != "" && (cloud == want || strings.HasPrefix(cloud, want+"/")) {
			return true
		}
	}
	return false
}

// record is the default fields of a task's queue record.
func record(j *state.ManagedJob, t *state.ManagedTask, t0 float64) api.ManagedJobRecord {
	rec := api.ManagedJobRecord{
		JobID: j.JobID, TaskID: t.TaskID, JobName: j.Name, TaskName: t.Name, Workspace: j.Workspace,
		Status: t.Status, Resources: t.Resources, RecoveryCount: t.RecoveryCount, SubmittedAt: j.SubmittedAt,
		Execution: j.Execution, IsJobGroup: j.Execution == "parallel", IsPrimaryInJobGroup: t.Primary,
		JobDuration: duration(t, t0), NumJobs: max(j.NumJobs, 1), JobRank: j.JobRank, DependsOn: j.DependsOn,
	}
	if t.EndAt > 0 {
		rec.EndAt = ptr(t.EndAt)
	}
	if j.Pool != "" {
		// A pool job's worker and its job there stay shown after it
		// ended: they say where it ran (POOL, WORKER_CLUSTER, WORKER_JOB_ID).
		rec.Pool = ptr(j.Pool)
		if t.ClusterName != "" {
			rec.CurrentClusterName = ptr(t.ClusterName)
		}
		if t.AgentJobID > 0 {
			rec.JobIDOnPoolCluster = ptr(t.AgentJobID)
		}
	}
	if j.ParentJobID > 0 {
		rec.ParentJobID = ptr(j.ParentJobID)
	}
	end := t0
	if j.EndAt > 0 {
		end = j.EndAt
	}
	rec.TotalDuration = end - j.SubmittedAt
	return rec
}

// duration is SkyPilot's job_duration: while RECOVERING the stored sum,
// otherwise the time since the last (re)start plus what came before.
func duration(t *state.ManagedTask, t0 float64) float64 {
	if t.StartAt == 0 {
		return 0
	}
	if t.Status == api.ManagedRecovering || api.ManagedTerminal(t.Status) || t.Status == api.ManagedCancelling {
		return t.JobDuration
	}
	if t.LastRecoveredAt == 0 {
		return t.JobDuration
	}
	return t.JobDuration + (t0 - t.LastRecoveredAt)
}

// verbose adds the fields of -v.
func verbose(rec *api.ManagedJobRecord, j *state.ManagedJob, t *state.ManagedTask, maxWaiting int) {
	rec.ScheduleState = ptr(j.ScheduleState)
	if t.StartAt > 0 {
		rec.StartAt = ptr(t.StartAt)
	}
	if t.LastRecoveredAt > 0 {
		rec.LastRecoveredAt = ptr(t.LastRecoveredAt)
	}
	if t.RunTimestamp != "" {
		rec.RunTimestamp = ptr(t.RunTimestamp)
	}
	for _, p := range []struct {
		dst **string
		v   string
	}{{&rec.Cloud, t.Cloud}, {&rec.Region, t.Region}, {&rec.Zone, t.Zone}, {&rec.Infra, t.Infra},
		{&rec.ClusterResources, t.ClusterResources}, {&rec.ClusterResourcesFull, t.ClusterResources},
		{&rec.FailureReason, t.FailureReason}, {&rec.Entrypoint, j.Entrypoint}, {&rec.UserYAML, j.UserYAML},
		{&rec.PriorityClass, j.PriorityClass}} {
		if p.v != "" {
			*p.dst = ptr(p.v)
		}
	}
	if t.ClusterName != "" && !t.ClusterGone && !api.ManagedTerminal(t.Status) {
		rec.CurrentClusterName = ptr(t.ClusterName)
		rec.ClusterNameOnCloud = ptr(t.ClusterName)
	}
	rec.Priority = ptr(j.Priority)
	rec.NodeNames = t.NodeNames
	rec.InternalExternalIPs = t.IPs
	rec.Metadata = map[string]any{}
	if d := details(j, t, maxWaiting); d != "" {
		rec.Details = ptr(d)
	}
}

// details is the one-line explanation of a task's current state, as
// SkyPilot words it (managed-jobs.md §details), plus what SkyGo knows
// beyond: a job waiting for its dependencies, a cancellation under way.
func details(j *state.ManagedJob, t *state.ManagedTask, maxWaiting int) string {
	state := ""
	switch {
	case j.Cancel != nil && !api.ManagedTerminal(t.Status):
		who := j.Cancel.By
		if who == "" {
			who = "the controller"
		}
		s := "Cancellation requested by " + who
		if j.Cancel.RequestID != "" {
			s += " (request " + j.Cancel.RequestID + ")"
		}
		if j.Cancel.Reason != "" {
			s = "Cancellation requested: " + j.Cancel.Reason
		}
		return s
	case j.ScheduleState == api.ScheduleAliveBackoff && wantsLaunch(t) && j.Pool != "":
		state = "Waiting for a free worker of pool " + j.Pool
	case j.ScheduleState == api.ScheduleAliveBackoff && wantsLaunch(t):
		state = "In backoff, waiting for resources"
	case (j.ScheduleState == api.ScheduleWaiting || j.ScheduleState == api.ScheduleAliveWaiting) && wantsLaunch(t):
		if len(j.DependsOn) > 0 && j.ScheduleState == api.ScheduleWaiting {
			state = fmt.Sprintf("Waiting for job(s) %s to succeed", joinInts(j.DependsOn))
		} else if j.Priority < maxWaiting {
			state = "Waiting for higher priority jobs to launch"
		} else {
			state = "Waiting for other jobs to launch"
		}
	case j.ScheduleState == api.ScheduleLaunching && wantsLaunch(t) && t.Launching && t.Status != api.ManagedRecovering:
		// A recovery's relaunch keeps saying why it recovers (below), as
		// the job-investigation guide reads it.
		state = "Launching"
		if t.LaunchProgress != "" {
			state = t.LaunchProgress
		}
	}
	switch {
	case state != "" && t.FailureReason != "":
		return state + " - " + t.FailureReason
	case t.FailureReason != "":
		return "Failure: " + t.FailureReason
	case state != "":
		return state
	case t.Status == api.ManagedRecovering && t.RecoverReason != "":
		return "Recovering: " + strings.Join(strings.Fields(t.RecoverReason), " ")
	}
	return ""
}
