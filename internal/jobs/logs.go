package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

// ExitCode is the managed-job exit convention of `sky jobs logs`: 0
// succeeded, 100 failed, 101 not finished, 103 cancelled (102: not found).
func ExitCode(status string) int {
	switch {
	case status == api.ManagedSucceeded:
		return 0
	case status == api.ManagedCancelled:
		return 103
	case api.ManagedFailure(status):
		return 100
	}
	return 101
}

// Find resolves the job a command names: an id, a name (the newest job
// of that name), or the user's newest job. Admins see every user's.
func (e *Env) Find(ctx context.Context, id int, name string, u api.User, admin bool) (*state.ManagedJob, error) {
	f := state.ManagedFilter{Limit: 1}
	if !admin {
		f.UserHash = u.ID
	}
	switch {
	case id > 0:
		f.IDs = []int{id}
	case name != "":
		f.Name = name
	}
	js, err := e.Store.ListManagedJobs(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(js) == 0 {
		return nil, state.ErrNotFound
	}
	return js[0], nil
}

// Events returns a job's timeline.
func (e *Env) Events(ctx context.Context, id int) ([]api.ManagedEvent, error) {
	return e.Store.ManagedEvents(ctx, id)
}

// Logs writes a job's log to w (`sky jobs logs`): the controller's log,
// or the tasks' logs — live from the cluster while a task runs, the copy
// kept on the server once it ended — waiting with follow until the job
// ends.
func (e *Env) Logs(ctx context.Context, b api.JobsLogsBody, u api.User, admin bool, w io.Writer) (api.JobsLogsResult, error) {
	j, err := e.Find(ctx, b.JobID, b.Name, u, admin)
	if errors.Is(err, state.ErrNotFound) {
		what := "No managed job found."
		if b.JobID > 0 {
			what = fmt.Sprintf("Managed job %d not found.", b.JobID)
		} else if b.Name != "" {
			what = fmt.Sprintf("No managed job named %q found.", b.Name)
		}
		fmt.Fprintln(w, what)
		return api.JobsLogsResult{JobID: b.JobID, ExitCode: 102}, nil
	}
	if err != nil {
		return api.JobsLogsResult{}, err
	}
	if w, err = e.redacted(ctx, j.JobID, w); err != nil {
		return api.JobsLogsResult{}, err
	}
	if c, ok := w.(io.Closer); ok {
		defer c.Close()
	}
	if b.Controller {
		if b.Events {
			ev, err := e.Events(ctx, j.JobID)
			if err != nil {
				return api.JobsLogsResult{}, err
			}
			if ev == nil {
				ev = []api.ManagedEvent{}
			}
			return api.JobsLogsResult{JobID: j.JobID, Status: j.JobStatus(), ExitCode: ExitCode(j.JobStatus()), Events: ev}, nil
		}
		return e.controllerLog(ctx, j, b, w)
	}
	tasks := []int{}
	if b.Task != "" {
		tid := -1
		if n, err := strconv.Atoi(b.Task); err == nil && n >= 0 && n < len(j.Tasks) {
			tid = n
		} else {
			for _, t := range j.Tasks {
				if t.Name == b.Task {
					tid = t.TaskID
				}
			}
		}
		if tid < 0 {
			return api.JobsLogsResult{}, &op.Error{Type: "ValueError", Message: fmt.Sprintf(
				"No task found matching '%s' in job %d. Valid task IDs are 0-%d.", b.Task, j.JobID, len(j.Tasks)-1)}
		}
		tasks = append(tasks, tid)
	} else {
		for _, t := range j.Tasks {
			tasks = append(tasks, t.TaskID)
		}
		if len(j.Tasks) > 1 {
			fmt.Fprintf(w, "Hint: This job has %d tasks. Use 'sky jobs logs %d TASK' to view logs for a specific task (TASK can be task ID or name).\n", len(j.Tasks), j.JobID)
		}
	}
	for _, tid := range tasks {
		if len(j.Tasks) > 1 {
			fmt.Fprintf(w, "=== Task %s(%d) ===\n", j.Tasks[tid].Name, tid)
		}
		if err := e.taskLog(ctx, j.JobID, tid, b, w); err != nil {
			return api.JobsLogsResult{}, err
		}
		if !b.Follow {
			continue
		}
	}
	for {
		if j, err = e.Store.GetManagedJob(ctx, j.JobID, false); err != nil {
			return api.JobsLogsResult{}, err
		}
		// Followed to the end: the job is done once its clusters are.
		if !b.Follow || j.ScheduleState == api.ScheduleDone {
			break
		}
		select {
		case <-ctx.Done():
			return api.JobsLogsResult{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	st := j.JobStatus()
	code := ExitCode(st)
	if !allEnded(j) {
		code = 101
	}
	return api.JobsLogsResult{JobID: j.JobID, Status: st, ExitCode: code}, nil
}

// taskLog writes one task's log. Each attempt that runs while it
// follows is streamed from its cluster; what it did not see live comes
// from the copy on the server.
func (e *Env) taskLog(ctx context.Context, id, tid int, b api.JobsLogsBody, w io.Writer) error {
	streamed := map[int]bool{} // attempts shown live
	waiting := false
	live := &countingWriter{w: w}
	for {
		j, err := e.Store.GetManagedJob(ctx, id, false)
		if err != nil {
			return err
		}
		t := j.Tasks[tid]
		switch {
		case api.ManagedTerminal(t.Status):
			// A run so short that it ended as the live stream began may
			// have shown nothing: the server's copy (saved before the
			// task was marked ended) has it.
			if len(streamed) == 0 || live.n == 0 {
				return ux.PrintTail(TaskLogPath(e.Home, id, tid), b.Tail, w)
			}
			return nil
		case t.Status == api.ManagedRunning && t.AgentJobID > 0 && !streamed[t.Attempt]:
			if !b.Follow {
				// The attempts before this one are on the server.
				if t.Attempt > 1 {
					_ = ux.PrintTail(TaskLogPath(e.Home, id, tid), 0, w)
				}
				return e.Backend.CopyJobLog(ctx, t.ClusterName, e.actor(j), t.AgentJobID, b.Tail, false, w)
			}
			if len(streamed) == 0 && t.Attempt > 1 {
				_ = ux.PrintTail(TaskLogPath(e.Home, id, tid), b.Tail, w)
			}
			streamed[t.Attempt] = true
			waiting = false
			tail := b.Tail
			if len(streamed) > 1 {
				tail = 0
			}
			if err := e.Backend.CopyJobLog(ctx, t.ClusterName, e.actor(j), t.AgentJobID, tail, true, live); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		case !b.Follow:
			fmt.Fprintf(w, "Job %d's task %d is %s; it has no log yet.\n", id, tid, t.Status)
			return nil
		case t.Status == api.ManagedRunning:
			// Streamed; the controller has yet to record how it ended.
		case !waiting:
			waiting = true
			if t.Status == api.ManagedRecovering {
				fmt.Fprintf(w, "Job %d is RECOVERING: %s\n", id, t.RecoverReason)
			} else {
				fmt.Fprintf(w, "Waiting for job %d to start (%s)...\n", id, t.Status)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// controllerLog writes a job's controller log; with follow it goes on
// until the job is DONE.
func (e *Env) controllerLog(ctx context.Context, j *state.ManagedJob, b api.JobsLogsBody, w io.Writer) (api.JobsLogsResult, error) {
	p := ControllerLogPath(e.Home, j.JobID)
	if err := ux.PrintTail(p, b.Tail, w); err != nil {
		return api.JobsLogsResult{}, err
	}
	if b.Follow {
		off := int64(0)
		if fi, err := os.Stat(p); err == nil {
			off = fi.Size()
		}
		for {
			cur, err := e.Store.GetManagedJob(ctx, j.JobID, false)
			if err != nil {
				return api.JobsLogsResult{}, err
			}
			off = ux.CopyFrom(p, off, w)
			if cur.ScheduleState == api.ScheduleDone {
				j = cur
				break
			}
			select {
			case <-ctx.Done():
				return api.JobsLogsResult{}, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	st := j.JobStatus()
	code := ExitCode(st)
	if !allEnded(j) {
		code = 101
	}
	return api.JobsLogsResult{JobID: j.JobID, Status: st, ExitCode: code}, nil
}

// countingWriter counts what a live log stream wrote.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
