package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/api"
)

// ActiveRequestStatuses are the non-final statuses.
var ActiveRequestStatuses = []api.RequestStatus{api.RequestPending, api.RequestRunning}

const requestCols = `request_id, name, entrypoint, request_body, status, created_at, started_at,
	finished_at, user_id, user_name, return_value, error, pid, schedule_type, cluster_name,
	status_msg, should_retry, file_mounts_blob_id, server_id`

func scanRequest(sc interface{ Scan(...any) error }) (*api.Request, error) {
	var r api.Request
	var started, finished sql.NullFloat64
	var pid sql.NullInt64
	var retry int
	if err := sc.Scan(&r.RequestID, &r.Name, &r.Entrypoint, &r.RequestBody, &r.Status, &r.CreatedAt,
		&started, &finished, &r.UserID, &r.UserName, &r.ReturnValue, &r.Error, &pid,
		&r.ScheduleType, &r.ClusterName, &r.StatusMsg, &retry, &r.FileMountsBlobID, &r.ServerID); err != nil {
		return nil, err
	}
	if started.Valid {
		r.StartedAt = &started.Float64
	}
	if finished.Valid {
		r.FinishedAt = &finished.Float64
	}
	if pid.Valid {
		p := int(pid.Int64)
		r.PID = &p
	}
	r.ShouldRetry = retry != 0
	return &r, nil
}

// CreateRequest inserts a new request. Status defaults to PENDING and
// CreatedAt to now.
func (s *Store) CreateRequest(ctx context.Context, r *api.Request) error {
	if r.RequestID == "" || r.Name == "" {
		return errors.New("create request: request_id and name are required")
	}
	if r.Status == "" {
		r.Status = api.RequestPending
	}
	if r.CreatedAt == 0 {
		r.CreatedAt = nowSeconds()
	}
	if r.ScheduleType == "" {
		r.ScheduleType = "short"
	}
	_, err := s.exec(ctx, "create request", `INSERT INTO requests (`+requestCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.RequestID, r.Name, r.Entrypoint, r.RequestBody, string(r.Status), r.CreatedAt,
		nullFloat(r.StartedAt), nullFloat(r.FinishedAt), r.UserID, r.UserName, r.ReturnValue, r.Error,
		nullInt(r.PID), r.ScheduleType, r.ClusterName, r.StatusMsg, boolInt(r.ShouldRetry), r.FileMountsBlobID, r.ServerID)
	if isUniqueViolation(err) {
		return fmt.Errorf("create request %s: %w", r.RequestID, ErrExists)
	}
	return err
}

// GetRequest finds a request by full id or by a unique prefix of it.
// It returns ErrNotFound or ErrAmbiguous (wrapped) when that fails.
func (s *Store) GetRequest(ctx context.Context, idOrPrefix string) (*api.Request, error) {
	if idOrPrefix == "" {
		return nil, fmt.Errorf("request id is empty: %w", ErrNotFound)
	}
	r, err := scanRequest(s.queryRow(ctx, "get request", `SELECT `+requestCols+` FROM requests WHERE request_id = ?`, idOrPrefix))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get request %s: %w", idOrPrefix, err)
	}
	rs, err := s.ListRequests(ctx, RequestFilter{IDPrefixes: []string{idOrPrefix}, AllStatuses: true, Limit: 2})
	if err != nil {
		return nil, err
	}
	switch len(rs) {
	case 0:
		return nil, fmt.Errorf("request %s: %w", idOrPrefix, ErrNotFound)
	case 1:
		return rs[0], nil
	default:
		return nil, fmt.Errorf("request id prefix %q matches more than one request; give more characters: %w", idOrPrefix, ErrAmbiguous)
	}
}

// RequestFilter selects requests. Zero values mean "no constraint", except
// that without AllStatuses (or Statuses) only active requests are listed.
type RequestFilter struct {
	IDPrefixes  []string // full ids or prefixes
	Statuses    []api.RequestStatus
	AllStatuses bool
	UserID      string
	ClusterName string
	Name        string
	Limit       int // 0 = all
}

// ListRequests returns matching requests, newest first.
func (s *Store) ListRequests(ctx context.Context, f RequestFilter) ([]*api.Request, error) {
	var where []string
	var args []any
	if len(f.IDPrefixes) > 0 {
		var ors []string
		for _, p := range f.IDPrefixes {
			// substr compares literally, unlike LIKE, whose wildcards would
			// need escaping in both dialects.
			ors = append(ors, `substr(request_id, 1, ?) = ?`)
			args = append(args, len(p), p)
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	statuses := f.Statuses
	if len(statuses) == 0 && !f.AllStatuses {
		statuses = ActiveRequestStatuses
	}
	if len(statuses) > 0 {
		where = append(where, "status IN "+inClause(len(statuses)))
		for _, st := range statuses {
			args = append(args, string(st))
		}
	}
	if f.UserID != "" {
		where = append(where, "user_id = ?")
		args = append(args, f.UserID)
	}
	if f.ClusterName != "" {
		where = append(where, "cluster_name = ?")
		args = append(args, f.ClusterName)
	}
	if f.Name != "" {
		where = append(where, "name = ?")
		args = append(args, f.Name)
	}
	q := `SELECT ` + requestCols + ` FROM requests`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, request_id"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := s.query(ctx, "list requests", q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*api.Request
	for rows.Next() {
		r, err := scanRequest(rows)
		if err != nil {
			return nil, fmt.Errorf("list requests: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RequestUpdate is what a status move may also set. Nil fields are left
// alone.
type RequestUpdate struct {
	ReturnValue *string
	Error       *string
	PID         *int
	StatusMsg   *string
	ShouldRetry *bool
}

// SetRequestStatus moves a request to `to` only if its current status is
// one of `from` (compare-and-set) and reports whether it moved. RUNNING
// stamps started_at; a final status stamps finished_at.
func (s *Store) SetRequestStatus(ctx context.Context, id string, from []api.RequestStatus, to api.RequestStatus, u RequestUpdate) (bool, error) {
	if len(from) == 0 {
		return false, errors.New("set request status: no from-statuses given")
	}
	sets := []string{"status = ?"}
	args := []any{string(to)}
	now := nowSeconds()
	if to == api.RequestRunning {
		sets = append(sets, "started_at = ?")
		args = append(args, now)
	}
	if to.Final() {
		sets = append(sets, "finished_at = ?")
		args = append(args, now)
	}
	if u.ReturnValue != nil {
		sets = append(sets, "return_value = ?")
		args = append(args, *u.ReturnValue)
	}
	if u.Error != nil {
		sets = append(sets, "error = ?")
		args = append(args, *u.Error)
	}
	if u.PID != nil {
		sets = append(sets, "pid = ?")
		args = append(args, *u.PID)
	}
	if u.StatusMsg != nil {
		sets = append(sets, "status_msg = ?")
		args = append(args, *u.StatusMsg)
	}
	if u.ShouldRetry != nil {
		sets = append(sets, "should_retry = ?")
		args = append(args, boolInt(*u.ShouldRetry))
	}
	args = append(args, id)
	for _, f := range from {
		args = append(args, string(f))
	}
	res, err := s.exec(ctx, "set request status",
		`UPDATE requests SET `+strings.Join(sets, ", ")+` WHERE request_id = ? AND status IN `+inClause(len(from)), args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// FailActiveRequests marks every PENDING or RUNNING request of server
// serverID (and any recorded before requests named their server) FAILED
// with the given error JSON and returns their ids. A server calls it at
// start: no worker of its previous process is still running them, while
// another server sharing the database may still run its own.
func (s *Store) FailActiveRequests(ctx context.Context, serverID, errJSON string) ([]string, error) {
	active, err := s.ListRequests(ctx, RequestFilter{})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range active {
		if r.ServerID != serverID && r.ServerID != "" {
			continue // another live server's, on a shared database
		}
		ok, err := s.SetRequestStatus(ctx, r.RequestID, ActiveRequestStatuses, api.RequestFailed, RequestUpdate{Error: &errJSON})
		if err != nil {
			return ids, err
		}
		if ok {
			ids = append(ids, r.RequestID)
		}
	}
	return ids, nil
}

// DeleteFinishedRequestsBefore drops final requests that finished before
// t (epoch seconds), for retention, and returns their ids so the caller
// can remove their log files.
func (s *Store) DeleteFinishedRequestsBefore(ctx context.Context, t float64) ([]string, error) {
	rows, err := s.query(ctx, "list old requests", `SELECT request_id FROM requests
		WHERE finished_at IS NOT NULL AND finished_at < ? AND status IN (?, ?, ?)`,
		t, string(api.RequestSucceeded), string(api.RequestFailed), string(api.RequestCancelled))
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := s.exec(ctx, "delete request", `DELETE FROM requests WHERE request_id = ?`, id); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func nullFloat(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func nullInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
