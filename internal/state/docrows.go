package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Pools and services are stored alike: one row per object whose columns
// are who owns it and its CAS version, and whose record is the rest as
// one JSON document, so that a move touching several of its members (a
// rolling update's swap of two replicas) is one conditional update of one
// row. The helpers below are that storage, once.

// RowMeta is the columns of a document row; the record holds the rest.
type RowMeta struct {
	Name      string  `json:"-"`
	UserHash  string  `json:"-"`
	UserName  string  `json:"-"`
	Workspace string  `json:"-"`
	CreatedAt float64 `json:"-"`
	Version   int64   `json:"-"` // the row's version (CAS)
}

func (m *RowMeta) rowMeta() *RowMeta { return m }

// docRecord is a pointer to a record type embedding RowMeta.
type docRecord[T any] interface {
	*T
	rowMeta() *RowMeta
}

const docCols = `name, user_hash, user_name, workspace, created_at, record, version`

func scanDoc[T any, P docRecord[T]](sc interface{ Scan(...any) error }, what string) (P, error) {
	v := P(new(T))
	m := v.rowMeta()
	var record string
	if err := sc.Scan(&m.Name, &m.UserHash, &m.UserName, &m.Workspace, &m.CreatedAt, &record, &m.Version); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(record), v); err != nil {
		return nil, fmt.Errorf("%s %s: unreadable record: %w", what, m.Name, err)
	}
	return v, nil
}

// cloneDoc is a deep copy of v, for a mutation to edit.
func cloneDoc[T any, P docRecord[T]](v P) P {
	raw, _ := json.Marshal(v)
	c := P(new(T))
	_ = json.Unmarshal(raw, c)
	*c.rowMeta() = *v.rowMeta()
	return c
}

func docCreate[T any, P docRecord[T]](ctx context.Context, s *Store, table, what string, v P) error {
	m := v.rowMeta()
	if m.CreatedAt == 0 {
		m.CreatedAt = nowSeconds()
	}
	if m.Workspace == "" {
		m.Workspace = "default"
	}
	record, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, "create "+what, `INSERT INTO `+table+` (`+docCols+`) VALUES (?, ?, ?, ?, ?, ?, 1)`,
		m.Name, m.UserHash, m.UserName, m.Workspace, m.CreatedAt, string(record))
	if isUniqueViolation(err) {
		return ErrExists
	}
	if err == nil {
		m.Version = 1
	}
	return err
}

func docGet[T any, P docRecord[T]](ctx context.Context, s *Store, table, what, name string) (P, error) {
	v, err := scanDoc[T, P](s.queryRow(ctx, "get "+what, `SELECT `+docCols+` FROM `+table+` WHERE name = ?`, name), what)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return v, err
}

func docList[T any, P docRecord[T]](ctx context.Context, s *Store, table, what string) ([]P, error) {
	rows, err := s.query(ctx, "list "+what, `SELECT `+docCols+` FROM `+table+` ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []P
	for rows.Next() {
		v, err := scanDoc[T, P](rows, what)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// docUpdate applies mutate to the current row and writes it
// conditionally on the version read (see UpdateManagedJob). It returns
// the row as written, or as it is after ErrNoChange.
func docUpdate[T any, P docRecord[T]](ctx context.Context, s *Store, table, what, name string, mutate func(P) error) (P, error) {
	for range conflictRetries {
		var out P
		err := s.tx(ctx, "update "+what, func(tx *sql.Tx) error {
			cur, err := scanDoc[T, P](tx.QueryRowContext(ctx, s.rebind(`SELECT `+docCols+` FROM `+table+` WHERE name = ?`), name), what)
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			next := cloneDoc[T, P](cur)
			if err := mutate(next); errors.Is(err, ErrNoChange) {
				out = cur
				return nil
			} else if err != nil {
				return err
			}
			next.rowMeta().Version = cur.rowMeta().Version + 1
			record, err := json.Marshal(next)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, s.rebind(`UPDATE `+table+` SET record = ?, version = ? WHERE name = ? AND version = ?`),
				string(record), next.rowMeta().Version, name, cur.rowMeta().Version)
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
	return nil, fmt.Errorf("update %s %s: %w", what, name, ErrConflict)
}

// docDelete removes row name if it is still at version (a controller
// deletes what it emptied, not what was re-applied since).
func docDelete(ctx context.Context, s *Store, table, what, name string, version int64) error {
	res, err := s.exec(ctx, "delete "+what, `DELETE FROM `+table+` WHERE name = ? AND version = ?`, name, version)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrConflict
	}
	return nil
}
