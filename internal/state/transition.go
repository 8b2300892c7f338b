package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Every change of a cluster row is a conditional update: read the row and
// its version in a transaction, let the caller's mutation decide, write
// WHERE version = the version read, and record the status transition (and
// the usage interval it opens or closes) in the same transaction. On
// PostgreSQL two servers may race; the loser sees zero rows affected, reads
// again and re-applies its mutation to the new row, so a mutation is a
// decision over the current state, never a blind overwrite. On SQLite the
// transaction holds the write lock from BEGIN, so the read is already the
// latest.

var (
	// ErrNoChange, returned by a mutation, leaves the row as it is; the
	// update then returns the current row and no error.
	ErrNoChange = errors.New("no change")
	// ErrConflict means the row kept changing under the update.
	ErrConflict = errors.New("changed concurrently; try again")
)

// conflictRetries bounds how often an update re-reads a row that another
// writer changed in between.
const conflictRetries = 20

// Mutation edits the current row of a cluster. It returns the reason of
// the change, recorded with the status transition (or, when the status
// did not move, as an event of its own if not empty). It must only decide
// and edit: it may run more than once, and it runs inside the transaction.
type Mutation func(c *Cluster) (reason string, err error)

// UpdateCluster applies mutate to the current row of a cluster and writes
// it conditionally. It returns the row as written (or as it is, when the
// mutation returned ErrNoChange). A missing cluster is ErrNotFound.
func (s *Store) UpdateCluster(ctx context.Context, name string, mutate Mutation) (*Cluster, error) {
	for range conflictRetries {
		var out *Cluster
		err := s.tx(ctx, "update cluster", func(tx *sql.Tx) error {
			cur, err := s.clusterTx(ctx, tx, name)
			if err != nil {
				return err
			}
			next := *cur
			reason, err := mutate(&next)
			if errors.Is(err, ErrNoChange) {
				out = cur
				return nil
			}
			if err != nil {
				return err
			}
			next.Name, next.Version = cur.Name, cur.Version+1
			if next.Status == "" {
				return fmt.Errorf("update cluster %s: empty status", name)
			}
			if next.Status != cur.Status {
				next.StatusUpdatedAt = time.Now().Unix()
			}
			if next.Status == ClusterUp {
				next.ClusterEverUp = true
			}
			res, err := tx.ExecContext(ctx, s.rebind(`UPDATE clusters SET cluster_hash = ?, user_hash = ?, user_name = ?,
				workspace = ?, status = ?, handle = ?, resources = ?, num_nodes = ?, launched_at = ?, autostop = ?,
				to_down = ?, last_use = ?, status_updated_at = ?, cluster_ever_up = ?, is_managed = ?, config_hash = ?,
				last_creation_yaml = ?, last_creation_command = ?, metadata = ?, version = ?
				WHERE name = ? AND version = ?`),
				next.ClusterHash, next.UserHash, next.UserName, next.Workspace, string(next.Status), string(next.Handle),
				string(next.Resources), next.NumNodes, next.LaunchedAt, next.Autostop, boolInt(next.ToDown), next.LastUse,
				next.StatusUpdatedAt, boolInt(next.ClusterEverUp), boolInt(next.IsManaged), next.ConfigHash,
				next.LastCreationYAML, next.LastCreationCommand, string(next.Metadata), next.Version, name, cur.Version)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return ErrConflict
			}
			if next.Status != cur.Status || reason != "" {
				if err := s.eventTx(ctx, tx, &ClusterEvent{ClusterName: name, ClusterHash: next.ClusterHash, Reason: reason,
					FromStatus: string(cur.Status), ToStatus: string(next.Status)}); err != nil {
					return err
				}
			}
			if err := s.usageTx(ctx, tx, next.ClusterHash, cur.Status, next.Status); err != nil {
				return err
			}
			out = &next
			return nil
		})
		if errors.Is(err, ErrConflict) {
			continue
		}
		return out, err
	}
	return nil, fmt.Errorf("update cluster %s: %w", name, ErrConflict)
}

// CreateCluster inserts a new cluster row and its first event; ErrExists
// when the name is taken.
func (s *Store) CreateCluster(ctx context.Context, c *Cluster, reason string) error {
	if c.Name == "" || c.Status == "" {
		return errors.New("create cluster: name and status are required")
	}
	if c.Workspace == "" {
		c.Workspace = "default"
	}
	if c.NumNodes == 0 {
		c.NumNodes = 1
	}
	c.StatusUpdatedAt = time.Now().Unix()
	c.ClusterEverUp = c.Status == ClusterUp
	c.Version = 1
	return s.tx(ctx, "create cluster", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO clusters (`+clusterCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			c.Name, c.ClusterHash, c.UserHash, c.UserName, c.Workspace, string(c.Status), string(c.Handle),
			string(c.Resources), c.NumNodes, c.LaunchedAt, c.Autostop, boolInt(c.ToDown), c.LastUse,
			c.StatusUpdatedAt, boolInt(c.ClusterEverUp), boolInt(c.IsManaged), c.ConfigHash,
			c.LastCreationYAML, c.LastCreationCommand, string(c.Metadata), c.Version)
		if isUniqueViolation(err) {
			return fmt.Errorf("cluster %s: %w", c.Name, ErrExists)
		}
		if err != nil {
			return err
		}
		return s.eventTx(ctx, tx, &ClusterEvent{ClusterName: c.Name, ClusterHash: c.ClusterHash, Reason: reason, ToStatus: string(c.Status)})
	})
}

// RemoveCluster deletes a cluster row if check (nil: always) agrees with
// its current state, records the TERMINATED event and closes its usage
// interval, all in one transaction. check returning ErrNoChange keeps the
// row and makes RemoveCluster return (false, nil).
func (s *Store) RemoveCluster(ctx context.Context, name, reason string, check func(c *Cluster) error) (bool, error) {
	for range conflictRetries {
		removed := false
		err := s.tx(ctx, "remove cluster", func(tx *sql.Tx) error {
			cur, err := s.clusterTx(ctx, tx, name)
			if err != nil {
				return err
			}
			if check != nil {
				if err := check(cur); errors.Is(err, ErrNoChange) {
					return nil
				} else if err != nil {
					return err
				}
			}
			res, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM clusters WHERE name = ? AND version = ?`), name, cur.Version)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return ErrConflict
			}
			if err := s.eventTx(ctx, tx, &ClusterEvent{ClusterName: name, ClusterHash: cur.ClusterHash, Reason: reason,
				FromStatus: string(cur.Status), ToStatus: "TERMINATED"}); err != nil {
				return err
			}
			removed = true
			return s.usageTx(ctx, tx, cur.ClusterHash, cur.Status, "")
		})
		if errors.Is(err, ErrConflict) {
			continue
		}
		return removed, err
	}
	return false, fmt.Errorf("remove cluster %s: %w", name, ErrConflict)
}

// forUpdate makes PostgreSQL lock the row read, so concurrent writers of
// one row queue instead of failing their version check and retrying;
// SQLite's transaction already holds the database's write lock.
func (s *Store) forUpdate() string {
	if s.dialect == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

func (s *Store) clusterTx(ctx context.Context, tx *sql.Tx, name string) (*Cluster, error) {
	c, err := scanCluster(tx.QueryRowContext(ctx, s.rebind(`SELECT `+clusterCols+` FROM clusters WHERE name = ?`+s.forUpdate()), name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("cluster %s: %w", name, ErrNotFound)
	}
	return c, err
}

func (s *Store) eventTx(ctx context.Context, tx *sql.Tx, e *ClusterEvent) error {
	if e.TransitionedAt == 0 {
		e.TransitionedAt = nowSeconds()
	}
	if e.Type == "" {
		e.Type = "STATUS_CHANGE"
	}
	_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO cluster_events
		(cluster_name, cluster_hash, event_type, reason, from_status, to_status, transitioned_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`),
		e.ClusterName, e.ClusterHash, e.Type, e.Reason, e.FromStatus, e.ToStatus, e.TransitionedAt)
	return err
}

// usageTx keeps cost-report's usage intervals in step with the status:
// leaving STOPPED (for INIT or UP: the nodes run again) opens an interval,
// and reaching STOPPED or leaving the table ("") closes the open one. A
// launch opens the first interval itself, once its nodes exist
// (AddHistory).
func (s *Store) usageTx(ctx context.Context, tx *sql.Tx, hash string, from, to ClusterStatus) error {
	var open bool
	switch {
	case from == to || hash == "":
		return nil
	case from == ClusterStopped && to != "":
		open = true
	case to == ClusterStopped || to == "":
	default:
		return nil
	}
	var raw string
	err := tx.QueryRowContext(ctx, s.rebind(`SELECT usage_intervals FROM cluster_history WHERE cluster_hash = ?`), hash).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var ivs []Interval
	if err := json.Unmarshal([]byte(raw), &ivs); err != nil {
		return fmt.Errorf("cluster_history %s: usage_intervals: %w", hash, err)
	}
	n := len(ivs)
	now := time.Now().Unix()
	switch {
	case open && (n == 0 || ivs[n-1].End != nil):
		ivs = append(ivs, Interval{Start: now})
	case !open && n > 0 && ivs[n-1].End == nil:
		ivs[n-1].End = &now
	default:
		return nil
	}
	b, err := json.Marshal(ivs)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, s.rebind(`UPDATE cluster_history SET usage_intervals = ? WHERE cluster_hash = ?`), string(b), hash)
	return err
}

// tx runs fn in a transaction on the writer, committing when fn returns nil.
func (s *Store) tx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	defer s.track(op, time.Now())
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", op, err)
	}
	return nil
}

// Document reads one document; ErrNotFound when it was never written.
func (s *Store) Document(ctx context.Context, key string) ([]byte, error) {
	var raw string
	err := s.queryRow(ctx, "get document", `SELECT value FROM documents WHERE key = ?`, key).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("document %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get document %s: %w", key, err)
	}
	return []byte(raw), nil
}

// UpdateDocument is a versioned read-modify-write of one small JSON
// document (e.g. which SSH hosts each cluster holds): fn gets the current
// value (nil when absent) and returns the new one and whether to write it.
// Like UpdateCluster, the write is conditional on the version read, so two
// servers on one database never both win.
func (s *Store) UpdateDocument(ctx context.Context, key string, fn func(cur []byte) ([]byte, bool, error)) error {
	for range conflictRetries {
		err := s.tx(ctx, "update document", func(tx *sql.Tx) error {
			var raw string
			var version int64
			err := tx.QueryRowContext(ctx, s.rebind(`SELECT value, version FROM documents WHERE key = ?`+s.forUpdate()), key).Scan(&raw, &version)
			var cur []byte
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			default:
				cur = []byte(raw)
			}
			next, write, err := fn(cur)
			if err != nil || !write {
				return err
			}
			var res sql.Result
			if cur == nil {
				res, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO documents (key, value, version, updated_at) VALUES (?, ?, 1, ?)
					ON CONFLICT (key) DO NOTHING`), key, string(next), nowSeconds())
			} else {
				res, err = tx.ExecContext(ctx, s.rebind(`UPDATE documents SET value = ?, version = ?, updated_at = ?
					WHERE key = ? AND version = ?`), string(next), version+1, nowSeconds(), key, version)
			}
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return ErrConflict
			}
			return nil
		})
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("update %s: %w", key, err)
		}
		return nil
	}
	return fmt.Errorf("update %s: %w", key, ErrConflict)
}
