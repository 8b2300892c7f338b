// Package pgtest runs a throwaway PostgreSQL server for tests: the distro's
// server binaries (Debian package `postgresql`, /usr/lib/postgresql/*/bin)
// start in a temp dir on a free loopback port, trusting local connections,
// and stop by their PID. Nothing of the machine's own PostgreSQL (its
// cluster, its service, its port) is touched.
//
// CI always has the binaries (.ci/run installs them), so a test that needs
// PostgreSQL fails with Start's error when they are missing; only
// SKYGO_SKIP_POSTGRES=1, an explicit choice, skips it.
package pgtest

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

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// SkipEnv names the variable that, set to 1, makes tests needing
// PostgreSQL skip instead of starting it.
const SkipEnv = "SKYGO_SKIP_POSTGRES"

// Skipped reports whether SKYGO_SKIP_POSTGRES=1 asks to run without it.
func Skipped() bool { return os.Getenv(SkipEnv) == "1" }

// Start starts a server and returns its base URL
// (postgres://postgres@127.0.0.1:PORT, no database) and a stop function
// that shuts it down and removes its files.
func Start() (baseURL string, stop func(), err error) {
	bin, err := findBin()
	if err != nil {
		return "", nil, err
	}
	cred, uid, gid, err := credential()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "skygo-pg-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			cleanup()
			return "", nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		cleanup()
		return "", nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	logf, err := os.Create(logPath)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	// Durability is worthless for a throwaway server and costs seconds
	// per test on a slow disk.
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	srv.Stdout, srv.Stderr, srv.Dir = logf, logf, dir
	if err := srv.Start(); err != nil {
		logf.Close()
		cleanup()
		return "", nil, fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }() //nolint:errcheck
	stop = func() {
		// SIGINT is PostgreSQL's "fast shutdown": the postmaster ends its
		// own children, so only its PID is signalled.
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
	baseURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = ping(baseURL)
		if err == nil {
			return baseURL, stop, nil
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			stop()
			return "", nil, fmt.Errorf("postgres exited during start-up:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("postgres did not accept connections within 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ping(baseURL string) error {
	db, err := sql.Open("pgx", baseURL+"/postgres?sslmode=disable")
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Ping()
}

var dbSeq atomic.Int64

// NewDatabase creates a fresh, empty database on the server at baseURL
// and returns its URI.
func NewDatabase(t testing.TB, baseURL string) string {
	t.Helper()
	name := fmt.Sprintf("skygo_test_%d_%d", os.Getpid(), dbSeq.Add(1))
	db, err := sql.Open("pgx", baseURL+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return baseURL + "/" + name + "?sslmode=disable"
}

// findBin prefers the newest Debian server version, then PATH.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
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
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, postgres) not found under /usr/lib/postgresql/*/bin or on PATH: " +
		"install the `postgresql` apt package (CI does), or set " + SkipEnv + "=1 to skip the tests that need PostgreSQL")
}

func major(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// credential picks an unprivileged user to run the server as when we are
// root: PostgreSQL refuses to run as root.
func credential() (*syscall.Credential, int, int, error) {
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
