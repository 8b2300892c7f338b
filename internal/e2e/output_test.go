package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/paths"
)

// The output an agent parses, in SkyPilot's formats (issue 11, point 6).

// TestAPIStatusOutput: with no server, `sky api status` says so and exits
// 0 (table: header and a dash row; json: []); with one, an empty list is
// still a header and a dash row, and a list the limit cut ends with the
// "Showing N requests" line.
func TestAPIStatusOutput(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	r := e.must("api", "status")
	wantLines(t, r, "SkyPilot API server is not running.", "ID  User  Name  Created  Status", "-   -     -     -        -")
	if r := e.must("api", "status", "-o", "json"); r.stdout != "[]\n" {
		t.Errorf("api status -o json without a server: stdout %q, want []", r.stdout)
	}
	e.must("status") // starts the server
	r = e.must("api", "status")
	wantLines(t, r, "ID  User  Name  Created  Status", "-   -     -     -        -")
	if strings.Contains(r.stdout, "Showing") {
		t.Errorf("no limit was reached, yet:\n%s", r)
	}
	// Without its managed-jobs, services and pools sections, whose
	// jobs.queue, serve.status and jobs.pool_status requests would be the
	// latest.
	e.must("status", "--no-show-managed-jobs", "--no-show-services", "--no-show-pools")
	r = e.must("api", "status", "-a", "-l", "1")
	if !strings.HasSuffix(r.stdout, "\nShowing 1 requests. Use \"-l none\" or \"-l all\" to show all requests.\n") || !strings.Contains(r.stdout, "sky.status") {
		t.Errorf("api status -a -l 1: want one row and the Showing footer:\n%s", r)
	}
	if r := e.must("api", "status", "-a", "-l", "all", "-v"); strings.Contains(r.stdout, "Showing") || !strings.HasPrefix(r.stdout, "ID") || !strings.Contains(strings.Split(r.stdout, "\n")[0], "Cluster") {
		t.Errorf("api status -a -l all -v: want every row, the Cluster column and no footer:\n%s", r)
	}
	var recs []map[string]any
	e.mustJSON(&recs, "api", "status", "-a", "-o", "json")
	if len(recs) < 2 || recs[0]["name"] == nil || recs[0]["request_id"] == nil {
		t.Errorf("api status -a -o json: %v", recs)
	}
	if r := e.exec(cmdTimeout, nil, "api", "status", "-l", "many"); r.code != 2 {
		t.Errorf("api status -l many: want a usage error\n%s", r)
	}
}

// wantLines fails unless the lines appear in stdout in this order, each
// whole.
func wantLines(t *testing.T, r result, lines ...string) {
	t.Helper()
	got := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	i := 0
	for _, l := range got {
		if i < len(lines) && l == lines[i] {
			i++
		}
	}
	if i < len(lines) {
		t.Errorf("want the lines %q in order; missing %q\n%s", lines, lines[i], r)
	}
}

// TestConnectionErrorSaidOnce: an unreachable server is named in one
// sentence, whatever the command; `sky api info` answers with SkyPilot's
// hints and exit 0.
func TestConnectionErrorSaidOnce(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	down := []string{"SKYPILOT_API_SERVER_ENDPOINT=http://127.0.0.1:1"}
	for _, args := range [][]string{{"status"}, {"queue"}, {"cost-report"}, {"logs", "c"}, {"api", "status"}} {
		r := e.exec(cmdTimeout, down, args...)
		if r.code != 1 || strings.Count(r.out(), "ould not connect") != 1 || strings.Contains(r.out(), "dial tcp") ||
			!strings.Contains(r.stderr, "Could not connect to SkyPilot API server at http://127.0.0.1:1 (connection refused).") {
			t.Errorf("want one sentence naming the server and the cause:\n%s", r)
		}
	}
	r := e.exec(cmdTimeout, down, "api", "info")
	wantLines(t, r, "Could not connect to SkyPilot API server at http://127.0.0.1:1",
		"├── To re-login to the API server: sky api login --relogin -e http://127.0.0.1:1",
		"└── To logout the server: sky api logout")
	if r.code != 0 || strings.Count(r.out(), "ould not connect") != 1 {
		t.Errorf("api info of an unreachable server:\n%s", r)
	}
	r = e.must("api", "info")
	wantLines(t, r, "No SkyPilot API server is connected", "├── To connect to an existing API server: sky api login", "└── To start a local API server: sky api start")
}

// TestAPILoginFlags: against a server that needs a service-account token,
// -t/--token and --service-account-token log in, a repeated login keeps
// the stored token, --relogin drops it, and --no-browser reads a pasted
// token.
func TestAPILoginFlags(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	srv := *e
	srv.env = append(append([]string{}, e.env...), "ENABLE_SERVICE_ACCOUNTS=true")
	startForegroundServer(t, &srv, e.port)
	raw, err := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "admin_token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	url := fmt.Sprintf("http://127.0.0.1:%d", e.port)
	t.Cleanup(func() { e.exec(cmdTimeout, nil, "api", "logout") })

	if r := e.exec(cmdTimeout, nil, "api", "login", "-e", url); r.code != 1 || !strings.Contains(r.stderr, "needs credentials") {
		t.Errorf("login without a token to a token server:\n%s", r)
	}
	if r := e.exec(cmdTimeout, nil, "api", "login", "-e", url, "-t", "nope"); r.code != 2 {
		t.Errorf("login with a malformed token: want a usage error\n%s", r)
	}
	r := e.must("api", "login", "-e", url, "-t", token)
	if !strings.HasPrefix(r.stdout, "Logged into SkyPilot API server at: "+url) {
		t.Errorf("login -t:\n%s", r)
	}
	if r := e.must("api", "info"); !strings.Contains(r.stdout, "Status: healthy") ||
		!strings.HasSuffix(r.stdout, "└── Endpoint set via "+filepath.Join(e.home, ".sky", "skygo", "login.yaml")+"\n") {
		t.Errorf("api info after login:\n%s", r)
	}
	e.must("api", "login", "-e", url) // the stored token is reused
	e.must("api", "login")            // and so is the stored endpoint
	if r := e.exec(cmdTimeout, nil, "api", "login", "--relogin", "-e", url); r.code != 1 || !strings.Contains(r.stderr, "needs credentials") {
		t.Errorf("--relogin must not reuse the stored token:\n%s", r)
	}
	r = runCmdStdin(t, cmdTimeout, e.env, token+"\n", e.bin, "api", "login", "--relogin", "--no-browser", "-e", url)
	if r.code != 0 || !strings.Contains(r.stdout, "Paste the token (sky_...): ") || !strings.Contains(r.stdout, "Logged into SkyPilot API server at: "+url) {
		t.Errorf("--no-browser with a pasted token:\n%s", r)
	}
	if strings.Contains(r.out(), token) {
		t.Errorf("the pasted token was printed:\n%s", r)
	}
	if r := runCmdStdin(t, cmdTimeout, e.env, "", e.bin, "api", "login", "--relogin", "--no-browser", "-e", url); r.code != 1 || !strings.Contains(r.stderr, "Aborted!") {
		t.Errorf("--no-browser with nothing pasted:\n%s", r)
	}
	e.must("api", "login", "--relogin", "--service-account-token", token, "-e", url)
	e.must("status")
}

// TestQueueGitCommit: a job whose workdir is --git-url/--git-ref records
// the commit the ref resolved to, in the table and in -o json.
func TestQueueGitCommit(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	e := newEnv(t)
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "f.txt"), []byte("tagged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f.txt")
	git("commit", "-qm", "one")
	git("tag", "v1")
	want := git("rev-parse", "v1^{commit}")
	if err := os.WriteFile(filepath.Join(repo, "f.txt"), []byte("later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-qam", "two")

	r := e.must("launch", "-y", "-c", "g", "--git-url", "file://"+repo, "--git-ref", "v1", "--", "cat f.txt")
	if !strings.Contains(r.stdout, "tagged") {
		t.Fatalf("the job did not run in the tagged checkout:\n%s", r)
	}
	var q map[string][]struct {
		Metadata map[string]any `json:"metadata"`
	}
	e.mustJSON(&q, "queue", "g", "-o", "json")
	if len(q["g"]) != 1 || q["g"][0].Metadata["git_commit"] != want {
		t.Errorf("queue -o json: metadata.git_commit, want %s: %+v", want, q)
	}
	table := e.must("queue", "g").stdout
	lines := strings.Split(table, "\n")
	if len(lines) < 3 || !strings.HasSuffix(lines[1], "GIT COMMIT") || !strings.HasSuffix(lines[2], want) {
		t.Errorf("queue table: want a GIT COMMIT column holding %s:\n%s", want, table)
	}
	e.must("exec", "g", "--", "true")
	if table := e.must("queue", "g").stdout; !strings.Contains(table, "  -\n") {
		t.Errorf("a job without a git workdir shows - as its commit:\n%s", table)
	}
}

// TestCostReportFields: every field of cli-output.md is in each row, for
// a live cluster and a torn-down one alike.
func TestCostReportFields(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-c", "live", "--cpus", "1", "--", "true")
	e.must("launch", "-y", "-c", "gone", "--", "true")
	e.must("down", "-y", "gone")
	var rows []map[string]any
	e.mustJSON(&rows, "cost-report", "-o", "json")
	fields := []string{"name", "launched_at", "duration", "num_nodes", "resources", "cluster_hash", "usage_intervals",
		"total_cost", "cloud", "region", "cpus", "memory", "accelerators", "resources_str", "resources_str_full",
		"status", "user_hash", "user_name", "workspace", "last_event", "node_names", "priority", "priority_class"}
	byName := map[string]map[string]any{}
	for _, row := range rows {
		for _, f := range fields {
			if _, ok := row[f]; !ok {
				t.Errorf("cost-report row %v has no %q", row["name"], f)
			}
		}
		byName[row["name"].(string)] = row
	}
	live, gone := byName["live"], byName["gone"]
	if live == nil || gone == nil {
		t.Fatalf("cost-report rows: %v", rows)
	}
	if live["status"] != "UP" || gone["status"] != "TERMINATED" {
		t.Errorf("statuses: live %v, gone %v", live["status"], gone["status"])
	}
	for _, row := range []map[string]any{live, gone} {
		if row["cloud"] != "Local" || !strings.HasPrefix(fmt.Sprint(row["resources_str"]), "1x(cpus=") || row["cpus"] == nil || row["memory"] == nil {
			t.Errorf("%v: want cloud, cpus, memory and resources_str described: %v", row["name"], row)
		}
	}
	if live["cpus"] != "1" {
		t.Errorf("live cpus %v, want 1 (asked --cpus 1)", live["cpus"])
	}
	if res, _ := gone["resources"].(map[string]any); res["infra"] != "local" {
		t.Errorf("gone resources: want what was launched, got %v", gone["resources"])
	}
	table := e.must("cost-report").stdout
	if !strings.HasPrefix(table, "NAME  ") || !strings.Contains(strings.Split(table, "\n")[0], "RESOURCES") || !strings.Contains(table, "TERMINATED") {
		t.Errorf("cost-report table:\n%s", table)
	}
}

// TestLogsSyncDownProvisionHook: --sync-down writes the job's logs from
// every node to ~/sky_logs/<run_timestamp> and prints SkyPilot's line;
// --provision shows the launch's provisioning; --hook EVENT parses with or
// without "=".
func TestLogsSyncDownProvisionHook(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-c", "m", "--num-nodes", "2", "--", "echo rank-$SKYPILOT_NODE_RANK-said-hi")
	var q map[string][]struct {
		LogPath string `json:"log_path"`
	}
	e.mustJSON(&q, "queue", "m", "-o", "json")
	if len(q["m"]) != 1 {
		t.Fatalf("queue: %v", q)
	}
	r := e.must("logs", "--sync-down", "m")
	m := regexp.MustCompile("^\x1b\\[36mJob 1 logs: (.*)\x1b\\[0m\n$").FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("logs --sync-down: want SkyPilot's line:\n%s", r)
	}
	if want := filepath.Join(e.home, "sky_logs", filepath.Base(q["m"][0].LogPath)); m[1] != want {
		t.Errorf("logs went to %s, want %s", m[1], want)
	}
	run, err := os.ReadFile(filepath.Join(m[1], "run.log"))
	if err != nil || !strings.Contains(string(run), "rank-0-said-hi") || !strings.Contains(string(run), "rank-1-said-hi") {
		t.Errorf("run.log (%v):\n%s", err, run)
	}
	if w, err := os.ReadFile(filepath.Join(m[1], "tasks", "1-worker1.log")); err != nil || !strings.Contains(string(w), "rank-1-said-hi") {
		t.Errorf("the worker's own log (%v): %q", err, w)
	}
	// The files travel beside the request, not in its record: the
	// recorded result names them and holds none of their bytes.
	var reqs []struct {
		Name        string `json:"name"`
		ReturnValue string `json:"return_value"`
	}
	e.mustJSON(&reqs, "api", "status", "-a", "-l", "all", "-o", "json")
	found := false
	for _, rq := range reqs {
		if rq.Name != "sky.download_logs" {
			continue
		}
		found = true
		var res struct {
			Jobs []struct {
				Files []string `json:"files"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(rq.ReturnValue), &res); err != nil || len(res.Jobs) != 1 || !slices.Contains(res.Jobs[0].Files, "run.log") || len(rq.ReturnValue) > 512 {
			t.Errorf("download_logs record: want the file names only, got %q (%v)", rq.ReturnValue, err)
		}
	}
	if !found {
		t.Errorf("no sky.download_logs request in the records")
	}
	if r := e.exec(cmdTimeout, nil, "logs", "-s", "m", "1", "7"); r.code != 1 || !strings.Contains(r.stderr, "Job 7 not found") {
		t.Errorf("sync-down of a missing job:\n%s", r)
	}

	r = e.must("logs", "--provision", "m")
	if !strings.Contains(r.stdout, "Instances are up.") || !strings.Contains(r.stdout, "Cluster launched: m.") || strings.Contains(r.stdout, "said-hi") {
		t.Errorf("logs --provision: want the provisioning lines, not the job's:\n%s", r)
	}
	if r := e.exec(cmdTimeout, nil, "logs", "--provision", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, "no provision log of cluster 'nosuch'") {
		t.Errorf("logs --provision of an unknown cluster:\n%s", r)
	}

	for _, args := range [][]string{{"logs", "--hook", "stop", "m"}, {"logs", "m", "--hook", "stop"}, {"logs", "--hook=stop", "m"}, {"logs", "--autostop", "m"}} {
		if r := e.must(args...); !strings.Contains(r.stdout, "No stop hook log on this cluster yet.") {
			t.Errorf("sky %v:\n%s", args, r)
		}
	}
	if r := e.must("logs", "--hook", "m"); !strings.Contains(r.stdout, "No hook log on this cluster yet.") {
		t.Errorf("--hook without an event:\n%s", r)
	}
	if r := e.exec(cmdTimeout, nil, "logs", "--hook=bogus", "m"); r.code != 2 || !strings.Contains(r.stderr, "choose one of stop, preemption, down") {
		t.Errorf("--hook=bogus:\n%s", r)
	}
}

// TestInfraLocalAndTaskNameInYAML: `infra: local` is accepted in a YAML
// as --infra local is, and `sky validate` refuses a task name SkyPilot
// refuses.
func TestInfraLocalAndTaskNameInYAML(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	for _, res := range []string{"infra: local", "cloud: local"} {
		y := writeFile(t, "task.yaml", "name: my-task_1\nresources:\n  "+res+"\nrun: echo hi\n")
		if r := e.must("validate", y); !strings.Contains(r.stdout, "my-task_1: local") {
			t.Errorf("validate %s:\n%s", res, r)
		}
		if r := e.must("launch", "--dryrun", "-y", y); !strings.Contains(r.stdout, "Dryrun finished.") {
			t.Errorf("launch --dryrun %s:\n%s", res, r)
		}
	}
	for _, name := range []string{"bad name", "-lead", "trail-", "a...b"} {
		y := writeFile(t, "task.yaml", fmt.Sprintf("name: %q\nrun: echo hi\n", name))
		if r := e.exec(cmdTimeout, nil, "validate", y); r.code != 1 || !strings.Contains(r.stderr, "invalid task name") || !strings.Contains(r.stderr, "task.yaml:1:") {
			t.Errorf("validate of task name %q: want the name refused at its line\n%s", name, r)
		}
	}
}

// TestLocalUpDown: the help says what the commands do, and they do it:
// down removes the local clusters and disables the infra, up enables it;
// SkyPilot's kind and remote flags are refused with what to do instead.
func TestLocalUpDown(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	if r := e.must("local", "up", "--help"); !strings.Contains(r.stdout, "Enable SkyGo's embedded local infrastructure") || strings.Contains(r.stdout, "kind)") {
		t.Errorf("local up --help:\n%s", r)
	}
	e.must("launch", "-y", "-c", "l1", "--", "true")
	e.must("local", "down")
	if st := e.status(false); len(st) != 0 {
		t.Errorf("local down left clusters: %v", st)
	}
	if r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "l2", "--infra", "local", "--", "true"); r.code == 0 {
		t.Errorf("launch on the disabled local infra succeeded:\n%s", r)
	}
	e.must("local", "up")
	e.must("launch", "-y", "-c", "l2", "--infra", "local", "--", "true")
	for _, args := range [][]string{{"--ips", "x"}, {"--name", "k"}, {"--port-start", "30000"}, {"--no-gpus"}} {
		if r := e.exec(cmdTimeout, nil, append([]string{"local", "up"}, args...)...); r.code != 2 {
			t.Errorf("local up %v: want a usage error\n%s", args, r)
		}
	}
	if r := e.exec(cmdTimeout, nil, "local", "up", "--ips", "x"); !strings.Contains(r.stderr, "sky ssh up") {
		t.Errorf("local up --ips: want the SSH node pool hint\n%s", r)
	}
}
