package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/upload"
)

// remoteClient is a client installation of its own (HOME, no server)
// that reaches the server of srv by endpoint, as after `sky api login -e
// URL` of a server on another machine.
func remoteClient(t *testing.T, srv *skyEnv) *skyEnv {
	t.Helper()
	home, err := os.MkdirTemp("", "skycli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	c := *srv
	c.home = home
	c.env = nil
	for _, kv := range srv.env {
		if !strings.HasPrefix(kv, "HOME=") {
			c.env = append(c.env, kv)
		}
	}
	c.env = append(c.env, "HOME="+home, fmt.Sprintf("%s=http://127.0.0.1:%d", client.EnvEndpoint, srv.port), "SKYPILOT_DEBUG=1")
	return &c
}

// metric reads one counter of the server's /metrics.
func metric(t *testing.T, port int, name string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// TestRemoteServerSeesUploadedFiles: a server with another HOME and
// working directory than its client runs a task whose workdir and local
// file mounts exist only as the client names them: the client uploads
// them (ignore rules applied, modes and symlinks kept), a second launch
// with one changed file sends only that file, an upload over the
// server's limit fails saying which file to leave out, and a task naming
// local paths it did not upload is refused.
func TestRemoteServerSeesUploadedFiles(t *testing.T) {
	parallel(t)
	srv := newEnv(t)
	srv.dir = t.TempDir()
	srv.env = append(srv.env, "SKYGO_UPLOAD_LIMIT=256KiB")
	startForegroundServer(t, srv, srv.port)
	cli := remoteClient(t, srv)

	proj := t.TempDir()
	wd := filepath.Join(proj, "wd")
	data := filepath.Join(proj, "data")
	for name, body := range map[string]string{
		"wd/a.txt":        "first-version\n",
		"wd/sub/tool.sh":  "#!/bin/sh\necho tool-ran\n",
		"wd/x.log":        "must-not-travel\n",
		"wd/keep.log":     "kept-by-negation\n",
		"wd/.gitignore":   "*.log\n!keep.log\nbuild/\n",
		"wd/build/out.o":  "built\n",
		"data/m.txt":      "mounted-dir-file\n",
		"single-file.txt": "mounted-single-file\n",
	} {
		p := filepath.Join(proj, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(wd, "sub", "tool.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(wd, "link")); err != nil {
		t.Fatal(err)
	}
	yaml := filepath.Join(proj, "task.yaml")
	task := fmt.Sprintf(`workdir: %s
file_mounts:
  ~/mnt/data: %s
  ~/mnt/one.txt: %s
run: |
  cat a.txt keep.log ~/mnt/data/m.txt ~/mnt/one.txt
  ./sub/tool.sh
  echo "link=$(readlink link) mode=$(stat -c %%a sub/tool.sh)"
  ls x.log build 2>/dev/null || echo ignored-files-absent
`, wd, data, filepath.Join(proj, "single-file.txt"))
	if err := os.WriteFile(yaml, []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.exec(cmdTimeout, nil, "down", "-y", "up") })

	r := cli.exec(cmdTimeout, nil, "launch", "-y", "-c", "up", yaml)
	if r.code != 0 {
		t.Fatalf("%s\n%s", r, srv.serverLogTail())
	}
	for _, want := range []string{"first-version", "kept-by-negation", "mounted-dir-file", "mounted-single-file", "tool-ran",
		"link=a.txt mode=755", "ignored-files-absent",
		// The log names the client's paths, not the server's copies.
		"Syncing workdir (to 1 node): " + wd + " -> ~/sky_workdir"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("first launch: output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "must-not-travel") {
		t.Errorf("an ignored file reached the node:\n%s", r.stdout)
	}
	// 6 files travel: a.txt, tool.sh, keep.log, .gitignore, m.txt,
	// one.txt (and the link, which is not a file).
	if !strings.Contains(r.stderr, "Uploaded 6 files") || !strings.Contains(r.stderr, ": 6 sent") {
		t.Errorf("first launch: want 6 files uploaded, all sent:\n%s", r.stderr)
	}
	if _, err := os.Stat(paths.Uploads(srv.home)); err != nil {
		t.Errorf("the server's HOME has no upload store: %v", err)
	}
	if _, err := os.Stat(paths.Uploads(cli.home)); err == nil {
		t.Errorf("the client's HOME got an upload store")
	}
	before := metric(t, srv.port, "skygo_upload_blobs_received_total")

	// One file changed: only it travels.
	if err := os.WriteFile(filepath.Join(wd, "a.txt"), []byte("second-version\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli.exec(cmdTimeout, nil, "launch", "-y", "-c", "up", yaml)
	if r.code != 0 || !strings.Contains(r.stdout, "second-version") {
		t.Fatalf("second launch: %s\n%s", r, srv.serverLogTail())
	}
	if got := metric(t, srv.port, "skygo_upload_blobs_received_total") - before; got != 1 {
		t.Errorf("second launch with one changed file: the server received %v blobs, want 1", got)
	}
	if !strings.Contains(r.stderr, ": 1 sent") || !strings.Contains(r.stderr, "5 unchanged; 1 hashed") {
		t.Errorf("second launch: want 1 sent, 5 unchanged, only the changed file hashed:\n%s", r.stderr)
	}

	// exec uploads the workdir too.
	if err := os.WriteFile(filepath.Join(wd, "a.txt"), []byte("exec-version\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cli.exec(cmdTimeout, nil, "exec", "up", "--workdir", wd, "--", "cat a.txt"); r.code != 0 || !strings.Contains(r.stdout, "exec-version") {
		t.Errorf("exec with a workdir: %s", r)
	}

	// Too large: the error names the file and says what to do.
	big := filepath.Join(wd, "big.bin")
	if err := os.WriteFile(big, make([]byte, 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli.exec(cmdTimeout, nil, "launch", "-y", "-c", "up", yaml)
	if r.code == 0 || !strings.Contains(r.stderr, big) || !strings.Contains(r.stderr, "limit of 256.0 KiB") || !strings.Contains(r.stderr, ".skyignore") {
		t.Errorf("an upload over the limit: want a failure naming %s, the limit and .skyignore:\n%s", big, r)
	}
	// .skyignore takes precedence over .gitignore: now x.log travels and big.bin does not.
	if err := os.WriteFile(filepath.Join(wd, ".skyignore"), []byte("big.bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli.exec(cmdTimeout, nil, "launch", "-y", "-c", "up", yaml)
	if r.code != 0 || !strings.Contains(r.stdout, "x.log") || strings.Contains(r.stdout, "ignored-files-absent") {
		t.Errorf("with a .skyignore, .gitignore no longer applies (x.log travels): %s", r)
	}

	// The server never reads a path a client names without uploading it.
	c, err := client.New(client.Options{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", srv.port), Home: cli.home})
	if err != nil {
		t.Fatal(err)
	}
	body := api.LaunchBody{ClusterName: "up", Task: api.TaskSpec{NumNodes: 1, Run: "true", Workdir: srv.home}}
	_, err = client.Call(context.Background(), c, apiop.Launch, body)
	if err == nil || !strings.Contains(err.Error(), "did not upload") {
		t.Errorf("a launch naming a server path without an upload: %v, want a refusal", err)
	}
}

// TestUploadsArePerUser: with basic auth, bob cannot launch a task from
// alice's upload by naming its id; alice can.
func TestUploadsArePerUser(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	// The env's own cleanup then runs without auth, on a server of its own.
	srv := *e
	srv.dir = t.TempDir()
	// alice launches on the local infrastructure, which the admin allows
	// users here.
	srv.env = append(append([]string{}, e.env...), "ENABLE_BASIC_AUTH=true", "SKYPILOT_INITIAL_BASIC_AUTH=admin:adminpw", "SKYGO_LOCAL_FOR_USERS=1")
	startForegroundServer(t, &srv, e.port)
	as := func(user string) *client.Client {
		c, err := client.New(client.Options{Endpoint: fmt.Sprintf("http://%s:%spw@127.0.0.1:%d", user, user, srv.port), Home: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	for _, u := range []string{"alice", "bob"} {
		if err := as("admin").Do(ctx, http.MethodPost, "/users/create", map[string]string{"username": u, "password": u + "pw"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "private.txt"), []byte("alice-private\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := api.TaskSpec{NumNodes: 1, Workdir: wd, Run: "cat private.txt"}
	rep, err := as("alice").Upload(ctx, upload.Roots(spec, true))
	if err != nil {
		t.Fatal(err)
	}
	spec.UploadID = rep.ID
	body := api.LaunchBody{ClusterName: "bobs", Task: spec}
	t.Cleanup(func() {
		if _, err := client.Call(ctx, as("alice"), apiop.Down, api.ClustersBody{ClusterNames: []string{"alices"}}); err != nil {
			t.Errorf("down alices: %v", err)
		}
	})
	if _, err := client.Call(ctx, as("bob"), apiop.Launch, body); err == nil || !strings.Contains(err.Error(), "upload not found") {
		t.Errorf("bob launched from alice's upload: %v", err)
	}
	body.ClusterName = "alices"
	if res, err := client.Call(ctx, as("alice"), apiop.Launch, body); err != nil || res.Status != "SUCCEEDED" {
		t.Errorf("alice's launch from her upload: %+v %v\n%s", res, err, srv.serverLogTail())
	}
}
