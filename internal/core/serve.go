package core

import (
	"context"
	"path/filepath"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/op"
)

// The serve operations: thin shells over internal/serve, which owns the
// services' records and their controllers.

func (e *Env) serveOps() []op.Op {
	return []op.Op{
		op.Handle(apiop.ServeUp, e.serveUp),
		op.Handle(apiop.ServeUpdate, e.serveUpdate),
		op.Handle(apiop.ServeStatus, e.serveStatus),
		op.Handle(apiop.ServeDown, e.serveDown),
		op.Handle(apiop.ServeTerminateReplica, e.serveTerminateReplica),
		op.Handle(apiop.ServeLogs, e.serveLogs),
		op.Handle(apiop.ServeSyncDownLogs, e.serveSyncDown),
	}
}

func (e *Env) serveUp(ctx context.Context, r *op.Request, b api.ServeUpBody) (api.ServeUpResult, error) {
	if err := submittedService(&b.Task, &b.Service, b.TaskYAML, b.UploadID); err != nil {
		return api.ServeUpResult{}, err
	}
	b.TaskYAML, b.UploadID = "", ""
	cfg, err := e.requestConfig(r)
	if err != nil {
		return api.ServeUpResult{}, err
	}
	if err := e.Backend.CheckVolumeAccess(ctx, []api.TaskSpec{b.Task}, userOf(r)); err != nil {
		return api.ServeUpResult{}, opErr(err)
	}
	return e.Serve.Up(ctx, b, r.User, cfg.ActiveWorkspace(), r.Log)
}

func (e *Env) serveUpdate(ctx context.Context, r *op.Request, b api.ServeUpdateBody) (api.ServeUpdateResult, error) {
	if err := submittedService(&b.Task, &b.Service, b.TaskYAML, b.UploadID); err != nil {
		return api.ServeUpdateResult{}, err
	}
	b.TaskYAML, b.UploadID = "", ""
	cfg, err := e.requestConfig(r)
	if err != nil {
		return api.ServeUpdateResult{}, err
	}
	if err := e.Backend.CheckVolumeAccess(ctx, []api.TaskSpec{b.Task}, userOf(r)); err != nil {
		return api.ServeUpdateResult{}, opErr(err)
	}
	return e.Serve.Update(ctx, b, r.User, cfg.ActiveWorkspace(), r.Log)
}

func (e *Env) serveStatus(ctx context.Context, r *op.Request, b api.ServeStatusBody) ([]api.ServiceRecord, error) {
	return e.Serve.Status(ctx, b, r.User)
}

func (e *Env) serveDown(ctx context.Context, r *op.Request, b api.ServeDownBody) (api.ServeDownResult, error) {
	return e.Serve.Down(ctx, b, r.User, r.Log)
}

func (e *Env) serveTerminateReplica(ctx context.Context, r *op.Request, b api.ServeTerminateReplicaBody) (op.Null, error) {
	return op.Null{}, e.Serve.TerminateReplica(ctx, b, r.User, r.Log)
}

func (e *Env) serveLogs(ctx context.Context, r *op.Request, b api.ServeLogsBody) (op.Null, error) {
	return op.Null{}, e.Serve.Logs(ctx, b, r.User, r.Log)
}

// serveSyncDown leaves the service's logs in the request's files
// directory, as <service>/<file>, for the client to fetch.
func (e *Env) serveSyncDown(ctx context.Context, r *op.Request, b api.ServeSyncDownBody) (api.LogsDownload, error) {
	files, err := e.Serve.SyncDown(ctx, b, r.User, filepath.Join(r.Files, b.Name))
	if err != nil {
		return api.LogsDownload{}, err
	}
	return api.LogsDownload{RequestID: r.ID, Jobs: []api.JobLogs{{RunTimestamp: b.Name, Files: files}}}, nil
}
