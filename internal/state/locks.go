package state

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Conditional updates keep a cluster's row right, but what an operation
// does to the cluster's nodes (killing processes, removing directories,
// starting agents) is not part of any transaction: a stop on one server
// and a start or down on another, sharing the database, would interleave
// those effects, leaving e.g. a removed cluster with a running agent. So
// lifecycle operations also hold a lock per cluster name that every
// server of the database sees: a PostgreSQL session advisory lock, or on
// SQLite an flock beside the database file (two servers can only share a
// SQLite file on one machine). Both go away with the process holding
// them, so a crashed server never leaves a cluster locked.

// lockClass namespaces SkyGo's advisory locks (two-key form) from any
// other user of advisory locks in the same database.
const lockClass int32 = 0x536b7947 // "SkyG"

// LockCluster blocks until this process holds the cluster lock of name,
// or ctx ends. The returned function releases it.
func (s *Store) LockCluster(ctx context.Context, name string) (func(), error) {
	if s.dialect == Postgres {
		return s.lockPostgres(ctx, name)
	}
	return s.lockFile(ctx, name)
}

func lockKey(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32()
}

func (s *Store) lockPostgres(ctx context.Context, name string) (func(), error) {
	defer s.track("lock cluster", time.Now())
	// A session lock lives on one connection, held for the whole
	// operation. It comes from a pool of its own: holders taking every
	// connection of the main pool would starve their own updates.
	conn, err := s.locks.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock cluster %s: %w", name, err)
	}
	key := int32(lockKey(name))
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1, $2)`, lockClass, key); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lock cluster %s: %w", name, err)
	}
	return func() {
		_, err := conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1, $2)`, lockClass, key)
		if err != nil {
			// The session may still hold the lock: drop the connection
			// rather than hand it back to the pool, which ends the session.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}, nil
}

func (s *Store) lockFile(ctx context.Context, name string) (func(), error) {
	dir := filepath.Join(filepath.Dir(s.where), "cluster-locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock cluster %s: %w", name, err)
	}
	// Named by a hash: cluster names reach here before validation.
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%08x.lock", lockKey(name))), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock cluster %s: %w", name, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock cluster %s: %w", name, err)
		}
		// Polled: a blocking flock could not be cancelled. Contention is
		// rare (the backend queues its own operations on a cluster before
		// taking this lock), so the wait is short.
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock cluster %s: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// openLockPool is the PostgreSQL pool LockCluster takes its sessions
// from; sql.Open connects lazily, so a server that never locks opens none.
func openLockPool(uri string) (*sql.DB, error) {
	db, err := sql.Open("pgx", uri)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(2)
	return db, nil
}
