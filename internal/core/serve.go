package core

import (
	"context"
	"path/filepath"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
)

// The serve operations: thin shells over internal/serve, which owns the
// services' records and their controllers.

func (e *Env) serveOps() []op.Op {
	return []op.Op{
		{Name: "serve.up", Schedule: op.Long, Body: api.ServeUpBody{}, Result: api.ServeUpResult{}, Run: e.serveUp},
		{Name: "serve.update", Schedule: op.Long, Body: api.ServeUpdateBody{}, Result: api.ServeUpdateResult{}, Run: e.serveUpdate},
		{Name: "serve.status", Schedule: op.Short, Body: api.ServeStatusBody{}, Result: []api.ServiceRecord{}, Run: e.serveStatus},
		{Name: "serve.down", Schedule: op.Long, Body: api.ServeDownBody{}, Result: api.ServeDownResult{}, Run: e.serveDown},
		{Name: "serve.terminate-replica", Schedule: op.Short, Body: api.ServeTerminateReplicaBody{}, Result: op.Null{}, Run: e.serveTerminateReplica},
		{Name: "serve.logs", Schedule: op.Follow, CancelWhenUnfollowed: true, Body: api.ServeLogsBody{}, Result: op.Null{}, Run: e.serveLogs},
		{Name: "serve.sync-down-logs", Schedule: op.Short, Body: api.ServeSyncDownBody{}, Result: api.LogsDownload{}, Run: e.serveSyncDown},
	}
}

func (e *Env) serveUp(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeUpBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	if err := submittedService(&b.Task, &b.Service, b.TaskYAML, b.UploadID); err != nil {
		return nil, err
	}
	b.TaskYAML, b.UploadID = "", ""
	cfg, err := e.requestConfig(r)
	if err != nil {
		return nil, err
	}
	if err := e.Backend.CheckVolumeAccess(ctx, []api.TaskSpec{b.Task}, userOf(r)); err != nil {
		return nil, opErr(err)
	}
	return e.Serve.Up(ctx, b, r.User, cfg.ActiveWorkspace(), r.Log)
}

func (e *Env) serveUpdate(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeUpdateBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	if err := submittedService(&b.Task, &b.Service, b.TaskYAML, b.UploadID); err != nil {
		return nil, err
	}
	b.TaskYAML, b.UploadID = "", ""
	cfg, err := e.requestConfig(r)
	if err != nil {
		return nil, err
	}
	if err := e.Backend.CheckVolumeAccess(ctx, []api.TaskSpec{b.Task}, userOf(r)); err != nil {
		return nil, opErr(err)
	}
	return e.Serve.Update(ctx, b, r.User, cfg.ActiveWorkspace(), r.Log)
}

func (e *Env) serveStatus(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeStatusBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return e.Serve.Status(ctx, b, r.User)
}

func (e *Env) serveDown(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeDownBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return e.Serve.Down(ctx, b, r.User, r.Log)
}

func (e *Env) serveTerminateReplica(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeTerminateReplicaBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return nil, e.Serve.TerminateReplica(ctx, b, r.User, r.Log)
}

func (e *Env) serveLogs(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeLogsBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return nil, e.Serve.Logs(ctx, b, r.User, r.Log)
}

// serveSyncDown leaves the service's logs in the request's files
// directory, as <service>/<file>, for the client to fetch.
func (e *Env) serveSyncDown(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeSyncDownBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	files, err := e.Serve.SyncDown(ctx, b, r.User, filepath.Join(r.Files, b.Name))
	if err != nil {
		return nil, err
	}
	return api.LogsDownload{RequestID: r.ID, Jobs: []api.JobLogs{{RunTimestamp: b.Name, Files: files}}}, nil
}
