package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
)

// ClusterStatus is a cluster's lifecycle state.
type ClusterStatus string

// Cluster statuses stored in the database.
const (
	ClusterInit    ClusterStatus = "INIT"
	ClusterUp      ClusterStatus = "UP"
	ClusterStopped ClusterStatus = "STOPPED"
)

// Cluster is one row of the clusters table. Handle and Resources are JSON
// documents owned by the backend; the store does not look inside them.
type Cluster struct {
	Name                string          `json:"name"`
	ClusterHash         string          `json:"cluster_hash"`
	UserHash            string          `json:"user_hash"`
	UserName            string          `json:"user_name"`
	Workspace           string          `json:"workspace"`
	Status              ClusterStatus   `json:"status"`
	Handle              json.RawMessage `json:"-"`
	Resources           json.RawMessage `json:"resources,omitempty"`
	NumNodes            int             `json:"nodes"`
	LaunchedAt          int64           `json:"launched_at"`
	Autostop            int             `json:"autostop"`
	ToDown              bool            `json:"to_down"`
	LastUse             string          `json:"last_use"`
	StatusUpdatedAt     int64           `json:"status_updated_at"`
	ClusterEverUp       bool            `json:"cluster_ever_up"`
	IsManaged           bool            `json:"is_managed"`
	ConfigHash          string          `json:"config_hash"`
	LastCreationYAML    string          `json:"last_creation_yaml"`
	LastCreationCommand string          `json:"last_creation_command"`
	Metadata            json.RawMessage `json:"metadata,omitempty"`
	// Version counts the writes of the row; every update is conditional
	// on it (see UpdateCluster).
	Version int64 `json:"-"`
}

const clusterCols = `name, cluster_hash, user_hash, user_name, workspace, status, handle, resources,
	num_nodes, launched_at, autostop, to_down, last_use, status_updated_at, cluster_ever_up,
	is_managed, config_hash, last_creation_yaml, last_creation_command, metadata, version`

func scanCluster(sc interface{ Scan(...any) error }) (*Cluster, error) {
	var c Cluster
	var handle, res, meta string
	var toDown, everUp, managed int
	if err := sc.Scan(&c.Name, &c.ClusterHash, &c.UserHash, &c.UserName, &c.Workspace, &c.Status,
		&handle, &res, &c.NumNodes, &c.LaunchedAt, &c.Autostop, &toDown, &c.LastUse,
		&c.StatusUpdatedAt, &everUp, &managed, &c.ConfigHash, &c.LastCreationYAML,
		&c.LastCreationCommand, &meta, &c.Version); err != nil {
		return nil, err
	}
	c.Handle, c.Resources, c.Metadata = rawOrNil(handle), rawOrNil(res), rawOrNil(meta)
	c.ToDown, c.ClusterEverUp, c.IsManaged = toDown != 0, everUp != 0, managed != 0
	return &c, nil
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// GetCluster finds a cluster by name.
func (s *Store) GetCluster(ctx context.Context, name string) (*Cluster, error) {
	c, err := scanCluster(s.queryRow(ctx, "get cluster", `SELECT `+clusterCols+` FROM clusters WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("cluster %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get cluster %s: %w", name, err)
	}
	return c, nil
}

// ClusterFilter selects clusters; zero values mean no constraint.
type ClusterFilter struct {
	Names    []string
	UserHash string
	Statuses []ClusterStatus
}

// ListClusters returns matching clusters by name.
func (s *Store) ListClusters(ctx context.Context, f ClusterFilter) ([]*Cluster, error) {
	var where []string
	var args []any
	if len(f.Names) > 0 {
		where = append(where, "name IN "+inClause(len(f.Names)))
		for _, n := range f.Names {
			args = append(args, n)
		}
	}
	if f.UserHash != "" {
		where = append(where, "user_hash = ?")
		args = append(args, f.UserHash)
	}
	if len(f.Statuses) > 0 {
		where = append(where, "status IN "+inClause(len(f.Statuses)))
		for _, st := range f.Statuses {
			args = append(args, string(st))
		}
	}
	q := `SELECT ` + clusterCols + ` FROM clusters`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.query(ctx, "list clusters", q+" ORDER BY name", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Cluster
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			return nil, fmt.Errorf("list clusters: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ClusterEvent is one line of a cluster's event log (`sky status -v`).
type ClusterEvent struct {
	ID             int64   `json:"id"`
	ClusterName    string  `json:"cluster_name"`
	ClusterHash    string  `json:"cluster_hash"`
	Type           string  `json:"event_type"`
	Reason         string  `json:"reason"`
	FromStatus     string  `json:"from_status"`
	ToStatus       string  `json:"to_status"`
	TransitionedAt float64 `json:"transitioned_at"`
}

// AddClusterEvent appends an event that moves no row (a status change is
// recorded by UpdateCluster itself); TransitionedAt defaults to now.
func (s *Store) AddClusterEvent(ctx context.Context, e *ClusterEvent) error {
	return s.tx(ctx, "add cluster event", func(tx *sql.Tx) error { return s.eventTx(ctx, tx, e) })
}

// ListClusterEvents returns a cluster's events, oldest first; limit 0 = all,
// otherwise the newest `limit` events.
func (s *Store) ListClusterEvents(ctx context.Context, name string, limit int) ([]*ClusterEvent, error) {
	q := `SELECT id, cluster_name, cluster_hash, event_type, reason, from_status, to_status, transitioned_at
		FROM cluster_events WHERE cluster_name = ? ORDER BY transitioned_at DESC, id DESC`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.query(ctx, "list cluster events", q, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*ClusterEvent
	for rows.Next() {
		var e ClusterEvent
		if err := rows.Scan(&e.ID, &e.ClusterName, &e.ClusterHash, &e.Type, &e.Reason, &e.FromStatus, &e.ToStatus, &e.TransitionedAt); err != nil {
			return nil, err
		}
		out = append(out, &e)
	}
	// Reverse into chronological order.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, rows.Err()
}

// Interval is one period a cluster was up (api.Interval, the form
// cost-report prints).
type Interval = api.Interval

// History is one cluster incarnation in cluster_history (cost-report).
// ClusterHash is unique per launch, so a relaunched name gets a new row.
type History struct {
	ClusterHash    string          `json:"cluster_hash"`
	Name           string          `json:"name"`
	UserHash       string          `json:"user_hash"`
	UserName       string          `json:"user_name"`
	Workspace      string          `json:"workspace"`
	Resources      json.RawMessage `json:"resources"`
	NumNodes       int             `json:"num_nodes"`
	PricePerHour   float64         `json:"price_per_hour"`
	LaunchedAt     int64           `json:"launched_at"`
	UsageIntervals []Interval      `json:"usage_intervals"`
}

// Duration is the total up time in seconds; an open interval counts until now.
func (h *History) Duration(now time.Time) int64 {
	var d int64
	for _, iv := range h.UsageIntervals {
		end := now.Unix()
		if iv.End != nil {
			end = *iv.End
		}
		if end > iv.Start {
			d += end - iv.Start
		}
	}
	return d
}

// TotalCost is price per hour x hours up x nodes.
func (h *History) TotalCost(now time.Time) float64 {
	return h.PricePerHour * float64(h.Duration(now)) / 3600 * float64(h.NumNodes)
}

// AddHistory inserts or replaces the history row of one cluster incarnation.
func (s *Store) AddHistory(ctx context.Context, h *History) error {
	if h.ClusterHash == "" || h.Name == "" {
		return errors.New("add history: cluster_hash and name are required")
	}
	if h.Workspace == "" {
		h.Workspace = "default"
	}
	if h.NumNodes == 0 {
		h.NumNodes = 1
	}
	ivs := h.UsageIntervals
	if ivs == nil {
		ivs = []Interval{}
	}
	ivJSON, err := json.Marshal(ivs)
	if err != nil {
		return fmt.Errorf("add history: %w", err)
	}
	_, err = s.exec(ctx, "add history", `INSERT INTO cluster_history
		(cluster_hash, name, user_hash, user_name, workspace, resources, num_nodes, price_per_hour, launched_at, usage_intervals)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (cluster_hash) DO UPDATE SET name = excluded.name, user_hash = excluded.user_hash,
		user_name = excluded.user_name, workspace = excluded.workspace, resources = excluded.resources,
		num_nodes = excluded.num_nodes, price_per_hour = excluded.price_per_hour,
		launched_at = excluded.launched_at, usage_intervals = excluded.usage_intervals`,
		h.ClusterHash, h.Name, h.UserHash, h.UserName, h.Workspace, string(h.Resources), h.NumNodes,
		h.PricePerHour, h.LaunchedAt, string(ivJSON))
	return err
}

// ListHistory returns incarnations launched at or after `since` (epoch
// seconds; 0 = all) or still open, newest first.
func (s *Store) ListHistory(ctx context.Context, since int64) ([]*History, error) {
	rows, err := s.query(ctx, "list history", `SELECT cluster_hash, name, user_hash, user_name, workspace,
		resources, num_nodes, price_per_hour, launched_at, usage_intervals FROM cluster_history
		ORDER BY launched_at DESC, cluster_hash`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*History
	for rows.Next() {
		var h History
		var res, ivs string
		if err := rows.Scan(&h.ClusterHash, &h.Name, &h.UserHash, &h.UserName, &h.Workspace, &res,
			&h.NumNodes, &h.PricePerHour, &h.LaunchedAt, &ivs); err != nil {
			return nil, err
		}
		h.Resources = rawOrNil(res)
		if err := json.Unmarshal([]byte(ivs), &h.UsageIntervals); err != nil {
			return nil, fmt.Errorf("cluster_history %s: usage_intervals: %w", h.ClusterHash, err)
		}
		if since > 0 && h.LaunchedAt < since && !h.open() && h.lastEnd() < since {
			continue
		}
		out = append(out, &h)
	}
	return out, rows.Err()
}

func (h *History) open() bool {
	return len(h.UsageIntervals) > 0 && h.UsageIntervals[len(h.UsageIntervals)-1].End == nil
}

func (h *History) lastEnd() int64 {
	var m int64
	for _, iv := range h.UsageIntervals {
		if iv.End != nil && *iv.End > m {
			m = *iv.End
		}
	}
	return m
}

// GetSetting reads a small persisted value (e.g. enabled infras from
// `sky check`); ErrNotFound when unset.
func (s *Store) GetSetting(ctx context.Context, key string) (string, error) {
	var v string
	err := s.queryRow(ctx, "get setting", `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("setting %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get setting %s: %w", key, err)
	}
	return v, nil
}

// SetSetting writes a small persisted value.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	_, err := s.exec(ctx, "set setting", `INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, key, value, nowSeconds())
	return err
}

// DeleteSetting removes a value; deleting a missing key is not an error.
func (s *Store) DeleteSetting(ctx context.Context, key string) error {
	_, err := s.exec(ctx, "delete setting", `DELETE FROM settings WHERE key = ?`, key)
	return err
}
