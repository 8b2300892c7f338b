package agent

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver

	"github.com/skygo/skygo/internal/agent/agentapi"
)

// store is the job table. The daemon is the only writer; other processes
// open it read-only through WAL.
type store struct {
	db *sql.DB
}

const schema = `
CREATE TABLE IF NOT EXISTS jobs (
	job_id INTEGER PRIMARY KEY AUTOINCREMENT,
	name TEXT NOT NULL DEFAULT '',
	username TEXT NOT NULL DEFAULT '',
	user_hash TEXT NOT NULL DEFAULT '',
	submitted_at REAL NOT NULL,
	start_at REAL,
	end_at REAL,
	status TEXT NOT NULL,
	num_nodes INTEGER NOT NULL,
	resources TEXT NOT NULL,
	run_timestamp TEXT NOT NULL,
	log_dir TEXT NOT NULL,
	spec TEXT NOT NULL,
	metadata TEXT NOT NULL DEFAULT '{}',
	nodes TEXT NOT NULL DEFAULT '[]',
	devices TEXT NOT NULL DEFAULT '[]',
	pids TEXT NOT NULL DEFAULT '[]',
	return_codes TEXT NOT NULL DEFAULT '[]',
	failure_reason TEXT NOT NULL DEFAULT '',
	submit_key TEXT UNIQUE
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`

func openStore(path string, readOnly bool) (*store, error) {
	if !readOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, errNoTable
	}
	if !readOnly {
		// The spec column holds secrets, and SQLite gives the -wal and
		// -shm files the database file's mode: create it 0600 before the
		// first open.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
		if err != nil {
			return nil, err
		}
		f.Close()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=secure_delete(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if !readOnly {
		if _, err := db.Exec(schema); err != nil {
			db.Close()
			return nil, fmt.Errorf("creating job table %s: %w", path, err)
		}
	}
	return &store{db: db}, nil
}

var errNoTable = errors.New("no job table on this node yet")

func (s *store) close() error { return s.db.Close() }

// jobRow is a job with its private columns.
type jobRow struct {
	agentapi.Job
	Spec    agentapi.JobSpec
	LogDir  string
	RunTS   string
	Devices [][]int
}

const jobCols = `job_id, name, username, user_hash, submitted_at, start_at, end_at, status, num_nodes,
	resources, run_timestamp, log_dir, spec, metadata, nodes, devices, pids, return_codes, failure_reason`

func scanJob(sc interface{ Scan(...any) error }, withSpec bool) (*jobRow, error) {
	var r jobRow
	var start, end sql.NullFloat64
	var spec, meta, nodes, devices, pids, codes string
	err := sc.Scan(&r.JobID, &r.JobName, &r.Username, &r.UserHash, &r.SubmittedAt, &start, &end, &r.Status,
		&r.NumNodes, &r.Resources, &r.RunTS, &r.LogDir, &spec, &meta, &nodes, &devices, &pids, &codes, &r.FailureReason)
	if err != nil {
		return nil, err
	}
	if start.Valid {
		r.StartAt = &start.Float64
	}
	if end.Valid {
		r.EndAt = &end.Float64
	}
	r.LogPath = r.LogDir
	if withSpec {
		_ = json.Unmarshal([]byte(spec), &r.Spec)
	}
	_ = json.Unmarshal([]byte(meta), &r.Metadata)
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	_ = json.Unmarshal([]byte(nodes), &r.Nodes)
	_ = json.Unmarshal([]byte(devices), &r.Devices)
	_ = json.Unmarshal([]byte(pids), &r.Pids)
	_ = json.Unmarshal([]byte(codes), &r.ReturnCodes)
	return &r, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// insert adds a PENDING job; with a submit key already used it returns the
// existing job id instead.
func (s *store) insert(ctx context.Context, r *jobRow, submitKey string) (id int, existed bool, err error) {
	var key any
	if submitKey != "" {
		key = submitKey
		if err := s.db.QueryRowContext(ctx, `SELECT job_id FROM jobs WHERE submit_key = ?`, key).Scan(&id); err == nil {
			return id, true, nil
		}
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO jobs (name, username, user_hash, submitted_at, status, num_nodes,
		resources, run_timestamp, log_dir, spec, metadata, submit_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.JobName, r.Username, r.UserHash, r.SubmittedAt, r.Status, r.NumNodes, r.Resources, r.RunTS, r.LogDir,
		mustJSON(r.Spec), mustJSON(r.Metadata), key)
	if err != nil {
		return 0, false, fmt.Errorf("recording job: %w", err)
	}
	id64, err := res.LastInsertId()
	return int(id64), false, err
}

func (s *store) get(ctx context.Context, id int, withSpec bool) (*jobRow, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE job_id = ?`, id)
	r, err := scanJob(row, withSpec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return r, err
}

// list returns jobs in id order; statuses filters when non-empty.
func (s *store) list(ctx context.Context, withSpec bool, statuses ...agentapi.Status) ([]*jobRow, error) {
	q := `SELECT ` + jobCols + ` FROM jobs`
	var args []any
	if len(statuses) > 0 {
		q += ` WHERE status IN (?` + strings.Repeat(",?", len(statuses)-1) + `)`
		for _, st := range statuses {
			args = append(args, st)
		}
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY job_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*jobRow
	for rows.Next() {
		r, err := scanJob(rows, withSpec)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// update is a compare-and-set status change: it applies only when the job
// is still in from, so a racing cancel and finish cannot both win.
type update struct {
	to            agentapi.Status
	startAt       *time.Time
	endAt         *time.Time
	nodes         []int
	devices       [][]int
	pids          []int
	returnCodes   []int
	failureReason *string
}

func (s *store) transition(ctx context.Context, id int, from []agentapi.Status, u update) (bool, error) {
	sets := []string{"status = ?"}
	args := []any{u.to}
	if u.startAt != nil {
		sets, args = append(sets, "start_at = ?"), append(args, unixSeconds(*u.startAt))
	}
	if u.endAt != nil {
		sets, args = append(sets, "end_at = ?"), append(args, unixSeconds(*u.endAt))
	}
	if u.nodes != nil {
		sets, args = append(sets, "nodes = ?", "devices = ?"), append(args, mustJSON(u.nodes), mustJSON(u.devices))
	}
	if u.pids != nil {
		sets, args = append(sets, "pids = ?"), append(args, mustJSON(u.pids))
	}
	if u.returnCodes != nil {
		sets, args = append(sets, "return_codes = ?"), append(args, mustJSON(u.returnCodes))
	}
	if u.failureReason != nil {
		sets, args = append(sets, "failure_reason = ?"), append(args, *u.failureReason)
	}
	hadSecrets := false
	if u.to.Terminal() {
		// A job that is over never runs again: its secrets need not
		// outlive it on the node.
		sets = append(sets, `spec = json_remove(spec, '$.secrets')`)
		_ = s.db.QueryRowContext(ctx, `SELECT json_extract(spec, '$.secrets') IS NOT NULL FROM jobs WHERE job_id = ?`, id).Scan(&hadSecrets)
	}
	q := `UPDATE jobs SET ` + strings.Join(sets, ", ") + ` WHERE job_id = ? AND status IN (?` + strings.Repeat(",?", len(from)-1) + `)`
	args = append(args, id)
	for _, f := range from {
		if !CanTransition(f, u.to) && f != u.to {
			return false, fmt.Errorf("job %d: %s -> %s is not a valid transition", id, f, u.to)
		}
		args = append(args, f)
	}
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("updating job %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	if n == 1 && hadSecrets {
		// The WAL still holds the row as it was; truncating it leaves the
		// secrets only in the pages secure_delete zeroed. A reader holding
		// the WAL makes this a no-op, and the next job's end retries. Only
		// for a job that had secrets: the checkpoint waits for readers,
		// which a job end should not do for nothing.
		_, _ = s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	return n == 1, nil
}

func (s *store) setPids(ctx context.Context, id int, pids []int) error {
	_, err := s.db.ExecContext(ctx, `UPDATE jobs SET pids = ? WHERE job_id = ?`, mustJSON(pids), id)
	return err
}

func (s *store) getMeta(ctx context.Context, key string, v any) (bool, error) {
	var raw string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal([]byte(raw), v)
}

func (s *store) setMeta(ctx context.Context, key string, v any) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, mustJSON(v))
	return err
}
