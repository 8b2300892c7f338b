package e2e

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/skygo/skygo/internal/paths"
)

// skyPilotHome lays out what an existing SkyPilot user has in ~/.sky: its
// state.db (SkyPilot's tables, one cluster), its API server directory and
// a config.yaml. It returns the config's allowed_clouds effect to check.
func skyPilotHome(t *testing.T, home string) {
	t.Helper()
	sky := filepath.Join(home, ".sky")
	if err := os.MkdirAll(filepath.Join(sky, "api_server", "request_logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(sky, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)`,
		`INSERT INTO alembic_version VALUES ('007')`,
		`CREATE TABLE clusters (name TEXT PRIMARY KEY, launched_at INTEGER, handle BLOB, last_use TEXT,
			status TEXT, autostop INTEGER DEFAULT -1, to_down INTEGER DEFAULT 0, metadata TEXT DEFAULT '{}',
			owner TEXT DEFAULT null, cluster_hash TEXT DEFAULT null, storage_mounts_metadata BLOB DEFAULT null,
			cluster_ever_up INTEGER DEFAULT 0, status_updated_at INTEGER DEFAULT null, config_hash TEXT DEFAULT null,
			user_hash TEXT DEFAULT null, workspace TEXT DEFAULT 'default', is_managed INTEGER DEFAULT 0)`,
		`INSERT INTO clusters (name, launched_at, status, last_use) VALUES ('sp-dev', 1700000000, 'UP', 'sky launch -c sp-dev')`,
		`CREATE TABLE cluster_history (cluster_hash TEXT PRIMARY KEY, name TEXT, num_nodes INTEGER, requested_resources BLOB,
			launched_resources BLOB, usage_intervals BLOB, user_hash TEXT)`,
		`CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT)`,
		`CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db.Close()
	for name, body := range map[string]string{
		"config.yaml":               "allowed_clouds:\n  - local\n  - kubernetes\n",
		"api_server/server.log":     "INFO: Uvicorn running on http://127.0.0.1:46580\n",
		"api_server/requests.db":    "not really a database, but SkyPilot's file\n",
		"api_server/request_logs/x": "a request log\n",
	} {
		if err := os.WriteFile(filepath.Join(sky, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hashTree maps every file under dir, except SkyGo's own directory, to a
// hash of its contents and mode.
func hashTree(t *testing.T, dir, skip string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		if d.IsDir() {
			out[p] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		sum := sha256.Sum256(b)
		out[p] = fmt.Sprintf("%s %v", hex.EncodeToString(sum[:]), fi.Mode())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBesideSkyPilot: with a SkyPilot user's ~/.sky in place, launch,
// status and down work, its config.yaml is honoured, its files stay
// byte-identical, and status tells once about SkyPilot's clusters.
func TestBesideSkyPilot(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	skyPilotHome(t, e.home)
	skyDir := filepath.Join(e.home, ".sky")
	before := hashTree(t, skyDir, paths.Root(e.home))

	r := e.must("status")
	if !strings.Contains(r.stderr, "sp-dev") || !strings.Contains(r.stderr, "SkyPilot") {
		t.Errorf("status does not mention SkyPilot's cluster sp-dev:\n%s", r)
	}
	if strings.Contains(r.stdout, "sp-dev") {
		t.Errorf("SkyPilot's cluster is listed as a SkyGo cluster:\n%s", r)
	}
	if r := e.must("status"); strings.Contains(r.stderr, "sp-dev") {
		t.Errorf("the note about SkyPilot's clusters is repeated:\n%s", r)
	}

	// allowed_clouds from SkyPilot's config.yaml applies.
	r = e.must("check")
	if !strings.Contains(r.out(), "not in allowed_clouds") {
		t.Errorf("sky check ignores config.yaml's allowed_clouds:\n%s", r)
	}

	yaml := writeFile(t, "t.yaml", "run: echo beside-skypilot\n")
	r = e.must("launch", "-y", "-c", "sg", yaml)
	if !strings.Contains(r.out(), "beside-skypilot") {
		t.Errorf("launch output lacks the job's line:\n%s", r)
	}
	var st []map[string]any
	e.mustJSON(&st, "status", "-o", "json")
	if len(st) != 1 || st[0]["name"] != "sg" {
		t.Errorf("status -o json = %v, want only SkyGo's cluster sg", st)
	}
	e.must("down", "-y", "sg")
	e.must("api", "stop")

	after := hashTree(t, skyDir, paths.Root(e.home))
	for p, h := range before {
		if after[p] != h {
			t.Errorf("SkyPilot's %s changed (%s -> %s)", p, h, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("SkyGo created %s outside %s", p, paths.Root(e.home))
		}
	}
	if _, err := os.Stat(paths.StateDB(e.home)); err != nil {
		t.Errorf("SkyGo's own database: %v", err)
	}
}

// TestSkyPilotServerOnPort: a SkyPilot API server answering on the local
// port gets no requests from SkyGo; the user gets one line saying what to
// do, and no SkyGo server is started over it.
func TestSkyPilotServerOnPort(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", e.port))
	if err != nil {
		t.Fatal(err)
	}
	// `sky status` asks for its sections at once, so calls come in
	// concurrently.
	var mu sync.Mutex
	var calls []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Server", "uvicorn")
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/health" {
			fmt.Fprint(w, `{"status":"healthy","api_version":"21","version":"0.10.5","version_on_disk":"0.10.5","commit":"abc","basic_auth_enabled":false,"user":{"name":"u","id":"1234"}}`)
			return
		}
		w.Header().Set("X-Skypilot-Request-ID", "00000000-0000-0000-0000-000000000000")
		fmt.Fprint(w, `null`)
	})}
	go srv.Serve(ln) //nolint:errcheck
	defer srv.Close()

	for _, args := range [][]string{{"status"}, {"launch", "-y", "-c", "x", "--", "echo hi"}} {
		r := e.exec(cmdTimeout, nil, args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 1 || len(lines) != 1 || !strings.Contains(r.stderr, "SkyPilot API server is running") ||
			!strings.Contains(r.stderr, "SKYPILOT_API_SERVER_LOCAL_PORT=") {
			t.Errorf("want exit 1 and one line naming SkyPilot's server and what to do:\n%s", r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range calls {
		if c != "GET /api/health" {
			t.Errorf("SkyGo sent SkyPilot's server %s", c)
		}
	}
	if _, err := os.Stat(filepath.Join(paths.ServerDir(e.home), "server.pid")); err == nil {
		t.Errorf("a SkyGo server was started although the port is taken")
	}
}
