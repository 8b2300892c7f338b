package jobs

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/state"
)

// requestCancel records a cancellation on a job. A job no controller has
// claimed yet (WAITING) ends CANCELLED at once, and so do the jobs
// attached to it; any other is cancelled by its controller, whose launch
// in flight, if any, is interrupted.
func (e *Env) requestCancel(ctx context.Context, id int, c state.ManagedCancel) error {
	done, err := e.markCancel(ctx, id, c)
	if err != nil || !done {
		return err
	}
	e.cancelAttached(ctx, []int{id})
	return nil
}

// markCancel is requestCancel without the attached jobs: it says whether
// the job is DONE now, so that its attached jobs are to go too.
func (e *Env) markCancel(ctx context.Context, id int, c state.ManagedCancel) (bool, error) {
	t0 := e.now()
	j, err := e.Store.UpdateManagedJob(ctx, id, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		if n.ScheduleState == api.ScheduleDone || n.Cancel != nil || allEnded(n) {
			return nil, state.ErrNoChange
		}
		cc := c
		n.Cancel = &cc
		if n.ScheduleState != api.ScheduleWaiting && n.ScheduleState != api.ScheduleInactive {
			return nil, nil
		}
		// Never claimed: nothing was launched, nothing to clean up.
		var ev []state.ManagedEventIn
		for _, t := range n.Tasks {
			if !api.ManagedTerminal(t.Status) {
				t.Status, t.EndAt = api.ManagedCancelled, t0
				ev = append(ev, state.TaskEvent(t.TaskID, api.ManagedCancelled, "Job has been cancelled"+cancelledBy(&cc)))
			}
		}
		n.ScheduleState, n.EndAt = api.ScheduleDone, t0
		return ev, nil
	})
	if err != nil {
		return false, err
	}
	if j.ScheduleState != api.ScheduleDone {
		e.interrupt(id)
		e.poke(id)
		return false, nil
	}
	if j.EndAt == t0 { // this call ended it: no reconcile will say so
		e.note(id, "Job %d cancelled%s.", id, cancelledBy(j.Cancel))
	}
	e.kick()
	return true, nil
}

// cancelAttached cancels the live jobs attached (--job-group) to the
// given ones, looking them up a few hundred parents at a time, so that
// `sky jobs cancel -a` of a long queue costs a few queries, not one per
// job.
func (e *Env) cancelAttached(ctx context.Context, parents []int) {
	t0 := e.now()
	for len(parents) > 0 {
		chunk := parents[:min(len(parents), 500)]
		parents = parents[len(chunk):]
		kids, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{ParentIDs: chunk, NotDone: true})
		if err != nil {
			continue
		}
		for _, k := range kids {
			_ = e.requestCancel(ctx, k.JobID, state.ManagedCancel{At: t0, Reason: fmt.Sprintf("its job group %d was cancelled", k.ParentJobID)})
		}
	}
}

// Cancel carries out `sky jobs cancel`: it selects the jobs, skips the
// ones that ended, and records the cancellation of the others.
func (e *Env) Cancel(ctx context.Context, b api.JobsCancelBody, u api.User, admin bool, requestID string) (api.JobsCancelResult, error) {
	f := state.ManagedFilter{NotDone: true}
	if !b.AllUsers {
		f.UserHash = u.ID
	} else if !admin && u.ID != "" {
		// Without the admin role, -u cancels one's own jobs only.
		f.UserHash = u.ID
	}
	switch {
	case len(b.JobIDs) > 0:
		f.IDs = b.JobIDs
	case b.Name != "":
		f.Name = b.Name
	case b.Pool != "":
		f.Pool = b.Pool
	}
	if b.Task != "" {
		return api.JobsCancelResult{}, &op.Error{Type: "ValueError", Message: "--task cancels a dynamic task (a job launched from inside another); give the attached job's own ID instead: it is shown under its group in `sky jobs queue`"}
	}
	jobs, err := e.Store.ListManagedJobs(ctx, f)
	if err != nil {
		return api.JobsCancelResult{}, err
	}
	if b.Name != "" && len(jobs) > 1 {
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = fmt.Sprint(j.JobID)
		}
		return api.JobsCancelResult{}, &op.Error{Type: "ValueError", Message: fmt.Sprintf(
			"Multiple running jobs found with name %q. Job IDs: %s. Cancel by ID instead.", b.Name, strings.Join(ids, ", "))}
	}
	var ids, ended []int
	for _, j := range jobs {
		if allEnded(j) {
			continue
		}
		done, err := e.markCancel(ctx, j.JobID, state.ManagedCancel{By: u.Name, RequestID: requestID, At: e.now(),
			Graceful: b.Graceful, GracefulTimeout: b.GracefulTimeout})
		if err != nil {
			return api.JobsCancelResult{}, err
		}
		if done {
			ended = append(ended, j.JobID)
		}
		ids = append(ids, j.JobID)
	}
	e.cancelAttached(ctx, ended)
	sort.Ints(ids)
	res := api.JobsCancelResult{Cancelled: ids}
	switch len(ids) {
	case 0:
		if len(b.JobIDs) > 0 {
			res.Message = fmt.Sprintf("No job to cancel. Job(s) %s not found or already finished.", joinInts(b.JobIDs))
		} else {
			res.Message = "No job to cancel."
		}
	case 1:
		res.Message = fmt.Sprintf("Job with ID %d is scheduled to be cancelled.", ids[0])
	default:
		res.Message = fmt.Sprintf("Jobs with IDs %s are scheduled to be cancelled.", joinInts(ids))
	}
	if res.Cancelled == nil {
		res.Cancelled = []int{}
	}
	return res, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
