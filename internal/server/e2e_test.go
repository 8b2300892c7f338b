package server_test

// Acceptance tests: they drive the built sky binary with a private HOME
// and a free port, start real servers as child processes and stop them by
// PID.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/server"
	"github.com/skygo/skygo/internal/testutil"
)

type env struct {
	t    testing.TB
	bin  string
	home string
	port int
	vars []string // extra KEY=VALUE for every child
}

func newEnv(t testing.TB, vars ...string) *env {
	t.Helper()
	e := &env{t: t, bin: testutil.SkyBinary(t), home: t.TempDir(), port: testutil.FreePort(t), vars: vars}
	t.Cleanup(e.killPIDFileServer)
	return e
}

func (e *env) url() string { return "http://127.0.0.1:" + strconv.Itoa(e.port) }

func (e *env) environ(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "SKYPILOT_API_SERVER_ENDPOINT", "SKYPILOT_API_SERVER_LOCAL_PORT", "SKYPILOT_DB_CONNECTION_URI",
			"ENABLE_BASIC_AUTH", "ENABLE_SERVICE_ACCOUNTS", "SKYPILOT_INITIAL_BASIC_AUTH", "SKYPILOT_SERVICE_ACCOUNT_TOKEN":
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "HOME="+e.home, "SKYPILOT_API_SERVER_LOCAL_PORT="+strconv.Itoa(e.port))
	out = append(out, e.vars...)
	return append(out, extra...)
}

// sky runs the CLI and returns stdout, stderr and the exit code.
func (e *env) sky(extraEnv []string, args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(e.bin, args...)
	cmd.Env = e.environ(extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run sky %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func (e *env) mustSky(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.sky(nil, args...)
	if code != 0 {
		e.t.Fatalf("sky %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// startServer runs `sky api start --foreground` as our child and waits
// until it answers; it is stopped by PID at cleanup. The env's port was
// free when it was picked, but another test process running beside this
// one may take it before the server binds (a restart after a kill leaves
// it free for a moment): then the env moves to a new free port.
func (e *env) startServer(args ...string) *exec.Cmd {
	e.t.Helper()
	for attempt := 1; ; attempt++ {
		cmd, taken := e.tryStartServer(args...)
		if !taken {
			return cmd
		}
		if attempt == 3 {
			e.t.Fatalf("port %d was taken by another process three times in a row", e.port)
		}
		e.port = testutil.FreePort(e.t)
	}
}

// tryStartServer is one start of startServer; taken says the server
// exited because its port was in use.
func (e *env) tryStartServer(args ...string) (_ *exec.Cmd, taken bool) {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"api", "start", "--foreground"}, args...)...)
	cmd.Env = e.environ()
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Exited first: a server that took the port meanwhile would
		// answer the health check in our server's place.
		select {
		case <-done:
			if strings.Contains(logs.String(), "the port is already in use") {
				return nil, true
			}
			e.t.Fatalf("server exited at start: %s", logs.String())
		default:
		}
		resp, err := http.Get(e.url() + "/api/health")
		if err == nil {
			resp.Body.Close()
			return cmd, false
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("server did not answer within 20s: %s", logs.String())
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// killPIDFileServer stops a server the CLI started in the background, by
// the PID it recorded.
func (e *env) killPIDFileServer() {
	b, err := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "server.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	testutil.WaitFor(5*time.Second, 50*time.Millisecond, func() bool { return !alive(pid) })
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// alive is true for a live, non-zombie process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func (e *env) client(t testing.TB, endpoint, token string) *client.Client {
	t.Helper()
	if endpoint == "" {
		endpoint = e.url()
	}
	c, err := client.New(client.Options{Endpoint: endpoint, Token: token, Home: e.home})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var sleepPID = regexp.MustCompile(`\(pid (\d+)\)`)

// childPID waits for the debug.sleep request's log to name its child.
func (e *env) childPID(t testing.TB, id string) int {
	t.Helper()
	path := filepath.Join(paths.ServerDir(e.home), "request_logs", id+".log")
	pid := 0
	if testutil.WaitFor(5*time.Second, 25*time.Millisecond, func() bool {
		b, _ := os.ReadFile(path)
		if m := sleepPID.FindSubmatch(b); m != nil {
			pid, _ = strconv.Atoi(string(m[1]))
		}
		return pid != 0
	}) {
		return pid
	}
	t.Fatalf("request %s never logged its child pid", id)
	return 0
}

func statusOf(t testing.TB, c *client.Client, id string) api.Request {
	t.Helper()
	rs, err := c.Status(context.Background(), client.StatusOptions{IDs: []string{id}})
	if err != nil || len(rs) != 1 {
		t.Fatalf("status of %s: %v %v", id, rs, err)
	}
	return rs[0]
}

func TestE2ERequestLifecycle(t *testing.T) {
	e := newEnv(t)
	e.startServer()
	id := strings.TrimSpace(e.mustSky("api", "debug-sleep", "0.2", "-d"))
	if len(id) != 36 {
		t.Fatalf("debug-sleep -d printed %q, want a request id", id)
	}
	// Streaming follows the request to its end and shows its log.
	logs := e.mustSky("api", "logs", id[:8])
	if !strings.Contains(logs, "sleeping for 0.2s") || !strings.Contains(logs, "done sleeping") {
		t.Fatalf("streamed log:\n%s", logs)
	}
	c := e.client(t, "", "")
	var result struct {
		Slept float64 `json:"slept_seconds"`
	}
	if err := c.Wait(context.Background(), id, &result); err != nil || result.Slept != 0.2 {
		t.Fatalf("Wait = %+v, %v", result, err)
	}
	var recs []api.Request
	if err := json.Unmarshal([]byte(e.mustSky("api", "status", "-a", "-o", "json")), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].RequestID != id || recs[0].Status != "SUCCEEDED" || recs[0].Name != "sky.debug.sleep" ||
		recs[0].ScheduleType != "long" || recs[0].ReturnValue != `{"slept_seconds":0.2}` || recs[0].FinishedAt == nil {
		t.Fatalf("status -a -o json = %+v", recs)
	}
	// Without -a, finished requests are hidden.
	if out := e.mustSky("api", "status"); !strings.Contains(out, "\n-   -     -     -        -\n") {
		t.Fatalf("status without -a:\n%s", out)
	}
	table := e.mustSky("api", "status", "-a")
	for _, want := range []string{"ID", "User", "Name", "Created", "Status", id, "SUCCEEDED"} {
		if !strings.Contains(table, want) {
			t.Errorf("status table lacks %q:\n%s", want, table)
		}
	}
	// A failing request: the CLI exits non-zero with the op's message.
	_, errOut, code := e.sky(nil, "api", "debug-sleep", "-1")
	if code != 2 || !strings.Contains(errOut, "SECONDS") {
		t.Fatalf("negative seconds: exit %d, %s", code, errOut)
	}
	_, err := c.Get(context.Background(), "no-such-request")
	var ae *client.APIError
	if !asAPIError(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("unknown id: %v", err)
	}
}

func asAPIError(err error, target **client.APIError) bool {
	ae, ok := err.(*client.APIError)
	if ok {
		*target = ae
	}
	return ok
}

func TestE2ECancelKillsChild(t *testing.T) {
	e := newEnv(t)
	e.startServer()
	id := strings.TrimSpace(e.mustSky("api", "debug-sleep", "60", "-d"))
	pid := e.childPID(t, id)
	if !alive(pid) {
		t.Fatalf("child sleep %d not running", pid)
	}
	out := e.mustSky("api", "cancel", id[:10])
	if !strings.Contains(out, "Cancelled 1 request: "+id) {
		t.Fatalf("cancel said: %s", out)
	}
	// The server answers cancel only after the op returned, so the child
	// must already be gone.
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("child sleep %d survived the cancel", pid)
	}
	c := e.client(t, "", "")
	if st := statusOf(t, c, id).Status; st != "CANCELLED" {
		t.Fatalf("status after cancel = %s", st)
	}
	err := c.Wait(context.Background(), id, nil)
	if re, ok := err.(*client.RequestError); !ok || re.Status != "CANCELLED" {
		t.Fatalf("Wait on a cancelled request = %v", err)
	}
	if out := e.mustSky("api", "cancel", id); !strings.Contains(out, "No requests to cancel") {
		t.Fatalf("second cancel: %s", out)
	}
}

func TestE2EServerKilledMidRequest(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer()
	id := strings.TrimSpace(e.mustSky("api", "debug-sleep", "60", "-d"))
	pid := e.childPID(t, id)
	// The sleep is in its own process group and survives SIGKILL of the
	// server; clean it up by its PID.
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(2*time.Second, 20*time.Millisecond, func() bool { return !alive(srv.Process.Pid) })
	e.startServer()
	c := e.client(t, "", "")
	r := statusOf(t, c, id)
	if r.Status != "FAILED" || !strings.Contains(r.Error, "restarted") {
		t.Fatalf("request after a server crash: status %s error %s", r.Status, r.Error)
	}
	err := c.Wait(context.Background(), id, nil)
	if re, ok := err.(*client.RequestError); !ok || re.Type != "ServerRestarted" {
		t.Fatalf("Wait = %#v", err)
	}
}

func TestE2EAuth(t *testing.T) {
	e := newEnv(t, "ENABLE_BASIC_AUTH=true", "ENABLE_SERVICE_ACCOUNTS=true", "SKYPILOT_INITIAL_BASIC_AUTH=admin:adminpw")
	e.startServer()
	ctx := context.Background()
	userURL := func(user, pw string) string { return fmt.Sprintf("http://%s:%s@127.0.0.1:%d", user, pw, e.port) }
	admin := e.client(t, userURL("admin", "adminpw"), "")

	for _, tc := range []struct {
		name, auth string
		wantCode   int
	}{
		{"no credentials", "", 401},
		{"wrong token", "Bearer sky_not-a-real-token", 401},
		{"token without prefix", "Bearer abc", 401},
		{"wrong password", "Basic " + b64("admin:nope"), 401},
		{"unknown user", "Basic " + b64("ghost:adminpw"), 401},
		{"admin", "Basic " + b64("admin:adminpw"), 200},
	} {
		req, _ := http.NewRequest("GET", e.url()+"/api/status", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.wantCode {
			t.Errorf("%s: HTTP %d, want %d", tc.name, resp.StatusCode, tc.wantCode)
		}
	}
	// Health: probes without a version header see "healthy"; clients
	// without credentials learn they need auth.
	resp, _ := http.Get(e.url() + "/api/health")
	var h map[string]any
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h["status"] != "healthy" {
		t.Fatalf("probe health = %v", h)
	}
	if hh, err := e.client(t, "", "").Health(ctx); err != nil || hh.Status != "needs_auth" {
		t.Fatalf("client health without credentials = %+v, %v", hh, err)
	}

	for _, u := range []string{"alice", "bob"} {
		if err := admin.Do(ctx, "POST", "/users/create", map[string]string{"username": u, "password": u + "pw"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob := e.client(t, userURL("alice", "alicepw"), ""), e.client(t, userURL("bob", "bobpw"), "")
	if err := bob.Do(ctx, "POST", "/users/create", map[string]string{"username": "eve", "password": "x"}, nil); !isStatus(err, 403) {
		t.Fatalf("non-admin created a user: %v", err)
	}
	aID, err := client.Submit(ctx, alice, apiop.DebugSleep, api.DebugSleepBody{Seconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	pid := e.childPID(t, aID)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })

	// Bob cannot see or cancel Alice's request, by CLI or API.
	out, _, code := e.sky([]string{"SKYPILOT_API_SERVER_ENDPOINT=" + userURL("bob", "bobpw")}, "api", "status", "-a", "-u")
	if code != 0 || strings.Contains(out, aID) {
		t.Fatalf("bob's status shows alice's request (exit %d):\n%s", code, out)
	}
	if rs, _ := bob.Status(ctx, client.StatusOptions{AllStatus: true, AllUsers: true}); len(rs) != 0 {
		t.Fatalf("bob lists %d requests", len(rs))
	}
	// 404, as /api/get says: another user's id is not there for bob.
	if _, err := bob.Cancel(ctx, []string{aID}, false); !isStatus(err, 404) {
		t.Fatalf("bob cancelled alice's request: %v", err)
	}
	if ids, err := bob.Cancel(ctx, nil, true); err != nil || len(ids) != 0 {
		t.Fatalf("bob --all-users cancelled %v, %v", ids, err)
	}
	if _, err := bob.Get(ctx, aID); !isStatus(err, 404) {
		t.Fatalf("bob waited on alice's request: %v", err)
	}
	if st := statusOf(t, alice, aID).Status; st != "RUNNING" {
		t.Fatalf("alice's request is %s after bob's attempts", st)
	}
	// The server's ~/sky_logs is nobody's request: by path, only the
	// admin reads it.
	logDir := filepath.Join(e.home, "sky_logs", "sky-2026-01-01-00-00-00-000000")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "run.log"), []byte("not for bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	byPath := func(user, pw string) (int, string) {
		req, _ := http.NewRequest("GET", e.url()+"/api/stream?follow=false&log_path=~/sky_logs/sky-2026-01-01-00-00-00-000000/run.log", nil)
		req.SetBasicAuth(user, pw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := byPath("bob", "bobpw"); code != 403 || strings.Contains(body, "not for bob") {
		t.Errorf("bob streamed a server log file by path: HTTP %d %q", code, body)
	}
	if code, body := byPath("admin", "adminpw"); code != 200 || body != "not for bob\n" {
		t.Errorf("admin streaming a server log file by path: HTTP %d %q", code, body)
	}

	// Files a request left for its client are its owner's.
	filesDir := filepath.Join(server.PathsFor(e.home).RequestFiles, aID, "sky-1")
	if err := os.MkdirAll(filesDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filesDir, "run.log"), []byte("alice's log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := bob.Download(ctx, aID, "sky-1/run.log", &got); err == nil || strings.Contains(got.String(), "alice") {
		t.Errorf("bob downloaded alice's request file: %v %q", err, got.String())
	}
	got.Reset()
	if err := alice.Download(ctx, aID, "sky-1/run.log", &got); err != nil || got.String() != "alice's log\n" {
		t.Errorf("alice's own request file: %v %q", err, got.String())
	}
	if err := alice.Download(ctx, aID, "../../server.pid", &got); !isStatus(err, 404) {
		t.Errorf("a path out of the request's files: %v", err)
	}

	// The admin sees everyone's requests and can cancel them.
	rs, err := admin.Status(ctx, client.StatusOptions{AllUsers: true})
	if err != nil || len(rs) != 1 || rs[0].RequestID != aID || rs[0].UserName != "alice" {
		t.Fatalf("admin status = %+v, %v", rs, err)
	}

	// Service-account tokens: created by the admin, shown once.
	var tok struct {
		Token  string `json:"token"`
		UserID string `json:"service_account_user_id"`
	}
	if err := admin.Do(ctx, "POST", "/users/service-account-tokens", map[string]any{"token_name": "ci", "role": "admin"}, &tok); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Token, "sky_") || !strings.HasPrefix(tok.UserID, "sa-") {
		t.Fatalf("token = %+v", tok)
	}
	// `sky api login` stores it (0600) and later commands use it.
	out = e.mustSky("api", "login", "-e", e.url(), "--token", tok.Token)
	if !strings.Contains(out, "Logged into") {
		t.Fatalf("login: %s", out)
	}
	if st, err := os.Stat(client.LoginPath(e.home)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("login file after login: %v %v", st, err)
	}
	out = e.mustSky("api", "cancel", aID)
	if !strings.Contains(out, "Cancelled 1 request") || alive(pid) {
		t.Fatalf("token admin cancel: %s (child alive: %v)", out, alive(pid))
	}
	e.mustSky("api", "logout")
	if _, _, code := e.sky(nil, "api", "status"); code == 0 {
		t.Fatal("status without credentials after logout succeeded")
	}
}

func b64(s string) string {
	return base64Encode([]byte(s))
}

func isStatus(err error, code int) bool {
	ae, ok := err.(*client.APIError)
	return ok && ae.Status == code
}

func TestE2ERefusesPublicWithoutAuth(t *testing.T) {
	e := newEnv(t)
	_, errOut, code := e.sky(nil, "api", "start", "--foreground", "--host", "0.0.0.0")
	if code == 0 || !strings.Contains(errOut, "without authentication") {
		t.Fatalf("public bind without auth: exit %d, %s", code, errOut)
	}
	// A port that is taken makes the server fail cleanly.
	e.startServer()
	_, errOut, code = e.sky(nil, "api", "start", "--foreground")
	if code == 0 || !strings.Contains(errOut, "already in use") {
		t.Fatalf("second server on the same port: exit %d, %s", code, errOut)
	}
}

func TestE2EAutoStartOnce(t *testing.T) {
	e := newEnv(t)
	if out, _, code := e.sky(nil, "api", "status"); code != 0 || !strings.Contains(out, "not running") {
		t.Fatalf("status with no server: exit %d, %s", code, out)
	}
	var wg sync.WaitGroup
	errs := make([]string, 3)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out, errOut, code := e.sky(nil, "api", "debug-sleep", "0")
			if code != 0 || !strings.Contains(out, "done sleeping") {
				errs[i] = fmt.Sprintf("exit %d\n%s\n%s", code, out, errOut)
			}
		}(i)
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Fatalf("concurrent first calls: %s", e)
		}
	}
	logb, _ := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "server.log"))
	if n := strings.Count(string(logb), `"msg":"API server listening"`); n != 1 {
		t.Fatalf("%d servers started, want 1; server.log:\n%s", n, logb)
	}
	out := e.mustSky("api", "stop")
	if !strings.Contains(out, "stopped") {
		t.Fatalf("stop: %s", out)
	}
	if out, _, code := e.sky(nil, "api", "status"); code != 0 || !strings.Contains(out, "not running") {
		t.Fatalf("status after stop: exit %d, %s", code, out)
	}
}
