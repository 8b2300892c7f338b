package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/skygo/skygo/internal/api"
)

// Pool is one pool of workers for managed jobs: its row's columns, and
// the rest (policy, task versions, workers) as one JSON document, so that
// every move of the pool — a worker launched, a rolling swap, a resize —
// is one conditional update of one row (UpdatePool).
type Pool struct {
	Name      string  `json:"-"`
	UserHash  string  `json:"-"`
	UserName  string  `json:"-"`
	Workspace string  `json:"-"`
	CreatedAt float64 `json:"-"`
	Version   int64   `json:"-"` // the row's version (CAS)

	// SpecVersion is the pool task's newest version (1 on create); Specs
	// holds each version some worker still runs, the newest included.
	SpecVersion int                      `json:"spec_version"`
	Specs       map[int]*PoolSpecVersion `json:"specs"`
	// UpdateMode is how workers of older versions are replaced:
	// rolling or blue_green.
	UpdateMode string `json:"update_mode,omitempty"`
	// Target is the number of workers wanted now (the autoscaler's
	// decision, or the fixed count); UpCount/DownCount are the
	// consecutive decisions that wanted more/fewer (hysteresis).
	Target         int           `json:"target"`
	UpCount        int           `json:"up_count,omitempty"`
	DownCount      int           `json:"down_count,omitempty"`
	LastDecisionAt float64       `json:"last_decision_at,omitempty"`
	NextWorkerID   int           `json:"next_worker_id"`
	Workers        []*PoolWorker `json:"workers"`
	// Down is set once `pool down` asked for the pool to go.
	Down    *PoolDown `json:"down,omitempty"`
	ReadyAt float64   `json:"ready_at,omitempty"` // when a worker was first READY
}

// PoolSpecVersion is one version of the pool's task and policy.
type PoolSpecVersion struct {
	Task   api.TaskSpec   `json:"task"`
	Policy api.PoolPolicy `json:"policy"`
	At     float64        `json:"at"`
}

// PoolDown records a `pool down` request.
type PoolDown struct {
	At    float64 `json:"at"`
	By    string  `json:"by,omitempty"`
	Purge bool    `json:"purge,omitempty"`
	// JobsCancelledAt is when the pool's jobs were asked to cancel; the
	// workers go once they ended or the wait ran out.
	JobsCancelledAt float64 `json:"jobs_cancelled_at,omitempty"`
}

// PoolWorker is one worker: a cluster named <pool>-<id> kept UP.
type PoolWorker struct {
	ID          int     `json:"id"`
	SpecVersion int     `json:"spec_version"`
	Status      string  `json:"status"`
	Cluster     string  `json:"cluster"`
	CreatedAt   float64 `json:"created_at"`
	LaunchedAt  float64 `json:"launched_at,omitempty"`
	// Attempt numbers the launches of this worker; its setup job is
	// tagged with it, so a controller cut off after submitting finds it.
	Attempt    int     `json:"attempt,omitempty"`
	SetupJobID int     `json:"setup_job_id,omitempty"`
	Tries      int     `json:"tries,omitempty"`
	NextTryAt  float64 `json:"next_try_at,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	Infra      string  `json:"infra,omitempty"`
	Resources  string  `json:"resources,omitempty"`
}

// Clone is a deep copy of p, for a mutation to edit.
func (p *Pool) Clone() *Pool {
	raw, _ := json.Marshal(p)
	var c Pool
	_ = json.Unmarshal(raw, &c)
	c.Name, c.UserHash, c.UserName, c.Workspace, c.CreatedAt, c.Version = p.Name, p.UserHash, p.UserName, p.Workspace, p.CreatedAt, p.Version
	return &c
}

// Worker returns worker id, or nil.
func (p *Pool) Worker(id int) *PoolWorker {
	for _, w := range p.Workers {
		if w.ID == id {
			return w
		}
	}
	return nil
}

const poolCols = `name, user_hash, user_name, workspace, created_at, record, version`

func scanPool(sc interface{ Scan(...any) error }) (*Pool, error) {
	var p Pool
	var record string
	if err := sc.Scan(&p.Name, &p.UserHash, &p.UserName, &p.Workspace, &p.CreatedAt, &record, &p.Version); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(record), &p); err != nil {
		return nil, fmt.Errorf("pool %s: unreadable record: %w", p.Name, err)
	}
	return &p, nil
}

// CreatePool inserts a new pool; ErrExists when the name is taken.
func (s *Store) CreatePool(ctx context.Context, p *Pool) error {
	if p.CreatedAt == 0 {
		p.CreatedAt = nowSeconds()
	}
	if p.Workspace == "" {
		p.Workspace = "default"
	}
	record, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, "create pool", `INSERT INTO pools (name, user_hash, user_name, workspace, created_at, record, version)
		VALUES (?, ?, ?, ?, ?, ?, 1)`, p.Name, p.UserHash, p.UserName, p.Workspace, p.CreatedAt, string(record))
	if isUniqueViolation(err) {
		return ErrExists
	}
	if err == nil {
		p.Version = 1
	}
	return err
}

// GetPool reads one pool; ErrNotFound when there is none.
func (s *Store) GetPool(ctx context.Context, name string) (*Pool, error) {
	p, err := scanPool(s.queryRow(ctx, "get pool", `SELECT `+poolCols+` FROM pools WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return p, err
}

// ListPools returns every pool, by name.
func (s *Store) ListPools(ctx context.Context) ([]*Pool, error) {
	rows, err := s.query(ctx, "list pools", `SELECT `+poolCols+` FROM pools ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Pool
	for rows.Next() {
		p, err := scanPool(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// PoolMutation edits a pool's current row. It must only decide and edit:
// it may run more than once. ErrNoChange leaves the row as it is.
type PoolMutation func(p *Pool) error

// UpdatePool applies mutate to the current row of pool name and writes
// it conditionally on the version read (see UpdateManagedJob). It
// returns the row as written, or as it is after ErrNoChange.
func (s *Store) UpdatePool(ctx context.Context, name string, mutate PoolMutation) (*Pool, error) {
	for range conflictRetries {
		var out *Pool
		err := s.tx(ctx, "update pool", func(tx *sql.Tx) error {
			cur, err := scanPool(tx.QueryRowContext(ctx, s.rebind(`SELECT `+poolCols+` FROM pools WHERE name = ?`), name))
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			next := cur.Clone()
			if err := mutate(next); errors.Is(err, ErrNoChange) {
				out = cur
				return nil
			} else if err != nil {
				return err
			}
			next.Version = cur.Version + 1
			record, err := json.Marshal(next)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, s.rebind(`UPDATE pools SET record = ?, version = ? WHERE name = ? AND version = ?`),
				string(record), next.Version, name, cur.Version)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return ErrConflict
			}
			out = next
			return nil
		})
		if errors.Is(err, ErrConflict) {
			continue
		}
		return out, err
	}
	return nil, fmt.Errorf("update pool %s: %w", name, ErrConflict)
}

// DeletePool removes pool name if its row is still at version (the
// controller deletes a pool it has emptied, not one re-applied since).
func (s *Store) DeletePool(ctx context.Context, name string, version int64) error {
	res, err := s.exec(ctx, "delete pool", `DELETE FROM pools WHERE name = ? AND version = ?`, name, version)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrConflict
	}
	return nil
}
