// Package state is SkyGo's database: one Store over database/sql with
// versioned, forward-only migrations and two dialects, SQLite (the embedded
// default, pure Go) and PostgreSQL (a team server). Writes that move a
// state machine are compare-and-set on the old status, so two writers never
// both win.
package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver

	"github.com/skygo/skygo/internal/paths"
)

// Dialect is the SQL flavour of the database behind a Store.
type Dialect int

const (
	// SQLite is the embedded default (~/.sky/state.db).
	SQLite Dialect = iota
	// Postgres is a team server named by `db:` or SKYPILOT_DB_CONNECTION_URI.
	Postgres
)

func (d Dialect) String() string {
	if d == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// EnvDBURI is the environment variable naming a PostgreSQL database; it
// wins over the `db` config key.
const EnvDBURI = "SKYPILOT_DB_CONNECTION_URI"

var (
	// ErrNotFound means no row matched the id, name or prefix.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous means a prefix matched more than one row.
	ErrAmbiguous = errors.New("ambiguous prefix")
	// ErrExists means a row with the same unique key is already there.
	ErrExists = errors.New("already exists")
)

// Store is the database. It is safe for concurrent use. On SQLite all
// writes go through one connection (SQLite allows one writer at a time;
// queuing them in Go avoids SQLITE_BUSY storms) and reads use a pool.
type Store struct {
	dialect Dialect
	w       *sql.DB // writes (and, on PostgreSQL, reads too)
	r       *sql.DB // reads
	locks   *sql.DB // PostgreSQL sessions holding cluster locks (locks.go)
	where   string  // path or redacted URI, for error messages
	observe func(op string, d time.Duration)
}

// DefaultSQLitePath is SkyGo's database under home (~/.sky/skygo/state.db;
// SkyPilot's ~/.sky/state.db is never opened).
func DefaultSQLitePath(home string) string {
	return paths.StateDB(home)
}

// ResolveURI picks the database: env SKYPILOT_DB_CONNECTION_URI, then the
// `db` config value, else "" (meaning the default SQLite file).
func ResolveURI(configDB string) string {
	if v := strings.TrimSpace(os.Getenv(EnvDBURI)); v != "" {
		return v
	}
	return strings.TrimSpace(configDB)
}

// Open opens the database named by uri: "" means SQLite at sqlitePath,
// "postgres://" or "postgresql://" means PostgreSQL, "sqlite://PATH" or a
// plain path means that SQLite file. Migrations run before it returns.
func Open(ctx context.Context, uri, sqlitePath string) (*Store, error) {
	switch {
	case uri == "":
		return OpenSQLite(ctx, sqlitePath)
	case strings.HasPrefix(uri, "postgres://"), strings.HasPrefix(uri, "postgresql://"):
		return OpenPostgres(ctx, uri)
	case strings.HasPrefix(uri, "sqlite://"):
		return OpenSQLite(ctx, strings.TrimPrefix(uri, "sqlite://"))
	case strings.Contains(uri, "://"):
		return nil, fmt.Errorf("database URI %q: unsupported scheme; use postgresql://USER:PASS@HOST:PORT/DB or a SQLite file path", redactURI(uri))
	default:
		return OpenSQLite(ctx, uri)
	}
}

// restrictDBFiles makes the database file and its -wal and -shm
// companions readable by their owner only: request bodies, user records
// and tokens live in them, and the WAL holds recent rows in full. SQLite
// creates the companions with the mode of the database file, so creating
// that one 0600 before the first open covers a new database; the chmod
// covers one an older version left 0644.
func restrictDBFiles(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// OpenSQLite opens (creating if needed) a SQLite database file in WAL mode.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open state database: empty SQLite path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	if err := restrictDBFiles(path); err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	// busy_timeout covers other processes (e.g. a second `sky` reading);
	// _txlock=immediate takes the write lock at BEGIN so a transaction never
	// fails half-way on lock upgrade.
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	s := &Store{dialect: SQLite, w: w, where: path}
	// Processes opening one fresh file at once race to switch it to WAL,
	// and SQLite answers that race with SQLITE_BUSY at once, busy timeout
	// or not: the first open and migration are serialised by a lock file
	// beside the database. Once it is WAL, opens no longer contend.
	unlock, err := lockFile(path + ".open-lock")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	err = s.migrate(ctx)
	unlock()
	if err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(2)
	s.r = r
	return s, nil
}

// OpenPostgres connects to a PostgreSQL database and migrates it.
func OpenPostgres(ctx context.Context, uri string) (*Store, error) {
	db, err := sql.Open("pgx", uri)
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL %s: %w", redactURI(uri), err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(4)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to PostgreSQL %s: %w (check the db config key or %s)", redactURI(uri), err, EnvDBURI)
	}
	locks, err := openLockPool(uri)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open PostgreSQL %s: %w", redactURI(uri), err)
	}
	s := &Store{dialect: Postgres, w: db, r: db, locks: locks, where: redactURI(uri)}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the connections.
func (s *Store) Close() error {
	err := s.w.Close()
	for _, db := range []*sql.DB{s.r, s.locks} {
		if db == nil || db == s.w {
			continue
		}
		if e := db.Close(); err == nil {
			err = e
		}
	}
	return err
}

// Dialect reports which database this is.
func (s *Store) Dialect() Dialect { return s.dialect }

// Where is the SQLite path or the PostgreSQL URI with the password hidden.
func (s *Store) Where() string { return s.where }

// SetObserver installs a hook called with the duration of every query
// (the server exports it as a metric). Set it before concurrent use.
func (s *Store) SetObserver(f func(op string, d time.Duration)) { s.observe = f }

func (s *Store) track(op string, start time.Time) {
	if s.observe != nil {
		s.observe(op, time.Since(start))
	}
}

// rebind turns the '?' placeholders used throughout this package into
// PostgreSQL's $1, $2, ... None of our statements has a '?' in a literal.
func (s *Store) rebind(q string) string {
	if s.dialect != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

func (s *Store) exec(ctx context.Context, op, q string, args ...any) (sql.Result, error) {
	defer s.track(op, time.Now())
	res, err := s.w.ExecContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return res, nil
}

func (s *Store) query(ctx context.Context, op, q string, args ...any) (*sql.Rows, error) {
	defer s.track(op, time.Now())
	rows, err := s.r.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return rows, nil
}

func (s *Store) queryRow(ctx context.Context, op, q string, args ...any) *sql.Row {
	defer s.track(op, time.Now())
	return s.r.QueryRowContext(ctx, s.rebind(q), args...)
}

// isUniqueViolation recognises a duplicate-key error from either driver
// without importing driver-specific types into callers.
func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "UNIQUE constraint failed") || strings.Contains(m, "SQLSTATE 23505") || strings.Contains(m, "duplicate key value")
}

func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		return uri
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// inClause returns "(?, ?, ...)" for n values.
func inClause(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// nowSeconds is epoch seconds as a float, the format of SkyPilot's
// created_at/finished_at fields.
func nowSeconds() float64 {
	return float64(time.Now().UnixNano()) / 1e9
}

// lockFile takes an exclusive flock on path (created 0600), released by
// the returned func or when the process ends.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
