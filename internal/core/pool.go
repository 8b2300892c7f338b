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

// The pool operations: thin shells over internal/jobs, which owns the
// pools' records and their controllers.

func (e *Env) poolApply(ctx context.Context, r *op.Request, b api.PoolApplyBody) (api.PoolApplyResult, error) {
	if err := submittedPool(&b); err != nil {
		return api.PoolApplyResult{}, err
	}
	cfg, err := e.requestConfig(r)
	if err != nil {
		return api.PoolApplyResult{}, err
	}
	return e.Jobs.PoolApply(ctx, b, r.User, cfg.ActiveWorkspace(), r.Log)
}

func (e *Env) poolStatus(ctx context.Context, r *op.Request, b api.PoolStatusBody) ([]api.PoolRecord, error) {
	return e.Jobs.PoolStatus(ctx, b, r.User)
}

func (e *Env) poolDown(ctx context.Context, r *op.Request, b api.PoolDownBody) (api.PoolDownResult, error) {
	return e.Jobs.PoolDown(ctx, b, r.User, r.Log)
}

func (e *Env) poolLogs(ctx context.Context, r *op.Request, b api.PoolLogsBody) (op.Null, error) {
	return op.Null{}, e.Jobs.PoolLogs(ctx, b, r.User, r.Log)
}

// poolSyncDown leaves the pool's logs in the request's files directory,
// as <pool>/<file>, for the client to fetch.
func (e *Env) poolSyncDown(ctx context.Context, r *op.Request, b api.PoolSyncDownBody) (api.LogsDownload, error) {
	srcs, err := e.Jobs.PoolLogFiles(ctx, b, r.User)
	if err != nil {
		return api.LogsDownload{}, err
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
