package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Storage statuses (SkyPilot's StorageStatus).
const (
	StorageInit         = "INIT"
	StorageInitFailed   = "INIT_FAILED"
	StorageUploadFailed = "UPLOAD_FAILED"
	StorageReady        = "READY"
)

// Storage is one row of the storage table: a bucket SkyGo created.
type Storage struct {
	Name       string
	LaunchedAt float64
	// Handle is internal/backend's JSON of the storage (its stores,
	// region, sky-managed flag); the table does not look inside.
	Handle  string
	LastUse string
	Status  string
}

// PutStorage records a storage in INIT, or takes an existing record back
// to INIT for a new construction (a relaunch uploading again), with this
// command as its last use.
func (s *Store) PutStorage(ctx context.Context, st Storage) error {
	if st.LaunchedAt == 0 {
		st.LaunchedAt = nowSeconds()
	}
	_, err := s.exec(ctx, "put storage", `INSERT INTO storage (name, launched_at, handle, last_use, status) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET launched_at = excluded.launched_at, handle = excluded.handle,
		last_use = excluded.last_use, status = excluded.status`,
		st.Name, st.LaunchedAt, st.Handle, st.LastUse, StorageInit)
	return err
}

// SetStorageStatus moves a storage to status to, only from one of from
// (compare-and-set: two constructions or a delete racing each see who
// won). It reports whether the row changed.
func (s *Store) SetStorageStatus(ctx context.Context, name string, from []string, to string) (bool, error) {
	q := `UPDATE storage SET status = ? WHERE name = ? AND status IN (?` + repeatPlaceholders(len(from)-1) + `)`
	args := []any{to, name}
	for _, f := range from {
		args = append(args, f)
	}
	if len(from) == 0 {
		return false, fmt.Errorf("set storage status: no from status")
	}
	res, err := s.exec(ctx, "set storage status", q, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func repeatPlaceholders(n int) string {
	out := ""
	for range n {
		out += ", ?"
	}
	return out
}

// GetStorage reads one storage; ErrNotFound when there is none.
func (s *Store) GetStorage(ctx context.Context, name string) (*Storage, error) {
	st := Storage{Name: name}
	err := s.queryRow(ctx, "get storage", `SELECT launched_at, handle, last_use, status FROM storage WHERE name = ?`, name).
		Scan(&st.LaunchedAt, &st.Handle, &st.LastUse, &st.Status)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("storage %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get storage: %w", err)
	}
	return &st, nil
}

// ListStorage is every storage, by name.
func (s *Store) ListStorage(ctx context.Context) ([]Storage, error) {
	rows, err := s.query(ctx, "list storage", `SELECT name, launched_at, handle, last_use, status FROM storage ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Storage
	for rows.Next() {
		var st Storage
		if err := rows.Scan(&st.Name, &st.LaunchedAt, &st.Handle, &st.LastUse, &st.Status); err != nil {
			return nil, fmt.Errorf("list storage: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// RemoveStorage forgets a storage; it reports whether there was one.
func (s *Store) RemoveStorage(ctx context.Context, name string) (bool, error) {
	res, err := s.exec(ctx, "remove storage", `DELETE FROM storage WHERE name = ?`, name)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
