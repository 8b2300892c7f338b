package state

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// migration is one forward-only schema step. Steps are applied in version
// order, each in its own transaction, and recorded in schema_version; a
// released step is never edited, only followed by a new one.
type migration struct {
	version int
	name    string
	stmts   []string // '{serial}' becomes the dialect's auto-increment key
}

// migrations is the schema history. Times are epoch seconds (DOUBLE
// PRECISION, as SkyPilot reports them); JSON documents are TEXT so both
// dialects store them the same way.
var migrations = []migration{
	{1, "requests", []string{
		`CREATE TABLE requests (
			request_id TEXT PRIMARY KEY,
			name TEXT NOT NULL,
			entrypoint TEXT NOT NULL DEFAULT '',
			request_body TEXT NOT NULL DEFAULT '',
			status TEXT NOT NULL,
			created_at DOUBLE PRECISION NOT NULL,
			started_at DOUBLE PRECISION,
			finished_at DOUBLE PRECISION,
			user_id TEXT NOT NULL DEFAULT '',
			user_name TEXT NOT NULL DEFAULT '',
			return_value TEXT NOT NULL DEFAULT '',
			error TEXT NOT NULL DEFAULT '',
			pid INTEGER,
			schedule_type TEXT NOT NULL DEFAULT 'short',
			cluster_name TEXT NOT NULL DEFAULT '',
			status_msg TEXT NOT NULL DEFAULT '',
			should_retry INTEGER NOT NULL DEFAULT 0,
			file_mounts_blob_id TEXT NOT NULL DEFAULT ''
		)`,
		`CREATE INDEX requests_created_at ON requests (created_at)`,
		`CREATE INDEX requests_status ON requests (status)`,
		`CREATE INDEX requests_user ON requests (user_id)`,
	}},
	{2, "users and service-account tokens", []string{
		`CREATE TABLE users (
			id TEXT PRIMARY KEY,
			name TEXT NOT NULL UNIQUE,
			password_hash TEXT NOT NULL DEFAULT '',
			role TEXT NOT NULL DEFAULT 'user',
			created_at DOUBLE PRECISION NOT NULL
		)`,
		`CREATE TABLE service_account_tokens (
			token_id TEXT PRIMARY KEY,
			token_name TEXT NOT NULL,
			token_hash TEXT NOT NULL UNIQUE,
			user_id TEXT NOT NULL,
			creator_user_id TEXT NOT NULL DEFAULT '',
			created_at DOUBLE PRECISION NOT NULL,
			last_used_at DOUBLE PRECISION,
			expires_at DOUBLE PRECISION
		)`,
	}},
	{3, "clusters, history and events", []string{
		`CREATE TABLE clusters (
			name TEXT PRIMARY KEY,
			cluster_hash TEXT NOT NULL DEFAULT '',
			user_hash TEXT NOT NULL DEFAULT '',
			user_name TEXT NOT NULL DEFAULT '',
			workspace TEXT NOT NULL DEFAULT 'default',
			status TEXT NOT NULL,
			handle TEXT NOT NULL DEFAULT '',
			resources TEXT NOT NULL DEFAULT '',
			num_nodes INTEGER NOT NULL DEFAULT 1,
			launched_at BIGINT NOT NULL DEFAULT 0,
			autostop INTEGER NOT NULL DEFAULT -1,
			to_down INTEGER NOT NULL DEFAULT 0,
			last_use TEXT NOT NULL DEFAULT '',
			status_updated_at BIGINT NOT NULL DEFAULT 0,
			cluster_ever_up INTEGER NOT NULL DEFAULT 0,
			is_managed INTEGER NOT NULL DEFAULT 0,
			config_hash TEXT NOT NULL DEFAULT '',
			last_creation_yaml TEXT NOT NULL DEFAULT '',
			last_creation_command TEXT NOT NULL DEFAULT '',
			metadata TEXT NOT NULL DEFAULT ''
		)`,
		`CREATE TABLE cluster_history (
			cluster_hash TEXT PRIMARY KEY,
			name TEXT NOT NULL,
			user_hash TEXT NOT NULL DEFAULT '',
			user_name TEXT NOT NULL DEFAULT '',
			workspace TEXT NOT NULL DEFAULT 'default',
			resources TEXT NOT NULL DEFAULT '',
			num_nodes INTEGER NOT NULL DEFAULT 1,
			price_per_hour DOUBLE PRECISION NOT NULL DEFAULT 0,
			launched_at BIGINT NOT NULL DEFAULT 0,
			usage_intervals TEXT NOT NULL DEFAULT '[]'
		)`,
		`CREATE INDEX cluster_history_launched ON cluster_history (launched_at)`,
		`CREATE TABLE cluster_events (
			id {serial},
			cluster_name TEXT NOT NULL,
			cluster_hash TEXT NOT NULL DEFAULT '',
			event_type TEXT NOT NULL DEFAULT 'STATUS_CHANGE',
			reason TEXT NOT NULL DEFAULT '',
			from_status TEXT NOT NULL DEFAULT '',
			to_status TEXT NOT NULL DEFAULT '',
			transitioned_at DOUBLE PRECISION NOT NULL
		)`,
		`CREATE INDEX cluster_events_name ON cluster_events (cluster_name, transitioned_at)`,
	}},
	{4, "settings", []string{
		`CREATE TABLE settings (
			key TEXT PRIMARY KEY,
			value TEXT NOT NULL,
			updated_at DOUBLE PRECISION NOT NULL
		)`,
	}},
	{5, "cluster row versions and versioned documents", []string{
		`ALTER TABLE clusters ADD COLUMN version BIGINT NOT NULL DEFAULT 1`,
		`CREATE TABLE documents (
			key TEXT PRIMARY KEY,
			value TEXT NOT NULL,
			version BIGINT NOT NULL,
			updated_at DOUBLE PRECISION NOT NULL
		)`,
	}},
	{6, "the server that runs each request", []string{
		`ALTER TABLE requests ADD COLUMN server_id TEXT NOT NULL DEFAULT ''`,
	}},
	{7, "managed jobs and their events", []string{
		// One row per managed job: the columns the scheduler and the
		// queue filter on, the record (tasks included) as a JSON
		// document, and the DAG spec apart, read only by the controller.
		`CREATE TABLE managed_jobs (
			job_id {serial},
			name TEXT NOT NULL DEFAULT '',
			user_hash TEXT NOT NULL DEFAULT '',
			user_name TEXT NOT NULL DEFAULT '',
			workspace TEXT NOT NULL DEFAULT 'default',
			pool TEXT NOT NULL DEFAULT '',
			priority INTEGER NOT NULL DEFAULT 0,
			schedule_state TEXT NOT NULL,
			status TEXT NOT NULL,
			submitted_at DOUBLE PRECISION NOT NULL,
			parent_job_id BIGINT NOT NULL DEFAULT 0,
			record TEXT NOT NULL,
			spec TEXT NOT NULL DEFAULT '',
			version BIGINT NOT NULL DEFAULT 1
		)`,
		`CREATE INDEX managed_jobs_schedule ON managed_jobs (schedule_state, priority, job_id)`,
		`CREATE INDEX managed_jobs_user ON managed_jobs (user_hash, job_id)`,
		`CREATE INDEX managed_jobs_name ON managed_jobs (name)`,
		`CREATE INDEX managed_jobs_parent ON managed_jobs (parent_job_id)`,
		`CREATE TABLE managed_job_events (
			id {serial},
			job_id BIGINT NOT NULL,
			task_id INTEGER,
			new_status TEXT NOT NULL DEFAULT '',
			code TEXT NOT NULL DEFAULT '',
			reason TEXT NOT NULL DEFAULT '',
			ts DOUBLE PRECISION NOT NULL
		)`,
		`CREATE INDEX managed_job_events_job ON managed_job_events (job_id, id)`,
	}},
	{8, "pools of workers for managed jobs", []string{
		// One row per pool: its workers live in the record, so that a
		// move touching several (a rolling update's swap) is one
		// conditional update of one row, as for a managed job's tasks.
		`CREATE TABLE pools (
			name TEXT PRIMARY KEY,
			user_hash TEXT NOT NULL DEFAULT '',
			user_name TEXT NOT NULL DEFAULT '',
			workspace TEXT NOT NULL DEFAULT 'default',
			created_at DOUBLE PRECISION NOT NULL,
			record TEXT NOT NULL,
			version BIGINT NOT NULL DEFAULT 1
		)`,
	}},
	{9, "SkyServe services", []string{
		// As pools: a service's versions and replicas live in its
		// record, so a rolling swap is one conditional update.
		`CREATE TABLE services (
			name TEXT PRIMARY KEY,
			user_hash TEXT NOT NULL DEFAULT '',
			user_name TEXT NOT NULL DEFAULT '',
			workspace TEXT NOT NULL DEFAULT 'default',
			created_at DOUBLE PRECISION NOT NULL,
			record TEXT NOT NULL,
			version BIGINT NOT NULL DEFAULT 1
		)`,
	}},
	{10, "the task YAML and entrypoint of each cluster job", []string{
		// Keyed by the cluster's hash, not its name: a cluster downed
		// and launched again under the same name numbers its jobs from
		// 1 again, and those are other jobs.
		`CREATE TABLE cluster_job_specs (
			cluster_hash TEXT NOT NULL,
			job_id BIGINT NOT NULL,
			cluster_name TEXT NOT NULL DEFAULT '',
			task_yaml TEXT NOT NULL DEFAULT '',
			entrypoint TEXT NOT NULL DEFAULT '',
			created_at DOUBLE PRECISION NOT NULL,
			PRIMARY KEY (cluster_hash, job_id)
		)`,
	}},
	{11, "storage (buckets)", []string{
		`CREATE TABLE storage (
			name TEXT PRIMARY KEY,
			launched_at DOUBLE PRECISION NOT NULL,
			handle TEXT NOT NULL DEFAULT '',
			last_use TEXT NOT NULL DEFAULT '',
			status TEXT NOT NULL
		)`,
	}},
	{12, "volumes", []string{
		// One row per volume. usedby_clusters is a JSON list; the
		// version column makes every attach and detach a conditional
		// update, so two launches never both win a stale row.
		`CREATE TABLE volumes (
			name TEXT PRIMARY KEY,
			type TEXT NOT NULL,
			launched_at DOUBLE PRECISION NOT NULL,
			cloud TEXT NOT NULL DEFAULT '',
			region TEXT NOT NULL DEFAULT '',
			zone TEXT NOT NULL DEFAULT '',
			size_gi DOUBLE PRECISION NOT NULL DEFAULT 0,
			config TEXT NOT NULL DEFAULT '{}',
			name_on_cloud TEXT NOT NULL,
			user_hash TEXT NOT NULL DEFAULT '',
			user_name TEXT NOT NULL DEFAULT '',
			workspace TEXT NOT NULL DEFAULT 'default',
			last_attached_at DOUBLE PRECISION NOT NULL DEFAULT 0,
			last_use TEXT NOT NULL DEFAULT '',
			status TEXT NOT NULL,
			usedby_clusters TEXT NOT NULL DEFAULT '[]',
			is_ephemeral INTEGER NOT NULL DEFAULT 0,
			error_message TEXT NOT NULL DEFAULT '',
			creation_yaml TEXT NOT NULL DEFAULT '',
			version BIGINT NOT NULL DEFAULT 1
		)`,
		`CREATE UNIQUE INDEX volumes_name_on_cloud ON volumes (cloud, region, name_on_cloud)`,
	}},
	{13, "a service's load balancer port, reserved for its life", []string{
		// NULL (a row from before this step, until its controller claims
		// the port it has) is distinct from every port in both dialects,
		// so the unique index binds only rows that hold one.
		`ALTER TABLE services ADD COLUMN lb_port INTEGER`,
		`CREATE UNIQUE INDEX services_lb_port ON services (lb_port)`,
	}},
	{14, "managed jobs in claim order, and their versions", []string{
		// The scheduler reads WAITING jobs by priority high first, then
		// oldest, a page at a time from a cursor; without an index in that
		// order each page sorted every waiting job again.
		`CREATE INDEX managed_jobs_claim ON managed_jobs (schedule_state, priority DESC, job_id)`,
		// ManagedFingerprint reads only this index, not the records.
		`CREATE INDEX managed_jobs_version ON managed_jobs (job_id, version)`,
		// The in-progress counts of `sky status` and `sky jobs queue`
		// (statuses of the jobs not DONE), read from the index alone.
		`CREATE INDEX managed_jobs_progress ON managed_jobs (schedule_state, status)`,
	}},
	{15, "managed job counts", []string{
		// `sky status` and the first page of `sky jobs queue` count the
		// jobs by status on every call (CountManagedProgress). With
		// 10,000 queued, counting rows, even in an index, cost more than
		// the rest of `sky status`: the counts are kept instead, per
		// user, workspace, done or not and status, moved in the same
		// transaction as the job they count (CreateManagedJobs,
		// UpdateManagedJob).
		`CREATE TABLE IF NOT EXISTS managed_job_counts (
			user_hash TEXT NOT NULL,
			workspace TEXT NOT NULL,
			done INTEGER NOT NULL,
			status TEXT NOT NULL,
			n BIGINT NOT NULL,
			PRIMARY KEY (user_hash, workspace, done, status)
		)`,
		`DELETE FROM managed_job_counts`,
		`INSERT INTO managed_job_counts (user_hash, workspace, done, status, n)
			SELECT user_hash, workspace, CASE WHEN schedule_state = 'DONE' THEN 1 ELSE 0 END, status, COUNT(*)
			FROM managed_jobs GROUP BY user_hash, workspace, CASE WHEN schedule_state = 'DONE' THEN 1 ELSE 0 END, status`,
	}},
}

// SchemaVersion is the newest migration this build knows.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

func (s *Store) dialectSQL(stmt string) string {
	serial := "INTEGER PRIMARY KEY AUTOINCREMENT"
	if s.dialect == Postgres {
		serial = "BIGSERIAL PRIMARY KEY"
	}
	return strings.ReplaceAll(stmt, "{serial}", serial)
}

// migrate brings the schema up to date. Several processes may open the same
// database at once (two `sky` commands, a restarted server), so the whole
// check-and-apply runs under a lock: PostgreSQL's advisory lock, or
// SQLite's write lock taken by BEGIN IMMEDIATE.
func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.where, err)
	}
	defer conn.Close()
	if s.dialect == Postgres {
		// An arbitrary constant key shared by every SkyGo process.
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(53170001)`); err != nil {
			return fmt.Errorf("migrate %s: lock: %w", s.where, err)
		}
		defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(53170001)`) //nolint:errcheck
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at DOUBLE PRECISION NOT NULL)`); err != nil {
		return fmt.Errorf("migrate %s: create schema_version: %w", s.where, err)
	}
	for _, m := range migrations {
		if err := s.applyOne(ctx, conn, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) applyOne(ctx context.Context, conn *sql.Conn, m migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s to v%d: %w", s.where, m.version, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	var n int
	if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM schema_version WHERE version = ?`), m.version).Scan(&n); err != nil {
		return fmt.Errorf("migrate %s: read schema_version: %w", s.where, err)
	}
	if n > 0 {
		return nil
	}
	for _, st := range m.stmts {
		if _, err := tx.ExecContext(ctx, s.dialectSQL(st)); err != nil {
			return fmt.Errorf("migrate %s to v%d (%s): %w", s.where, m.version, m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`), m.version, m.name, nowSeconds()); err != nil {
		return fmt.Errorf("migrate %s: record v%d: %w", s.where, m.version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s to v%d: commit: %w", s.where, m.version, err)
	}
	return nil
}

// AppliedVersions lists the migration versions recorded in the database.
func (s *Store) AppliedVersions(ctx context.Context) ([]int, error) {
	rows, err := s.query(ctx, "list schema versions", `SELECT version FROM schema_version ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
