package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/jobs"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/state"
)

// The managed-jobs operations: each is a thin shell over internal/jobs,
// which owns the records and the controller.

func (e *Env) jobsLaunch(ctx context.Context, r *op.Request, b api.JobsLaunchBody) (api.JobsLaunchResult, error) {
	// Before the YAML is parsed: its size in tasks is what is bounded.
	if err := jobs.CheckDAGDocs(b.DAGYAML, e.Jobs.SubmitLimits()); err != nil {
		return api.JobsLaunchResult{}, err
	}
	if err := submittedJobs(&b); err != nil {
		return api.JobsLaunchResult{}, err
	}
	cfg, err := e.requestConfig(r)
	if err != nil {
		return api.JobsLaunchResult{}, err
	}
	if err := e.Backend.CheckVolumeAccess(ctx, b.Tasks, userOf(r)); err != nil {
		return api.JobsLaunchResult{}, opErr(err)
	}
	return e.Jobs.Submit(ctx, b, r.User, cfg.ActiveWorkspace(), r.Log)
}

func (e *Env) jobsQueue(ctx context.Context, r *op.Request, b api.JobsQueueBody) (api.JobsQueueResult, error) {
	hidden, err := e.hiddenWorkspaces(r)
	if err != nil {
		return api.JobsQueueResult{}, err
	}
	b.HiddenWorkspaces = hidden
	return e.Jobs.Queue(ctx, b, r.User)
}

// jobsQueueStream is jobs.queue served as a stream (POST
// /jobs/queue/stream): every record of the selection, one at a time.
func (e *Env) jobsQueueStream(ctx context.Context, r *op.Request, b api.JobsQueueBody, emit func(*api.ManagedJobRecord) error) error {
	hidden, err := e.hiddenWorkspaces(r)
	if err != nil {
		return err
	}
	b.HiddenWorkspaces = hidden
	return e.Jobs.QueueEach(ctx, b, r.User, emit)
}

func (e *Env) jobsCancel(ctx context.Context, r *op.Request, b api.JobsCancelBody) (api.JobsCancelResult, error) {
	return e.Jobs.Cancel(ctx, b, r.User, r.User.Role == state.RoleAdmin, r.ID)
}

func (e *Env) jobsLogs(ctx context.Context, r *op.Request, b api.JobsLogsBody) (api.JobsLogsResult, error) {
	return e.Jobs.Logs(ctx, b, r.User, r.User.Role == state.RoleAdmin, r.Log)
}

// jobsDownloadLogs leaves the selected jobs' logs (the task logs kept on
// the server, or the controller log) in the request's files directory,
// as <job id>/<file>, for the client to fetch.
func (e *Env) jobsDownloadLogs(ctx context.Context, r *op.Request, b api.JobsDownloadBody) (api.LogsDownload, error) {
	admin := r.User.Role == state.RoleAdmin
	var picked []*state.ManagedJob
	if len(b.JobIDs) == 0 {
		j, err := e.Jobs.Find(ctx, 0, b.Name, r.User, admin)
		if err != nil {
			return api.LogsDownload{}, notFoundJob(err, 0)
		}
		picked = append(picked, j)
	}
	for _, id := range b.JobIDs {
		j, err := e.Jobs.Find(ctx, id, "", r.User, admin)
		if err != nil {
			return api.LogsDownload{}, notFoundJob(err, id)
		}
		picked = append(picked, j)
	}
	out := api.LogsDownload{RequestID: r.ID}
	for _, j := range picked {
		dir := filepath.Join(r.Files, strconv.Itoa(j.JobID))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return api.LogsDownload{}, err
		}
		jl := api.JobLogs{JobID: j.JobID, RunTimestamp: strconv.Itoa(j.JobID)}
		var srcs map[string]string
		if b.Controller {
			srcs = map[string]string{"controller.log": jobs.ControllerLogPath(e.Home, j.JobID)}
		} else {
			srcs = map[string]string{}
			for _, t := range j.Tasks {
				srcs[fmt.Sprintf("task-%d.log", t.TaskID)] = jobs.TaskLogPath(e.Home, j.JobID, t.TaskID)
			}
		}
		secrets, err := e.Jobs.Secrets(ctx, j.JobID)
		if err != nil {
			return api.LogsDownload{}, err
		}
		for name, src := range srcs {
			raw, err := os.ReadFile(src)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return api.LogsDownload{}, err
			}
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return api.LogsDownload{}, err
			}
			w := newRedactingLog(f, secrets)
			_, werr := w.Write(raw)
			closeLog(w)
			if err := errors.Join(werr, f.Close()); err != nil {
				return api.LogsDownload{}, err
			}
			jl.Files = append(jl.Files, name)
		}
		out.Jobs = append(out.Jobs, jl)
	}
	return out, nil
}

func notFoundJob(err error, id int) error {
	if errors.Is(err, state.ErrNotFound) {
		if id > 0 {
			return &op.Error{Type: "ValueError", Message: fmt.Sprintf("Managed job %d not found.", id)}
		}
		return &op.Error{Type: "ValueError", Message: "No managed job found."}
	}
	return err
}
