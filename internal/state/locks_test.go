package state

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestLockClusterSQLite: the lock excludes another Store on the same file
// (another server process), is per name, and is free again once released.
// A cancelled context makes LockCluster give up instead of waiting, which
// shows whether the lock is held without timing anything.
func TestLockClusterSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	a, b := mustOpen(t, "", path), mustOpen(t, "", path)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	unlock, err := a.LockCluster(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.LockCluster(cancelled, "c1"); err == nil {
		t.Fatal("a second store took the lock of c1 while the first held it")
	}
	other, err := b.LockCluster(cancelled, "c2")
	if err != nil {
		t.Fatalf("the lock of c1 blocked c2: %v", err)
	}
	other()
	unlock()
	again, err := b.LockCluster(cancelled, "c1")
	if err != nil {
		t.Fatalf("c1 still locked after release: %v", err)
	}
	again()
	if _, err := a.LockCluster(cancelled, "../../escape"); err != nil {
		t.Fatalf("a name that is no file name: %v", err)
	}
}

// TestLockClusterPostgres: a second Store (another server) waits for the
// lock of the same name until the first releases it, and never waits for
// another name. Waiting is observed in pg_locks, not guessed from time.
func TestLockClusterPostgres(t *testing.T) {
	uri := newPGDatabase(t)
	a, b := mustOpen(t, uri, ""), mustOpen(t, uri, "")
	ctx := context.Background()

	unlock, err := a.LockCluster(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.LockCluster(ctx, "c2")
	if err != nil {
		t.Fatalf("lock c2: %v", err)
	}
	other()
	got := make(chan func(), 1)
	go func() {
		u, err := b.LockCluster(ctx, "c1")
		if err != nil {
			t.Errorf("second lock of c1: %v", err)
			u = func() {}
		}
		got <- u
	}()
	waiting := func() bool {
		var n int
		err := a.w.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
		return err == nil && n == 1
	}
	deadline := time.Now().Add(10 * time.Second)
	for !waiting() {
		if time.Now().After(deadline) {
			t.Fatal("the second lock of c1 never waited in PostgreSQL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-got:
		t.Fatal("the second lock of c1 was granted while the first was held")
	default:
	}
	unlock()
	(<-got)()
}
