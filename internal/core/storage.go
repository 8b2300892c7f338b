package core

import (
	"context"
	"errors"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/op"
)

// storageLs is sky.storage_ls: the buckets SkyGo created.
func (e *Env) storageLs(ctx context.Context, r *op.Request, _ op.NoBody) ([]api.StorageRecord, error) {
	return e.Backend.ListStorage(ctx)
}

// storageDelete is sky.storage_delete: one storage, its sky-managed
// buckets with their objects, then its record.
func (e *Env) storageDelete(ctx context.Context, r *op.Request, b api.StorageBody) (op.Null, error) {
	if b.Name == "" {
		return op.Null{}, &op.Error{Type: "ValueError", Message: "name the storage to delete (`sky storage ls` lists them)"}
	}
	err := e.Backend.DeleteStorage(ctx, b.Name, r.Log)
	if errors.Is(err, backend.ErrStorageNotFound) {
		return op.Null{}, &op.Error{Type: "ValueError", Message: "Storage name '" + b.Name + "' not found."}
	}
	if err != nil {
		return op.Null{}, err
	}
	return op.Null{}, nil
}
