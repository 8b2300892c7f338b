package core

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
)

// The serve operations: thin shells over internal/serve, which owns the
// services' records and their controllers.

func (e *Env) serveOps() []op.Op {
	return []op.Op{
		{Name: "serve.up", Schedule: op.Long, Run: e.serveUp},
		{Name: "serve.update", Schedule: op.Long, Run: e.serveUpdate},
		{Name: "serve.status", Schedule: op.Short, Run: e.serveStatus},
		{Name: "serve.down", Schedule: op.Long, Run: e.serveDown},
		{Name: "serve.terminate-replica", Schedule: op.Short, Run: e.serveTerminateReplica},
		{Name: "serve.logs", Schedule: op.Follow, CancelWhenUnfollowed: true, Run: e.serveLogs},
		{Name: "serve.sync-down-logs", Schedule: op.Short, Run: e.serveSyncDown},
	}
}

func (e *Env) serveUp(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeUpBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	cfg, err := e.requestConfig(r)
	if err != nil {
		return nil, err
	}
	return e.Serve.Up(ctx, b, r.User, cfg.ActiveWorkspace(), r.Log)
}

func (e *Env) serveUpdate(ctx context.Context, r *op.Request) (any, error) {
	var b api.ServeUpdateBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	cfg, err := e.requestConfig(r)
	if err != nil {
		return nil, err
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
	srcs, err := e.Serve.LogFiles(ctx, b, r.User)
	if err != nil {
		return nil, err
	}
	return copyLogFiles(r, b.Name, srcs)
}

// copyLogFiles copies a controller's log files into the request's files
// directory as <dir>/<name>.
func copyLogFiles(r *op.Request, dir string, srcs map[string]string) (api.LogsDownload, error) {
	out := filepath.Join(r.Files, dir)
	if err := os.MkdirAll(out, 0o700); err != nil {
		return api.LogsDownload{}, err
	}
	jl := api.JobLogs{RunTimestamp: dir, Files: []string{}}
	for name, src := range srcs {
		raw, err := os.ReadFile(src)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return api.LogsDownload{}, err
		}
		if err := os.WriteFile(filepath.Join(out, name), raw, 0o600); err != nil {
			return api.LogsDownload{}, err
		}
		jl.Files = append(jl.Files, name)
	}
	sort.Strings(jl.Files)
	return api.LogsDownload{RequestID: r.ID, Jobs: []api.JobLogs{jl}}, nil
}
