package state

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The store suite runs against a real PostgreSQL server that TestMain starts
// from the distro binaries (Debian package `postgresql`), in a temp dir, on
// a free loopback port, and stops by PID at the end.
var (
	pgBaseURL  string // postgres://postgres@127.0.0.1:PORT  (no database)
	pgSetupErr error
	pgDBSeq    atomic.Int64
)

func TestMain(m *testing.M) {
	var stop func()
	if os.Getenv("SKYGO_SKIP_POSTGRES") != "1" {
		stop, pgSetupErr = startPostgres()
	}
	code := m.Run()
	if stop != nil {
		stop()
	}
	os.Exit(code)
}

func findPGBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	for _, name := range []string{"postgres", "initdb"} {
		if p, err := exec.LookPath(name); err == nil {
			return filepath.Dir(p), nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, postgres) not found under /usr/lib/postgresql/*/bin or on PATH: install the `postgresql` apt package (CI does), or set SKYGO_SKIP_POSTGRES=1 to run the store suite on SQLite only")
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// pgCredential runs the server as an unprivileged user when we are root:
// PostgreSQL refuses to run as root.
func pgCredential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
	}
	return nil, -1, -1, fmt.Errorf("running as root and neither user postgres nor nobody exists to run PostgreSQL")
}

func startPostgres() (func(), error) {
	bin, err := findPGBin()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := pgCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "skygo-pg-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			cleanup()
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		cleanup()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		cleanup()
		return nil, err
	}
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	srv.Stdout, srv.Stderr, srv.Dir = logf, logf, dir
	if err := srv.Start(); err != nil {
		logf.Close()
		cleanup()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }() //nolint:errcheck
	stop := func() {
		// SIGINT is PostgreSQL's "fast shutdown"; the postmaster stops its
		// children itself. Kill only our own PID.
		_ = srv.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = srv.Process.Kill()
			<-exited
		}
		logf.Close()
		cleanup()
	}
	pgBaseURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, _ := sql.Open("pgx", pgBaseURL+"/postgres?sslmode=disable")
		err = db.Ping()
		db.Close()
		if err == nil {
			return stop, nil
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			stop()
			return nil, fmt.Errorf("postgres exited during start-up:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("postgres did not accept connections within 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newPGDatabase creates a fresh database for one test and returns its URI.
func newPGDatabase(t testing.TB) string {
	t.Helper()
	if os.Getenv("SKYGO_SKIP_POSTGRES") == "1" {
		t.Skip("SKYGO_SKIP_POSTGRES=1")
	}
	if pgSetupErr != nil {
		t.Fatalf("PostgreSQL test server: %v", pgSetupErr)
	}
	name := fmt.Sprintf("skygo_test_%d_%d", os.Getpid(), pgDBSeq.Add(1))
	db, err := sql.Open("pgx", pgBaseURL+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return pgBaseURL + "/" + name + "?sslmode=disable"
}
