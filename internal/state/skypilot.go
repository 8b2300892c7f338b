package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// SkyPilot keeps its own ~/.sky/state.db. SkyGo's database is elsewhere
// (paths.StateDB); the functions here only look at SkyPilot's file, through
// SQLite's immutable mode, which takes no lock and creates no -wal or -shm
// file, so the file stays byte-identical.

func openImmutable(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("immutable", "1")
	return sql.Open("sqlite", "file:"+path+"?"+q.Encode())
}

// SkyPilotClusters lists the cluster names in SkyPilot's state database at
// path; a missing file, or one without a clusters table, gives none.
func SkyPilotClusters(ctx context.Context, path string) ([]string, error) {
	db, err := openImmutable(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if isSkyGoDB(ctx, db) {
		return nil, nil
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'clusters'`).Scan(&n); err != nil || n == 0 {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT name FROM clusters ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read SkyPilot's clusters in %s: %w", path, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// isSkyGoDB recognises a database SkyGo created: its schema_version table
// records SkyGo's own migration names.
func isSkyGoDB(ctx context.Context, db *sql.DB) bool {
	var name string
	err := db.QueryRowContext(ctx, `SELECT name FROM schema_version WHERE version = 3`).Scan(&name)
	return err == nil && name == migrations[2].name
}

// AdoptLegacySQLite moves a database that an earlier SkyGo build kept at
// SkyPilot's path (legacy) to SkyGo's own path (dst), with its -wal and
// -shm files, so an upgrade keeps its clusters. It does nothing when dst
// exists or legacy is not SkyGo's (SkyPilot's own file is never touched).
func AdoptLegacySQLite(ctx context.Context, legacy, dst string) (bool, error) {
	if _, err := os.Stat(dst); err == nil {
		return false, nil
	}
	db, err := openImmutable(legacy)
	if err != nil {
		return false, nil
	}
	ours := isSkyGoDB(ctx, db)
	db.Close()
	if !ours {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return false, err
	}
	for _, suffix := range []string{"-wal", "-shm", ""} {
		if err := os.Rename(legacy+suffix, dst+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("move SkyGo's database from %s to %s: %w", legacy, dst, err)
		}
	}
	return true, nil
}
