package core

import (
	"context"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
)

// The pool operations: thin shells over internal/jobs, which owns the
// pools' records and their controllers.

func (e *Env) poolApply(ctx context.Context, r *op.Request) (any, error) {
	var b api.PoolApplyBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	cfg, err := e.requestConfig(r)
	if err != nil {
		return nil, err
	}
	return e.Jobs.PoolApply(ctx, b, r.User, cfg.ActiveWorkspace(), r.Log)
}

func (e *Env) poolStatus(ctx context.Context, r *op.Request) (any, error) {
	var b api.PoolStatusBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return e.Jobs.PoolStatus(ctx, b)
}

func (e *Env) poolDown(ctx context.Context, r *op.Request) (any, error) {
	var b api.PoolDownBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return e.Jobs.PoolDown(ctx, b, r.User, r.Log)
}

func (e *Env) poolLogs(ctx context.Context, r *op.Request) (any, error) {
	var b api.PoolLogsBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return nil, e.Jobs.PoolLogs(ctx, b, r.Log)
}

// poolSyncDown leaves the pool's logs in the request's files directory,
// as <pool>/<file>, for the client to fetch.
func (e *Env) poolSyncDown(ctx context.Context, r *op.Request) (any, error) {
	var b api.PoolSyncDownBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	srcs, err := e.Jobs.PoolLogFiles(ctx, b)
	if err != nil {
		return nil, err
	}
	return copyLogFiles(r, b.Name, srcs)
}
