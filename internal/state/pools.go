package state

import (
	"context"

	"github.com/skygo/skygo/internal/api"
)

// Pool is one pool of workers for managed jobs: its row's columns, and
// the rest (policy, task versions, workers) as one JSON document, so that
// every move of the pool — a worker launched, a rolling swap, a resize —
// is one conditional update of one row (UpdatePool).
type Pool struct {
	RowMeta

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
	// Leftovers are managed jobs that ended (cancelled) while their job
	// on this worker could not be reached to be cancelled: the worker's
	// controller ends those jobs once it answers, and no job is assigned
	// to the worker before.
	Leftovers []int `json:"leftovers,omitempty"`
	// CleanedUp says a failed worker's cluster is gone (it stays listed
	// to say why it failed).
	CleanedUp bool `json:"cleaned_up,omitempty"`
}

// Clone is a deep copy of p, for a mutation to edit.
func (p *Pool) Clone() *Pool { return cloneDoc(p) }

// Worker returns worker id, or nil.
func (p *Pool) Worker(id int) *PoolWorker {
	for _, w := range p.Workers {
		if w.ID == id {
			return w
		}
	}
	return nil
}

// CreatePool inserts a new pool; ErrExists when the name is taken.
func (s *Store) CreatePool(ctx context.Context, p *Pool) error {
	return docCreate(ctx, s, "pools", "pool", p)
}

// GetPool reads one pool; ErrNotFound when there is none.
func (s *Store) GetPool(ctx context.Context, name string) (*Pool, error) {
	return docGet[Pool](ctx, s, "pools", "pool", name)
}

// ListPools returns every pool, by name.
func (s *Store) ListPools(ctx context.Context) ([]*Pool, error) {
	return docList[Pool](ctx, s, "pools", "pool")
}

// PoolMutation edits a pool's current row. It must only decide and edit:
// it may run more than once. ErrNoChange leaves the row as it is.
type PoolMutation func(p *Pool) error

// UpdatePool applies mutate to the current row of pool name and writes
// it conditionally on the version read (see UpdateManagedJob). It
// returns the row as written, or as it is after ErrNoChange.
func (s *Store) UpdatePool(ctx context.Context, name string, mutate PoolMutation) (*Pool, error) {
	return docUpdate(ctx, s, "pools", "pool", name, mutate)
}

// DeletePool removes pool name if its row is still at version (the
// controller deletes a pool it has emptied, not one re-applied since).
func (s *Store) DeletePool(ctx context.Context, name string, version int64) error {
	return docDelete(ctx, s, "pools", "pool", name, version)
}
