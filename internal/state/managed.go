package state

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/api"
)

// ManagedJob is one managed job: its row's filter columns, and the rest
// of its record (tasks included) kept as one JSON document, so that every
// state move of a job, whichever tasks it touches, is one conditional
// update of one row (UpdateManagedJob).
type ManagedJob struct {
	JobID         int     `json:"-"`
	Name          string  `json:"-"`
	UserHash      string  `json:"-"`
	UserName      string  `json:"-"`
	Workspace     string  `json:"-"`
	Pool          string  `json:"-"`
	Priority      int     `json:"-"`
	ScheduleState string  `json:"-"`
	Status        string  `json:"-"` // the job's status, derived from its tasks on every write
	SubmittedAt   float64 `json:"-"`
	ParentJobID   int     `json:"-"`
	Version       int64   `json:"-"`

	PriorityClass string  `json:"priority_class,omitempty"`
	Execution     string  `json:"execution,omitempty"` // serial | parallel
	EndAt         float64 `json:"end_at,omitempty"`
	DependsOn     []int   `json:"depends_on,omitempty"`
	NumJobs       int     `json:"num_jobs,omitempty"`
	JobRank       int     `json:"job_rank,omitempty"`
	Entrypoint    string  `json:"entrypoint,omitempty"`
	UserYAML      string  `json:"user_yaml,omitempty"`
	// SchedulingDeadline is when the job, if none of its tasks has
	// started, is cancelled (job.wait_for_scheduling_timeout); 0: never.
	SchedulingDeadline float64 `json:"scheduling_deadline,omitempty"`
	// Cancel is set once someone asked to cancel the job; the
	// controller carries it out.
	Cancel *ManagedCancel `json:"cancel,omitempty"`
	// PrimaryTasks and TerminationDelay are a job group's header.
	PrimaryTasks     []string          `json:"primary_tasks,omitempty"`
	TerminationDelay map[string]string `json:"termination_delay,omitempty"`
	// PrimariesDoneAt is when every primary task of a job group had
	// ended, which starts the auxiliary tasks' termination delay.
	PrimariesDoneAt float64 `json:"primaries_done_at,omitempty"`
	// GroupNetwork names the set of clusters a job group's hosts files
	// were last written for.
	GroupNetwork string         `json:"group_network,omitempty"`
	Tasks        []*ManagedTask `json:"tasks"`

	// Spec is the DAG to run (the launch body), loaded only on request.
	Spec json.RawMessage `json:"-"`
}

// ManagedCancel records a cancellation request.
type ManagedCancel struct {
	By              string  `json:"by,omitempty"`
	RequestID       string  `json:"request_id,omitempty"`
	At              float64 `json:"at"`
	Graceful        bool    `json:"graceful,omitempty"`
	GracefulTimeout *int    `json:"graceful_timeout,omitempty"`
	// Reason replaces the default "cancelled by" text (a dependency that
	// failed, a parent job cancelled).
	Reason string `json:"reason,omitempty"`
}

// ManagedTask is one task of a managed job.
type ManagedTask struct {
	TaskID    int    `json:"task_id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Resources string `json:"resources"`
	// Primary is set for the tasks of a job group only.
	Primary *bool `json:"primary,omitempty"`
	// ClusterName is the task's cluster (deterministic: a relaunch after
	// a crash finds the cluster it made), or the pool worker it runs on.
	ClusterName     string  `json:"cluster_name,omitempty"`
	SubmittedAt     float64 `json:"submitted_at,omitempty"`
	StartAt         float64 `json:"start_at,omitempty"`
	EndAt           float64 `json:"end_at,omitempty"`
	LastRecoveredAt float64 `json:"last_recovered_at,omitempty"`
	JobDuration     float64 `json:"job_duration,omitempty"`
	RecoveryCount   int     `json:"recovery_count,omitempty"`
	// Restarts counts the restarts after user failures that consumed
	// max_restarts_on_errors.
	Restarts int `json:"restarts,omitempty"`
	// Attempt numbers the runs of the task; the job on the cluster is
	// tagged with it, so a controller cut off after submitting finds it.
	Attempt int `json:"attempt"`
	// Tries counts failed launch attempts in a row (backoff); NextTryAt
	// is when the next may start.
	Tries     int     `json:"tries,omitempty"`
	NextTryAt float64 `json:"next_try_at,omitempty"`
	// Launching marks an attempt whose launch has begun: a reconcile that
	// finds it set was cut off, and runs the same attempt again.
	Launching bool `json:"launching,omitempty"`
	// LaunchProgress is the infrastructure's latest launch-progress text
	// of the attempt being launched ("Launching (pending: Resources;
	// partition: gpu)"); `details` shows it while the task launches.
	LaunchProgress string `json:"launch_progress,omitempty"`
	// RecoverReason is why the task last went RECOVERING.
	RecoverReason string `json:"recover_reason,omitempty"`
	// TroubleSince is when an UP cluster first failed to answer.
	TroubleSince float64 `json:"trouble_since,omitempty"`
	// AgentJobID is the job's id on its cluster (0: not submitted yet).
	AgentJobID int `json:"agent_job_id,omitempty"`
	// FailedSeenAt is when the cluster first reported the job failed;
	// the verdict (user failure or preemption) waits for a grace period.
	FailedSeenAt     float64     `json:"failed_seen_at,omitempty"`
	FailureReason    string      `json:"failure_reason,omitempty"`
	Cloud            string      `json:"cloud,omitempty"`
	Region           string      `json:"region,omitempty"`
	Zone             string      `json:"zone,omitempty"`
	Infra            string      `json:"infra,omitempty"`
	ClusterResources string      `json:"cluster_resources,omitempty"`
	NodeNames        []string    `json:"node_names,omitempty"`
	IPs              [][2]string `json:"ips,omitempty"`
	RunTimestamp     string      `json:"run_timestamp,omitempty"`
	// Blocked are the places recovery must avoid first ("cloud/region").
	Blocked []string `json:"blocked,omitempty"`
	// PinnedTo is the place recovery tries first (FAILOVER).
	PinnedTo string `json:"pinned_to,omitempty"`
	// LogsSaved says the task's log of the attempt that ended was copied
	// to the server before its cluster went away.
	LogsSaved bool `json:"logs_saved,omitempty"`
	// ClusterGone says the task's cluster was torn down after it ended.
	ClusterGone bool `json:"cluster_gone,omitempty"`
	// CancelTries counts a cancelled pool task's failed attempts to end
	// its job on its worker; a bounded number, and the task is CANCELLED
	// anyway (its job is left to the worker's controller to end).
	CancelTries int `json:"cancel_tries,omitempty"`
}

// JobStatus is the status a job shows: its first non-terminal task's,
// else its last task's.
func (j *ManagedJob) JobStatus() string {
	for _, t := range j.Tasks {
		if !api.ManagedTerminal(t.Status) {
			return t.Status
		}
	}
	if len(j.Tasks) == 0 {
		return api.ManagedPending
	}
	// A job group fails if any task failed, whatever the last one did.
	for _, t := range j.Tasks {
		if api.ManagedFailure(t.Status) {
			return t.Status
		}
	}
	// With primary tasks, the auxiliary ones are cancelled once the
	// primaries end: the job is what its primaries did.
	primaries, ok := 0, 0
	for _, t := range j.Tasks {
		if t.Primary != nil && *t.Primary {
			primaries++
			if t.Status == api.ManagedSucceeded {
				ok++
			}
		}
	}
	if primaries > 0 && primaries < len(j.Tasks) && ok == primaries {
		return api.ManagedSucceeded
	}
	return j.Tasks[len(j.Tasks)-1].Status
}

// Clone is a deep copy of j, for a mutation to edit.
func (j *ManagedJob) Clone() *ManagedJob {
	raw, _ := json.Marshal(j)
	var c ManagedJob
	_ = json.Unmarshal(raw, &c)
	c.JobID, c.Name, c.UserHash, c.UserName, c.Workspace, c.Pool = j.JobID, j.Name, j.UserHash, j.UserName, j.Workspace, j.Pool
	c.Priority, c.ScheduleState, c.Status, c.SubmittedAt, c.ParentJobID, c.Version = j.Priority, j.ScheduleState, j.Status, j.SubmittedAt, j.ParentJobID, j.Version
	c.Spec = j.Spec
	return &c
}

// ManagedEventIn is an event a state move records with it.
type ManagedEventIn struct {
	TaskID *int
	Status string
	Code   string
	Reason string
}

// TaskEvent is an event of one task.
func TaskEvent(task int, status, reason string) ManagedEventIn {
	return ManagedEventIn{TaskID: &task, Status: status, Reason: reason}
}

const managedCols = `job_id, name, user_hash, user_name, workspace, pool, priority, schedule_state, status,
	submitted_at, parent_job_id, record, version`

func scanManaged(sc interface{ Scan(...any) error }, withSpec bool) (*ManagedJob, error) {
	var j ManagedJob
	var record, spec string
	dest := []any{&j.JobID, &j.Name, &j.UserHash, &j.UserName, &j.Workspace, &j.Pool, &j.Priority, &j.ScheduleState,
		&j.Status, &j.SubmittedAt, &j.ParentJobID, &record, &j.Version}
	if withSpec {
		dest = append(dest, &spec)
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(record), &j); err != nil {
		return nil, fmt.Errorf("managed job %d: unreadable record: %w", j.JobID, err)
	}
	if withSpec {
		j.Spec = json.RawMessage(spec)
	}
	return &j, nil
}

// CreateManagedJobs inserts jobs (one submission: an array is several)
// with their shared spec, each with its "Job submitted to queue" event,
// in one transaction. It sets each job's JobID.
func (s *Store) CreateManagedJobs(ctx context.Context, jobs []*ManagedJob, spec []byte) error {
	now := nowSeconds()
	// One string for every job of an array: a conversion per job would
	// copy the whole spec that many times.
	specText := string(spec)
	return s.tx(ctx, "create managed jobs", func(tx *sql.Tx) error {
		moves := map[countKey]int{}
		for _, j := range jobs {
			if j.SubmittedAt == 0 {
				j.SubmittedAt = now
			}
			if j.Workspace == "" {
				j.Workspace = "default"
			}
			j.Status = j.JobStatus()
			j.Version = 1
			record, err := json.Marshal(j)
			if err != nil {
				return err
			}
			q := `INSERT INTO managed_jobs (name, user_hash, user_name, workspace, pool, priority, schedule_state, status,
				submitted_at, parent_job_id, record, spec, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`
			args := []any{j.Name, j.UserHash, j.UserName, j.Workspace, j.Pool, j.Priority, j.ScheduleState, j.Status,
				j.SubmittedAt, j.ParentJobID, string(record), specText}
			var id int64
			if s.dialect == Postgres {
				if err := tx.QueryRowContext(ctx, s.rebind(q+` RETURNING job_id`), args...).Scan(&id); err != nil {
					return err
				}
			} else {
				res, err := tx.ExecContext(ctx, q, args...)
				if err != nil {
					return err
				}
				if id, err = res.LastInsertId(); err != nil {
					return err
				}
			}
			j.JobID = int(id)
			if err := s.managedEventTx(ctx, tx, j.JobID, ManagedEventIn{Status: api.ManagedPending, Reason: "Job submitted to queue"}, now); err != nil {
				return err
			}
			moves[countKeyOf(j)]++
		}
		return s.moveCountsTx(ctx, tx, moves)
	})
}

// countKey is a row of managed_job_counts.
type countKey struct {
	user, workspace string
	done            int
	status          string
}

func countKeyOf(j *ManagedJob) countKey {
	k := countKey{user: j.UserHash, workspace: j.Workspace, status: j.Status}
	if j.ScheduleState == api.ScheduleDone {
		k.done = 1
	}
	return k
}

// moveCountsTx adds each delta to its count, in key order: two
// transactions moving the same counts lock them in the same order, so
// neither waits on the other in a cycle (PostgreSQL).
func (s *Store) moveCountsTx(ctx context.Context, tx *sql.Tx, moves map[countKey]int) error {
	keys := make([]countKey, 0, len(moves))
	for k, d := range moves {
		if d != 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b countKey) int {
		return cmp.Or(cmp.Compare(a.user, b.user), cmp.Compare(a.workspace, b.workspace), cmp.Compare(a.done, b.done), cmp.Compare(a.status, b.status))
	})
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO managed_job_counts (user_hash, workspace, done, status, n) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (user_hash, workspace, done, status) DO UPDATE SET n = managed_job_counts.n + excluded.n`),
			k.user, k.workspace, k.done, k.status, moves[k]); err != nil {
			return fmt.Errorf("count managed jobs: %w", err)
		}
	}
	return nil
}

// GetManagedJob reads one job; withSpec also reads its DAG spec.
func (s *Store) GetManagedJob(ctx context.Context, id int, withSpec bool) (*ManagedJob, error) {
	cols := managedCols
	if withSpec {
		cols += ", spec"
	}
	j, err := scanManaged(s.queryRow(ctx, "get managed job", `SELECT `+cols+` FROM managed_jobs WHERE job_id = ?`, id), withSpec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return j, err
}

// ManagedFilter selects managed jobs; empty fields select everything.
type ManagedFilter struct {
	IDs            []int
	UserHash       string
	Name           string
	Pool           string
	Statuses       []string
	ScheduleStates []string
	// NotDone leaves out jobs whose schedule state is DONE.
	NotDone   bool
	ParentIDs []int
	After     float64
	Before    float64
	// Limit caps the rows (0: none); Order "sched" sorts by claim order
	// (priority high first, then oldest), else newest first.
	Limit  int
	Offset int
	Order  string
	// ClaimAfter, with Order "sched", starts after this job in claim
	// order, and BelowID, in the default order, after job BelowID: a
	// cursor, so reading page n does not read (and sort) pages 1..n-1
	// again, as an OFFSET does.
	ClaimAfter *ClaimCursor
	BelowID    int
	// HiddenWorkspaces leaves out the jobs of these workspaces (a job
	// recorded without one is in "default").
	HiddenWorkspaces []string
}

func (f ManagedFilter) where() (string, []any) {
	var where []string
	var args []any
	in := func(col string, vals []any) {
		where = append(where, col+" IN "+inClause(len(vals)))
		args = append(args, vals...)
	}
	if len(f.IDs) > 0 {
		in("job_id", anys(f.IDs))
	}
	if len(f.ParentIDs) > 0 {
		in("parent_job_id", anys(f.ParentIDs))
	}
	if len(f.Statuses) > 0 {
		in("status", anys(f.Statuses))
	}
	if len(f.ScheduleStates) > 0 {
		in("schedule_state", anys(f.ScheduleStates))
	}
	for _, c := range []struct {
		col, v string
	}{{"user_hash", f.UserHash}, {"name", f.Name}, {"pool", f.Pool}} {
		if c.v != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	if len(f.HiddenWorkspaces) > 0 {
		where = append(where, "COALESCE(NULLIF(workspace, ''), 'default') NOT IN "+inClause(len(f.HiddenWorkspaces)))
		args = append(args, anys(f.HiddenWorkspaces)...)
	}
	if f.NotDone {
		where = append(where, "schedule_state <> ?")
		args = append(args, api.ScheduleDone)
	}
	if f.After > 0 {
		where = append(where, "submitted_at >= ?")
		args = append(args, f.After)
	}
	if f.Before > 0 {
		where = append(where, "submitted_at <= ?")
		args = append(args, f.Before)
	}
	if c := f.ClaimAfter; c != nil {
		where = append(where, "(priority < ? OR (priority = ? AND job_id > ?))")
		args = append(args, c.Priority, c.Priority, c.JobID)
	}
	if f.BelowID > 0 {
		where = append(where, "job_id < ?")
		args = append(args, f.BelowID)
	}
	if len(where) == 0 {
		return "", args
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

func anys[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// ListManagedJobs returns the matching jobs (without their specs).
func (s *Store) ListManagedJobs(ctx context.Context, f ManagedFilter) ([]*ManagedJob, error) {
	where, args := f.where()
	order := " ORDER BY job_id DESC"
	if f.Order == "sched" {
		order = " ORDER BY priority DESC, job_id ASC"
	}
	q := `SELECT ` + managedCols + ` FROM managed_jobs` + where + order
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d OFFSET %d", f.Limit, f.Offset)
	}
	rows, err := s.query(ctx, "list managed jobs", q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*ManagedJob
	for rows.Next() {
		j, err := scanManaged(rows, false)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// ClaimCursor is a position in claim order: a job's priority and id.
type ClaimCursor struct{ Priority, JobID int }

// ClaimCursorOf is the position of j in claim order.
func ClaimCursorOf(j *ManagedJob) *ClaimCursor {
	return &ClaimCursor{Priority: j.Priority, JobID: j.JobID}
}

// ManagedFingerprint sums up every managed job row: how many there are,
// the newest id, and the sum of their versions (each write of a row
// raises its version). Two equal fingerprints mean, short of a deletion
// and writes that cancel out exactly, that no job was added, changed or
// removed in between; it is read from an index, not the records.
type ManagedFingerprint struct {
	Count, MaxID, Versions int64
}

// ManagedFingerprint reads the fingerprint of the managed_jobs table.
func (s *Store) ManagedFingerprint(ctx context.Context) (ManagedFingerprint, error) {
	var f ManagedFingerprint
	err := s.queryRow(ctx, "managed jobs fingerprint",
		`SELECT COUNT(*), COALESCE(MAX(job_id), 0), COALESCE(CAST(SUM(version) AS BIGINT), 0) FROM managed_jobs`).Scan(&f.Count, &f.MaxID, &f.Versions)
	return f, err
}

// ManagedJobIDs lists the ids of the matching jobs, in claim order when
// f.Order is "sched", else newest first: the controllers' resync reads
// only this.
func (s *Store) ManagedJobIDs(ctx context.Context, f ManagedFilter) ([]int, error) {
	where, args := f.where()
	order := " ORDER BY job_id DESC"
	if f.Order == "sched" {
		order = " ORDER BY priority DESC, job_id ASC"
	}
	q := `SELECT job_id FROM managed_jobs` + where + order
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := s.query(ctx, "list managed job ids", q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// CountManagedBySchedule counts the jobs in each schedule state but DONE.
func (s *Store) CountManagedBySchedule(ctx context.Context) (map[string]int, error) {
	return s.countManagedBy(ctx, "schedule_state", ManagedFilter{NotDone: true})
}

// countManagedBy counts the jobs f selects by the values of col.
func (s *Store) countManagedBy(ctx context.Context, col string, f ManagedFilter) (map[string]int, error) {
	where, args := f.where()
	rows, err := s.query(ctx, "count managed jobs by "+col, `SELECT `+col+`, COUNT(*) FROM managed_jobs`+where+` GROUP BY `+col, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var v string
		var n int
		if err := rows.Scan(&v, &n); err != nil {
			return nil, err
		}
		out[v] = n
	}
	return out, rows.Err()
}

// ManagedMutation edits a job's current row and returns the events the
// move records. It must only decide and edit: it may run more than once,
// inside the transaction. ErrNoChange leaves the row as it is.
type ManagedMutation func(j *ManagedJob) ([]ManagedEventIn, error)

// UpdateManagedJob applies mutate to the current row of job id and writes
// it conditionally on the version read, with its events, in one
// transaction (see UpdateCluster for why this is a decision over the
// current state, never a blind overwrite). It returns the row as written,
// or as it is when the mutation returned ErrNoChange.
func (s *Store) UpdateManagedJob(ctx context.Context, id int, mutate ManagedMutation) (*ManagedJob, error) {
	for range conflictRetries {
		var out *ManagedJob
		err := s.tx(ctx, "update managed job", func(tx *sql.Tx) error {
			cur, err := scanManaged(tx.QueryRowContext(ctx, s.rebind(`SELECT `+managedCols+` FROM managed_jobs WHERE job_id = ?`), id), false)
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			next := cur.Clone()
			events, err := mutate(next)
			if errors.Is(err, ErrNoChange) {
				out = cur
				return nil
			}
			if err != nil {
				return err
			}
			next.Status = next.JobStatus()
			next.Version = cur.Version + 1
			record, err := json.Marshal(next)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, s.rebind(`UPDATE managed_jobs SET schedule_state = ?, status = ?, priority = ?,
				record = ?, version = ? WHERE job_id = ? AND version = ?`),
				next.ScheduleState, next.Status, next.Priority, string(record), next.Version, id, cur.Version)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return ErrConflict
			}
			if from, to := countKeyOf(cur), countKeyOf(next); from != to {
				if err := s.moveCountsTx(ctx, tx, map[countKey]int{from: -1, to: 1}); err != nil {
					return err
				}
			}
			now := nowSeconds()
			for _, e := range events {
				if err := s.managedEventTx(ctx, tx, id, e, now); err != nil {
					return err
				}
			}
			out = next
			return nil
		})
		if errors.Is(err, ErrConflict) {
			continue
		}
		return out, err
	}
	return nil, fmt.Errorf("update managed job %d: %w", id, ErrConflict)
}

func (s *Store) managedEventTx(ctx context.Context, tx *sql.Tx, job int, e ManagedEventIn, now float64) error {
	var task any
	if e.TaskID != nil {
		task = *e.TaskID
	}
	_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO managed_job_events (job_id, task_id, new_status, code, reason, ts) VALUES (?, ?, ?, ?, ?, ?)`),
		job, task, e.Status, e.Code, e.Reason, now)
	return err
}

// ManagedEvents returns the timelines of jobs, oldest event first.
func (s *Store) ManagedEvents(ctx context.Context, jobIDs ...int) ([]api.ManagedEvent, error) {
	q := `SELECT job_id, task_id, new_status, code, reason, ts FROM managed_job_events`
	var args []any
	if len(jobIDs) > 0 {
		q += ` WHERE job_id IN ` + inClause(len(jobIDs))
		args = anys(jobIDs)
	}
	rows, err := s.query(ctx, "list managed job events", q+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []api.ManagedEvent
	for rows.Next() {
		var e api.ManagedEvent
		var task sql.NullInt64
		if err := rows.Scan(&e.JobID, &task, &e.Status, &e.Code, &e.Reason, &e.Timestamp); err != nil {
			return nil, err
		}
		if task.Valid {
			t := int(task.Int64)
			e.TaskID = &t
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ManagedEventSummaries returns, per job, the number of events and the
// last one, in one query.
func (s *Store) ManagedEventSummaries(ctx context.Context, jobIDs []int) (map[int]api.ManagedEventSummary, error) {
	out := map[int]api.ManagedEventSummary{}
	if len(jobIDs) == 0 {
		return out, nil
	}
	rows, err := s.query(ctx, "summarise managed job events", `SELECT e.job_id, e.task_id, e.new_status, e.code, e.reason, e.ts, c.n
		FROM managed_job_events e JOIN (SELECT job_id, MAX(id) AS last, COUNT(*) AS n FROM managed_job_events
		WHERE job_id IN `+inClause(len(jobIDs))+` GROUP BY job_id) c ON e.id = c.last`, anys(jobIDs)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var e api.ManagedEvent
		var task sql.NullInt64
		var n int
		if err := rows.Scan(&e.JobID, &task, &e.Status, &e.Code, &e.Reason, &e.Timestamp, &n); err != nil {
			return nil, err
		}
		if task.Valid {
			t := int(task.Int64)
			e.TaskID = &t
		}
		out[e.JobID] = api.ManagedEventSummary{Count: n, Last: e}
	}
	return out, rows.Err()
}

// ManagedCounts are the counts a queue listing reports with its first
// page.
type ManagedCounts struct {
	// Total is how many jobs the filter selects (its Limit aside).
	Total int
	// NotDone counts by job status the jobs the filter selects, its
	// Statuses aside, whose schedule state is not DONE.
	NotDone map[string]int
}

// CountManagedProgress reads both counts of f in one grouped query: from
// the counts kept in managed_job_counts when f selects by user, workspace
// and done-or-not only (as `sky status` and `sky jobs queue` do), else
// from the jobs f selects.
func (s *Store) CountManagedProgress(ctx context.Context, f ManagedFilter) (ManagedCounts, error) {
	statuses := f.Statuses
	f.Statuses, f.Limit, f.Offset, f.Order = nil, 0, 0, ""
	var q string
	var args []any
	if f.countable() {
		// What `sky status` and `sky jobs queue` ask: read from the
		// kept counts, a few rows however many jobs there are.
		var where []string
		if f.UserHash != "" {
			where = append(where, "user_hash = ?")
			args = append(args, f.UserHash)
		}
		if f.NotDone {
			where = append(where, "done = 0")
		}
		if len(f.HiddenWorkspaces) > 0 {
			where = append(where, "COALESCE(NULLIF(workspace, ''), 'default') NOT IN "+inClause(len(f.HiddenWorkspaces)))
			args = append(args, anys(f.HiddenWorkspaces)...)
		}
		q = `SELECT done, status, CAST(SUM(n) AS BIGINT) FROM managed_job_counts`
		if len(where) > 0 {
			q += " WHERE " + strings.Join(where, " AND ")
		}
		q += ` GROUP BY done, status`
	} else {
		var where string
		where, args = f.where()
		q = `SELECT CASE WHEN schedule_state = 'DONE' THEN 1 ELSE 0 END, status, COUNT(*) FROM managed_jobs` + where +
			` GROUP BY schedule_state, status`
	}
	rows, err := s.query(ctx, "count managed jobs in progress", q, args...)
	if err != nil {
		return ManagedCounts{}, err
	}
	defer rows.Close()
	out := ManagedCounts{NotDone: map[string]int{}}
	for rows.Next() {
		var done int
		var status string
		var n int
		if err := rows.Scan(&done, &status, &n); err != nil {
			return ManagedCounts{}, err
		}
		if n == 0 {
			continue
		}
		if done == 0 {
			out.NotDone[status] += n
		}
		if len(statuses) == 0 || slices.Contains(statuses, status) {
			out.Total += n
		}
	}
	return out, rows.Err()
}

// countable says whether managed_job_counts answers f: it selects by
// user, done or not and workspace only.
func (f ManagedFilter) countable() bool {
	g := f
	g.UserHash, g.NotDone, g.HiddenWorkspaces = "", false, nil
	where, _ := g.where()
	return where == ""
}

// MaxManagedPriority is the highest priority among jobs in the given
// schedule states (0 when there are none).
func (s *Store) MaxManagedPriority(ctx context.Context, states []string) (int, error) {
	var p sql.NullInt64
	err := s.queryRow(ctx, "max managed priority", `SELECT MAX(priority) FROM managed_jobs WHERE schedule_state IN `+inClause(len(states)), anys(states)...).Scan(&p)
	return int(p.Int64), err
}

// DeleteManagedEventsBefore removes the events older than t (epoch s).
func (s *Store) DeleteManagedEventsBefore(ctx context.Context, t float64) error {
	_, err := s.exec(ctx, "delete old managed job events", `DELETE FROM managed_job_events WHERE ts < ?`, t)
	return err
}

// Started says whether any task of the job ever started running.
func (j *ManagedJob) Started() bool {
	for _, t := range j.Tasks {
		if t.StartAt > 0 {
			return true
		}
	}
	return false
}
