package core

import (
	"context"
	"errors"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/op"
)

// storageLs is sky.storage_ls: the buckets SkyGo created.
func (e *Env) storageLs(ctx context.Context, r *op.Request) (any, error) {
	return e.Backend.ListStorage(ctx)
}

// storageDelete is sky.storage_delete: one storage, its sky-managed
// buckets with their objects, then its record.
func (e *Env) storageDelete(ctx context.Context, r *op.Request) (any, error) {
	var b api.StorageBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	if b.Name == "" {
		return nil, &op.Error{Type: "ValueError", Message: "name the storage to delete (`sky storage ls` lists them)"}
	}
	err := e.Backend.DeleteStorage(ctx, b.Name, r.Log)
	if errors.Is(err, backend.ErrStorageNotFound) {
		return nil, &op.Error{Type: "ValueError", Message: "Storage name '" + b.Name + "' not found."}
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}
