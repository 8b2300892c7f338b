package state

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSQLiteFilesOwnerOnly: the state database and the -wal and -shm
// files SQLite creates beside it are 0600 from the first open, and an
// older installation's 0644 files are tightened on open.
func TestSQLiteFilesOwnerOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			info, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if m := info.Mode().Perm(); m != 0o600 {
				t.Errorf("%s: %s has mode %v, want 0600", when, filepath.Base(p), m)
			}
		}
	}
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	check("new database")
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	check("reopened 0644 database")
	s2.Close()
	s.Close()
}
