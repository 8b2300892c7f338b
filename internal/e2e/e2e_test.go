package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/testutil"
)

// TestTwoNodeTask: both nodes run with correct, distinct runtime variables
// (runtime.md), per-rank logs exist, and the queue says SUCCEEDED.
func TestTwoNodeTask(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	yaml := writeFile(t, "two.yaml", `name: envcheck
num_nodes: 2
run: |
  env -0 > ~/e2e-env
  echo "hello from rank $SKYPILOT_NODE_RANK"
`)
	r := e.must("launch", "-y", "-c", "two", yaml)
	for _, want := range []string{"(head, rank=0", "(worker1, rank=1", "hello from rank 0", "hello from rank 1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("launch output lacks %q:\n%s", want, r.stdout)
		}
	}

	envs := []map[string]string{
		parseEnvFile(t, filepath.Join(e.nodeHome("two", 0), "e2e-env")),
		parseEnvFile(t, filepath.Join(e.nodeHome("two", 1), "e2e-env")),
	}
	headIP := strings.TrimSpace(e.must("status", "two", "--ip").stdout)
	for node, env := range envs {
		if got := env["SKYPILOT_NODE_RANK"]; got != fmt.Sprint(node) {
			t.Errorf("node %d: SKYPILOT_NODE_RANK=%q, want %d (rank follows node order)", node, got, node)
		}
		if got := env["SKYPILOT_NUM_NODES"]; got != "2" {
			t.Errorf("node %d: SKYPILOT_NUM_NODES=%q, want 2", node, got)
		}
		if got := env["HOME"]; got != e.nodeHome("two", node) {
			t.Errorf("node %d: HOME=%q, want its own node home %s", node, got, e.nodeHome("two", node))
		}
		ips := strings.Split(strings.TrimSpace(env["SKYPILOT_NODE_IPS"]), "\n")
		if len(ips) != 2 || ips[0] == ips[1] {
			t.Errorf("node %d: SKYPILOT_NODE_IPS=%q, want two distinct lines", node, env["SKYPILOT_NODE_IPS"])
		}
		if want, _ := e.nodeIPs("two"); strings.Join(ips, ",") != strings.Join(want, ",") {
			t.Errorf("node %d: SKYPILOT_NODE_IPS holds %q, want the nodes' addresses %v", node, ips, want)
		}
		for _, ip := range ips {
			if p := net.ParseIP(ip); p == nil || p.To4() == nil {
				t.Errorf("node %d: SKYPILOT_NODE_IPS holds %q, want IPv4 addresses", node, ip)
			}
		}
		if ips[0] != headIP {
			t.Errorf("node %d: first of SKYPILOT_NODE_IPS is %q, want the head's address %q (sky status --ip)", node, ips[0], headIP)
		}
		if env["SKYPILOT_NODE_IPS"] != envs[0]["SKYPILOT_NODE_IPS"] {
			t.Errorf("SKYPILOT_NODE_IPS differs between nodes: %q vs %q", envs[0]["SKYPILOT_NODE_IPS"], env["SKYPILOT_NODE_IPS"])
		}
		var info map[string]any
		if err := json.Unmarshal([]byte(env["SKYPILOT_CLUSTER_INFO"]), &info); err != nil || info["cluster_name"] != "two" {
			t.Errorf("node %d: SKYPILOT_CLUSTER_INFO=%q, want JSON with cluster_name \"two\" (%v)", node, env["SKYPILOT_CLUSTER_INFO"], err)
		}
		if id := env["SKYPILOT_TASK_ID"]; !strings.HasSuffix(id, "_two_1") || id != envs[0]["SKYPILOT_TASK_ID"] {
			t.Errorf("node %d: SKYPILOT_TASK_ID=%q, want the same sky-<timestamp>_two_1 on every node", node, id)
		}
		if env["SKYPILOT_USER"] == "" {
			t.Errorf("node %d: SKYPILOT_USER is empty", node)
		}
	}
	if envs[0]["HOME"] == envs[1]["HOME"] {
		t.Errorf("both nodes share HOME %s", envs[0]["HOME"])
	}

	// Per-rank logs on the head, named by rank and node (runtime.md).
	for _, name := range []string{"run.log", "tasks/0-head.log", "tasks/1-worker1.log"} {
		matches, _ := filepath.Glob(filepath.Join(e.clusterDir("two"), "node-*", "sky_logs", "*", name))
		if len(matches) != 1 {
			t.Errorf("want one %s under node-*/sky_logs, found %v", name, matches)
			continue
		}
		b, _ := os.ReadFile(matches[0])
		if !strings.Contains(string(b), "hello from rank") {
			t.Errorf("%s holds no task output:\n%s", matches[0], b)
		}
	}

	j := e.queue("two")[1]
	if j.Status != "SUCCEEDED" || j.StartAt == nil || j.EndAt == nil {
		t.Errorf("queue: job 1 = %+v, want SUCCEEDED with start and end times", j)
	}
	if j.Resources != "2x[CPU:0.5]" {
		t.Errorf("queue: resources %q, want 2x[CPU:0.5] (default demand)", j.Resources)
	}
}

// TestRankFailureKillsOthers: rank 1 exits 3 while rank 0 sleeps; rank 0
// is killed (137, with every process it started), the job is FAILED with
// SkyPilot's ERROR line and `sky logs --status` exits 100.
func TestRankFailureKillsOthers(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	marker := fmt.Sprintf("E2E_RANK_MARK=%d", rand.Int64())
	yaml := writeFile(t, "fail.yaml", `num_nodes: 2
envs:
  `+strings.Replace(marker, "=", ": ", 1)+`
run: |
  if [ "$SKYPILOT_NODE_RANK" = 1 ]; then sleep 0.3; exit 3; fi
  sleep 120
`)
	start := time.Now()
	r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "rf", yaml)
	if r.code != 100 {
		t.Errorf("launch of a failing job: exit %d, want 100\n%s", r.code, r)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("launch took %s: rank 0 was not killed when rank 1 failed", d)
	}
	j := e.queue("rf")[1]
	if j.Status != "FAILED" || fmt.Sprint(j.ReturnCodes) != "[137 3]" {
		t.Errorf("job 1 = %+v, want FAILED with return codes [137 3]", j)
	}
	st := e.exec(cmdTimeout, nil, "logs", "rf", "1", "--status")
	if st.code != 100 || !strings.Contains(st.stdout, "Job 1: FAILED") {
		t.Errorf("logs --status: %s\nwant exit 100 and \"Job 1: FAILED\"", st)
	}
	logs := e.exec(cmdTimeout, nil, "logs", "rf", "1", "--no-follow")
	if !strings.Contains(logs.out(), "[137, 3]") {
		t.Errorf("job log does not list the return codes [137, 3]:\n%s", logs)
	}
	if r.stdout != "" && !strings.Contains(r.stdout, "[137, 3]") {
		t.Errorf("launch output does not list the return codes [137, 3]:\n%s", r.stdout)
	}
	if want := "ERROR: \x1b[31mJob 1 failed with return code list:\x1b[0m [137, 3] (A Worker failed with return code 3, SkyPilot cleaned up the processes on other nodes with return code 137)\n"; !strings.Contains(logs.stdout, want) {
		t.Errorf("job log lacks SkyPilot's failure line %q:\n%q", want, logs.stdout)
	}
	if left := procsWithEnv(marker); len(left) > 0 {
		t.Errorf("processes of the failed job survive: %v", left)
	}
}

// TestSetupInEveryJob: as in SkyPilot, setup runs inside each launch's
// job (detached setup), on every node with the SETUP_* variables: again
// on a re-launch of the same YAML; --fast on the unchanged UP cluster and
// --no-setup skip it; a failing setup fails the job (FAILED_SETUP, exit
// 100) without running the run command.
func TestSetupInEveryJob(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	task := func(setup string) string {
		return writeFile(t, "setup.yaml", "num_nodes: 2\nsetup: |\n  "+setup+"\nrun: echo run-$SKYPILOT_NODE_RANK\n")
	}
	count := func(node int) int {
		b, _ := os.ReadFile(filepath.Join(e.nodeHome("su", node), "setup-count"))
		return strings.Count(string(b), "\n")
	}
	v1 := task(`echo SETUP-V1; echo x >> ~/setup-count; env -0 > ~/setup-env`)

	r := e.must("launch", "-y", "-c", "su", v1)
	if !strings.Contains(r.stdout, "(setup pid=") || !strings.Contains(r.stdout, "SETUP-V1") || count(0) != 1 || count(1) != 1 {
		t.Fatalf("first launch: setup should run once per node in the job (counts %d, %d):\n%s", count(0), count(1), r.stdout)
	}
	if !strings.Contains(r.stdout, "Setup detached.") || strings.Index(r.stdout, "SETUP-V1") < strings.Index(r.stdout, "Job started.") {
		t.Errorf("setup output should come in the job's stream, after \"Job started\":\n%s", r.stdout)
	}
	headIP := strings.TrimSpace(e.must("status", "su", "--ip").stdout)
	for node := 0; node < 2; node++ {
		env := parseEnvFile(t, filepath.Join(e.nodeHome("su", node), "setup-env"))
		ips := strings.Split(env["SKYPILOT_SETUP_NODE_IPS"], "\n")
		if env["SKYPILOT_SETUP_NODE_RANK"] != fmt.Sprint(node) || len(ips) != 2 || ips[0] != headIP ||
			env["SKYPILOT_SETUP_NUM_GPUS_PER_NODE"] != "0" || env["SKYPILOT_NUM_NODES"] != "2" {
			t.Errorf("node %d: setup env SKYPILOT_SETUP_NODE_RANK=%q SKYPILOT_SETUP_NODE_IPS=%q SKYPILOT_SETUP_NUM_GPUS_PER_NODE=%q SKYPILOT_NUM_NODES=%q",
				node, env["SKYPILOT_SETUP_NODE_RANK"], env["SKYPILOT_SETUP_NODE_IPS"], env["SKYPILOT_SETUP_NUM_GPUS_PER_NODE"], env["SKYPILOT_NUM_NODES"])
		}
	}
	r = e.must("launch", "-y", "-c", "su", v1)
	if !strings.Contains(r.stdout, "SETUP-V1") || count(0) != 2 || count(1) != 2 {
		t.Errorf("re-launch of the same YAML: setup should run again in the new job (counts %d, %d):\n%s", count(0), count(1), r.stdout)
	}
	r = e.must("launch", "-y", "--fast", "-c", "su", v1)
	if strings.Contains(r.stdout, "SETUP-V1") || strings.Contains(r.stdout, "Launching on") || count(0) != 2 || !strings.Contains(r.stdout, "run-0") {
		t.Errorf("--fast on the unchanged UP cluster: want no provisioning and no setup, but the run (counts %d, %d):\n%s", count(0), count(1), r.stdout)
	}
	r = e.must("launch", "-y", "--no-setup", "-c", "su", v1)
	if strings.Contains(r.stdout, "SETUP-V1") || !strings.Contains(r.stdout, "Setup commands skipped.") || count(0) != 2 || !strings.Contains(r.stdout, "run-1") {
		t.Errorf("--no-setup: want \"Setup commands skipped.\", no setup, the run (counts %d, %d):\n%s", count(0), count(1), r.stdout)
	}
	r = e.must("launch", "-y", "--fast", "-c", "su", task(`echo SETUP-V2; echo x >> ~/setup-count`))
	if !strings.Contains(r.stdout, "SETUP-V2") || count(0) != 3 || count(1) != 3 {
		t.Errorf("--fast with a changed setup: setup should run (counts %d, %d):\n%s", count(0), count(1), r.stdout)
	}

	jobsBefore := len(e.queue("su"))
	bad := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "su", task(`echo BAD-SETUP; exit 7`))
	if bad.code != 100 || !strings.Contains(bad.stdout, "setup failed. Failed workers: (pid=") ||
		!strings.Contains(bad.stdout, "returncode=7)") || !strings.Contains(bad.stdout, "See error logs above for more details.") {
		t.Errorf("failing setup: %s\nwant exit 100 and SkyPilot's \"setup failed. Failed workers: (pid=...\" line", bad)
	}
	if strings.Contains(bad.stdout, "run-0") {
		t.Errorf("the run command ran after a failed setup:\n%s", bad.stdout)
	}
	jobs := e.queue("su")
	if j := jobs[jobsBefore+1]; len(jobs) != jobsBefore+1 || j.Status != "FAILED_SETUP" {
		t.Errorf("failing setup: want one more job, FAILED_SETUP; got %d jobs (had %d), last %+v", len(jobs), jobsBefore, j)
	}
	if st := e.exec(cmdTimeout, nil, "logs", "su", fmt.Sprint(jobsBefore+1), "--status"); st.code != 100 {
		t.Errorf("logs --status of a FAILED_SETUP job: %s\nwant exit 100", st)
	}
}

// TestFiftyJobsTwoCPUs: 50 one-CPU jobs on a 2-CPU node never run more
// than two at a time, all succeed, and start in submission order.
func TestFiftyJobsTwoCPUs(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-c", "fifty", "--cpus", "2", "--", "true")
	const n = 50
	ids := make([]int, 0, n)
	idRe := regexp.MustCompile(`Job submitted, ID: (\d+)`)
	for i := 0; i < n; i++ {
		r := e.must("exec", "-d", "fifty", "--cpus", "1", "--", "sleep 0.2")
		m := idRe.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("exec -d printed no job id:\n%s", r)
		}
		var id int
		fmt.Sscan(m[1], &id)
		ids = append(ids, id)
	}
	last := ids[len(ids)-1]
	e.waitJob("fifty", last, 60*time.Second, "finished", func(j job) bool { return j.EndAt != nil })
	jobs := e.queue("fifty")

	type edge struct {
		at    float64
		delta int
	}
	var edges []edge
	prevStart := 0.0
	for k, id := range ids {
		j := jobs[id]
		if j.Status != "SUCCEEDED" || j.StartAt == nil || j.EndAt == nil {
			t.Errorf("job %d = %+v, want SUCCEEDED with times", id, j)
			continue
		}
		if j.Resources != "1x[CPU:1]" {
			t.Errorf("job %d resources %q, want 1x[CPU:1]", id, j.Resources)
		}
		if k > 0 && *j.StartAt < prevStart {
			t.Errorf("job %d started at %.6f, before job %d (%.6f): not FIFO", id, *j.StartAt, ids[k-1], prevStart)
		}
		prevStart = *j.StartAt
		edges = append(edges, edge{*j.StartAt, +1}, edge{*j.EndAt, -1})
	}
	// Ends sort before starts at the same instant: a slot freed and taken
	// in the same microsecond is not an overlap.
	sort.Slice(edges, func(a, b int) bool {
		if edges[a].at != edges[b].at {
			return edges[a].at < edges[b].at
		}
		return edges[a].delta < edges[b].delta
	})
	running, peak := 0, 0
	for _, ed := range edges {
		running += ed.delta
		peak = max(peak, running)
	}
	if peak > 2 {
		t.Errorf("%d jobs ran at once on 2 CPUs with 1 CPU each (from start_at/end_at)", peak)
	}
	t.Logf("peak concurrency %d of 2 (below 2 means submissions were slower than the jobs)", peak)
}

// TestCancelTwoNodeJob: cancelling a running 2-node job kills its whole
// process tree on both nodes, background children included.
func TestCancelTwoNodeJob(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	marker := fmt.Sprintf("E2E_MARKER=cancel-%d", rand.Int64())
	yaml := writeFile(t, "long.yaml", `num_nodes: 2
run: |
  sleep 300 &
  (sleep 301; echo never) &
  sleep 302
`)
	e.must("launch", "-y", "-d", "-c", "cx", "--env", marker, yaml)
	e.waitJob("cx", 1, 30*time.Second, "RUNNING", func(j job) bool { return j.Status == "RUNNING" })
	// Every rank: bash, three sleeps and a subshell.
	if !waitFor(10*time.Second, func() bool { return len(procsWithEnv(marker)) >= 8 }) {
		t.Fatalf("job processes did not all appear: %v", procsWithEnv(marker))
	}
	e.must("cancel", "cx", "1", "-y")
	var left []proc
	if !waitFor(10*time.Second, func() bool { left = procsWithEnv(marker); return len(left) == 0 }) {
		t.Errorf("processes of the cancelled job survive:\n%v", left)
	}
	if j := e.queue("cx")[1]; j.Status != "CANCELLED" {
		t.Errorf("job 1 = %+v, want CANCELLED", j)
	}
	if st := e.exec(cmdTimeout, nil, "logs", "cx", "1", "--status"); st.code != 103 {
		t.Errorf("logs --status of a cancelled job: %s\nwant exit 103", st)
	}
}

// TestStopStartDown: stop keeps the workdir on the nodes and start brings
// the cluster back with it; down removes the cluster and its directory.
func TestStopStartDown(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "data.txt"), []byte("workdir-content-42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.must("launch", "-y", "-c", "ss", "--workdir", wd, "--", "cat data.txt")
	if !strings.Contains(r.stdout, "workdir-content-42") {
		t.Fatalf("launch with --workdir did not see the file:\n%s", r.stdout)
	}
	e.must("stop", "ss", "-y")
	if c := e.status(false)["ss"]; c.Status != "STOPPED" {
		t.Errorf("after stop: cluster %+v, want STOPPED", c)
	}
	if left := procsWithEnv(e.nodeHome("ss", 0)); len(left) > 0 {
		t.Errorf("processes of a stopped node survive: %v", left)
	}
	if stdout, stderr, code := e.run("exec", "ss", "--", "true"); code == 0 || !strings.Contains(stdout+stderr, "sky start ss") {
		t.Errorf("exec on a STOPPED cluster: exit %d, want non-zero and a hint to `sky start ss`:\n%s%s", code, stdout, stderr)
	}
	e.must("start", "ss", "-y")
	if c := e.status(false)["ss"]; c.Status != "UP" {
		t.Errorf("after start: cluster %+v, want UP", c)
	}
	r = e.must("exec", "ss", "--", "cat data.txt")
	if !strings.Contains(r.stdout, "workdir-content-42") {
		t.Errorf("workdir lost across stop/start:\n%s", r.stdout)
	}
	e.must("down", "ss", "-y")
	if _, err := os.Stat(e.clusterDir("ss")); !os.IsNotExist(err) {
		t.Errorf("down left the cluster directory %s (%v)", e.clusterDir("ss"), err)
	}
	if _, ok := e.status(true)["ss"]; ok {
		t.Errorf("down left the cluster in sky status")
	}
}

// TestAutostop: the setting shows in `sky status -o json`, cancels, and
// fires (-i 0: the agent checks every second, so no minute-long wait);
// the hook set through the head agent runs before the stop and
// `sky logs --hook` shows its output.
func TestAutostop(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-c", "as", "--", "true")
	e.must("autostop", "as", "-i", "5", "--down", "-y")
	if c := e.status(false)["as"]; c.Autostop != 5 || !c.ToDown {
		t.Errorf("after autostop -i 5 --down: %+v, want autostop 5, to_down true", c)
	}
	e.must("autostop", "as", "--cancel", "-y")
	if c := e.status(false)["as"]; c.Autostop != -1 || c.ToDown {
		t.Errorf("after autostop --cancel: %+v, want autostop -1, to_down false", c)
	}

	// The hook is not reachable from the CLI (resources.autostop.hook is a
	// task setting); set it on the head agent directly, as the backend does.
	head := e.nodeHome("as", 0)
	ag := runCmd(t, 20*time.Second, append(append([]string{}, e.env...), "HOME="+head), e.node(),
		"agent", "set-autostop", "--idle-seconds", "1", "--hook", "echo hook-ran-for-$SKYPILOT_HOOK_EVENT")
	if ag.code != 0 {
		t.Fatalf("agent set-autostop: %s", ag)
	}
	if !waitFor(20*time.Second, func() bool { return e.status(true)["as"].Status == "STOPPED" }) {
		b, _ := os.ReadFile(filepath.Join(head, ".sky", "agent", "autostop.log"))
		t.Fatalf("autostop did not stop the idle cluster within 20 s: %+v\nautostop.log:\n%s", e.status(false)["as"], b)
	}
	e.waitCallback(" stop -y as")
	if r := e.must("logs", "as", "--hook"); !strings.Contains(r.stdout, "hook-ran-for-stop") {
		t.Errorf("sky logs --hook does not show the hook's output:\n%s", r)
	}

	// Through the CLI alone: -i 0 --down on a restarted cluster tears it down.
	e.must("start", "as", "-y")
	e.must("autostop", "as", "-i", "0", "--down", "-y")
	if !waitFor(20*time.Second, func() bool { _, ok := e.status(true)["as"]; return !ok }) {
		t.Errorf("autostop -i 0 --down did not tear the idle cluster down within 20 s: %+v", e.status(false)["as"])
	}
	e.waitCallback(" down -y as")
}

// TestAutostopFromYAML: resources.autostop in the task (resources.md
// §autostop) is applied at launch like `-i N --down`.
func TestAutostopFromYAML(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	yaml := writeFile(t, "as.yaml", "resources:\n  autostop:\n    idle_minutes: 7\n    down: true\nrun: echo hi\n")
	e.must("launch", "-y", "-c", "ay", yaml)
	if c := e.status(false)["ay"]; c.Autostop != 7 || !c.ToDown {
		t.Errorf("after launching with resources.autostop {idle_minutes: 7, down: true}: %+v, want autostop 7, to_down true", c)
	}
}

// TestAgentKilledMidJob: kill -9 of the head agent while a 2-node job
// runs. Nothing may hang; `sky status -r` tells the truth (INIT with a
// reason), and `sky start` repairs the cluster, marking the job
// FAILED_DRIVER and leaving none of its processes.
func TestAgentKilledMidJob(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	marker := fmt.Sprintf("E2E_MARKER=killagent-%d", rand.Int64())
	e.must("launch", "-y", "-d", "-c", "ka", "--num-nodes", "2", "--env", marker, "--", "sleep 300")
	e.waitJob("ka", 1, 30*time.Second, "RUNNING", func(j job) bool { return j.Status == "RUNNING" })

	pidFile := filepath.Join(e.nodeHome("ka", 0), ".sky", "agent", "daemon.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("head agent pid file: %v", err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || len(procsWithEnvPid(pid, e.home)) == 0 {
		t.Fatalf("head agent pid %q from %s is not a live process of this test", b, pidFile)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(5*time.Second, func() bool { return len(procsWithEnvPid(pid, e.home)) == 0 })

	c := e.status(true)["ka"]
	// The queue must answer (or fail) promptly; a dead agent must not hang it.
	var j job
	if q := e.exec(30*time.Second, nil, "queue", "ka", "-o", "json"); q.code == 0 {
		var out map[string][]job
		if err := json.Unmarshal([]byte(q.stdout), &out); err == nil && len(out["ka"]) > 0 {
			j = out["ka"][0]
		}
	}
	truthful := (c.Status == "INIT" && c.LaunchStatusReason != nil && strings.Contains(*c.LaunchStatusReason, "agent")) ||
		j.Status == "FAILED_DRIVER"
	if !truthful {
		t.Errorf("after kill -9 of the head agent: cluster %+v, job %+v; want INIT with a reason naming the agent, or the job FAILED_DRIVER", c, j)
	}
	e.exec(30*time.Second, nil, "status") // the table must not hang either

	e.must("start", "ka", "-y")
	if c := e.status(true)["ka"]; c.Status != "UP" {
		t.Errorf("after start: cluster %+v, want UP", c)
	}
	j = e.queue("ka")[1]
	if j.Status != "FAILED_DRIVER" || j.FailureReason == "" {
		t.Errorf("job 1 after the agent restarted: %+v, want FAILED_DRIVER with a reason", j)
	}
	if st := e.exec(cmdTimeout, nil, "logs", "ka", "1", "--status"); st.code != 100 {
		t.Errorf("logs --status of a FAILED_DRIVER job: %s\nwant exit 100", st)
	}
	var left []proc
	if !waitFor(10*time.Second, func() bool { left = procsWithEnv(marker); return len(left) == 0 }) {
		t.Errorf("processes of the orphaned job survive the agent restart: %v", left)
	}
	// The cluster works again.
	if r := e.must("exec", "ka", "--", "echo alive-again"); !strings.Contains(r.stdout, "alive-again") {
		t.Errorf("exec after repair:\n%s", r)
	}
}

// TestInlineAndJSON: an inline command runs; `sky status -o json` and
// `sky queue -o json` carry the fields of cli-output.md.
func TestInlineAndJSON(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	before := time.Now().Unix()
	r := e.must("launch", "-y", "-c", "x", "--", "echo hi")
	after := time.Now().Unix()
	if !regexp.MustCompile(`(?m)\)(\x1b\[0m)? hi$`).MatchString(r.stdout) {
		t.Errorf("inline `echo hi` output not shown:\n%s", r.stdout)
	}

	var recs []map[string]any
	e.mustJSON(&recs, "status", "-o", "json")
	if len(recs) != 1 {
		t.Fatalf("status -o json: %d records, want 1: %v", len(recs), recs)
	}
	rec := recs[0]
	for _, f := range []string{"name", "launched_at", "last_use", "status", "autostop", "to_down", "owner", "metadata",
		"cluster_hash", "cluster_ever_up", "status_updated_at", "user_hash", "user_name", "config_hash", "workspace",
		"last_creation_yaml", "last_creation_command", "is_managed", "last_event", "launch_status_reason",
		"resources_str", "resources_str_full", "nodes", "cloud", "region", "cpus", "memory", "accelerators", "labels",
		"cluster_name_on_cloud", "node_names", "priority", "priority_class", "links"} {
		if _, ok := rec[f]; !ok {
			t.Errorf("status -o json lacks field %q", f)
		}
	}
	checks := []struct {
		field string
		ok    func(any) bool
		want  string
	}{
		{"name", func(v any) bool { return v == "x" }, `"x"`},
		{"status", func(v any) bool { return v == "UP" }, `"UP"`},
		{"nodes", func(v any) bool { return v == 1.0 }, "1"},
		{"autostop", func(v any) bool { return v == -1.0 }, "-1"},
		{"to_down", func(v any) bool { return v == false }, "false"},
		{"cluster_ever_up", func(v any) bool { return v == true }, "true"},
		{"is_managed", func(v any) bool { return v == false }, "false"},
		{"workspace", func(v any) bool { return v == "default" }, `"default"`},
		{"launched_at", func(v any) bool {
			f, ok := v.(float64)
			return ok && f == float64(int64(f)) && int64(f) >= before && int64(f) <= after
		}, fmt.Sprintf("an integer epoch in [%d, %d]", before, after)},
		{"user_name", nonEmptyString, "a non-empty string"},
		{"user_hash", nonEmptyString, "a non-empty string"},
		{"cluster_hash", nonEmptyString, "a non-empty string"},
		{"resources_str", func(v any) bool { s, _ := v.(string); return strings.HasPrefix(s, "1x(") }, `"1x(...)"`},
		{"last_creation_command", func(v any) bool { s, _ := v.(string); return strings.Contains(s, "echo hi") }, "the launch command"},
	}
	for _, c := range checks {
		if v := rec[c.field]; !c.ok(v) {
			t.Errorf("status -o json: %s = %#v, want %s", c.field, v, c.want)
		}
	}

	var q map[string][]map[string]any
	e.mustJSON(&q, "queue", "x", "-o", "json")
	if len(q["x"]) != 1 {
		t.Fatalf("queue -o json: %v, want one job on x", q)
	}
	jobRec := q["x"][0]
	for _, f := range []string{"job_id", "job_name", "username", "user_hash", "submitted_at", "start_at", "end_at", "resources", "status", "log_path", "metadata"} {
		if _, ok := jobRec[f]; !ok {
			t.Errorf("queue -o json lacks field %q", f)
		}
	}
	if jobRec["job_id"] != 1.0 || jobRec["status"] != "SUCCEEDED" || jobRec["resources"] != "1x[CPU:0.5]" {
		t.Errorf("queue -o json job: %v, want job_id 1, SUCCEEDED, 1x[CPU:0.5]", jobRec)
	}
}

func nonEmptyString(v any) bool { s, ok := v.(string); return ok && s != "" }

// fakeCloudHome writes a fake AWS credentials file and a fake kubeconfig
// into the env's HOME: `sky check` must enable both without network.
func fakeCloudHome(t testing.TB, e *skyEnv) {
	t.Helper()
	files := map[string]string{
		".aws/credentials": "[default]\naws_access_key_id = AKIAE2EFAKE\naws_secret_access_key = e2e-fake-secret-do-not-print\n",
		".kube/config": `apiVersion: v1
kind: Config
current-context: e2e
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: e2e
  context:
    cluster: e2e
    user: e2e
users:
- name: e2e
  user:
    token: e2e-fake-token
`,
	}
	for rel, body := range files {
		p := filepath.Join(e.home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckFakeCredentials: with a fake ~/.aws/credentials and a fake
// ~/.kube/config, `sky check -o json` enables AWS (no network: pricing
// still works) but not Kubernetes, whose only context's API server (a
// closed port) does not answer, as SkyPilot leaves unreachable contexts
// out; `sky check -v` says so, and nothing prints a secret.
func TestCheckFakeCredentials(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	fakeCloudHome(t, e)
	r := e.must("check", "-o", "json")
	var out map[string]map[string][]string
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("check -o json is not {workspace: {infra: [capabilities]}}: %v\n%s", err, r.stdout)
	}
	ws, ok := out["default"]
	if !ok || len(out) != 1 {
		t.Errorf("check -o json: workspaces %v, want exactly \"default\" (cli-output.md)", keys(out))
		for _, v := range out {
			ws = v
		}
	}
	if caps := ws["AWS"]; !contains(caps, "compute") {
		t.Errorf("AWS not enabled for compute: %v", ws)
	}
	if caps, ok := ws["Kubernetes"]; ok {
		t.Errorf("Kubernetes enabled (%v) though its only context does not answer", caps)
	}
	v := e.must("check", "kubernetes", "-v")
	if !strings.Contains(v.out(), "e2e: unreachable") {
		t.Errorf("sky check kubernetes -v does not say the context is unreachable:\n%s", v)
	}
	txt := e.must("check", "-v").out() + r.out() + v.out()
	for _, s := range []string{"e2e-fake-secret-do-not-print", "e2e-fake-token"} {
		if strings.Contains(txt, s) {
			t.Errorf("sky check printed a credential (%s)", s)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// requiredVars lists the envs and secrets a corpus YAML leaves null: the
// user must supply them (--env/--secret) or loading fails by design.
func requiredVars(t testing.TB, path string) (envs, secrets []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break // io.EOF, or a document the CLI will report itself
		}
		for key, dst := range map[string]*[]string{"envs": &envs, "secrets": &secrets} {
			m, _ := doc[key].(map[string]any)
			for k, v := range m {
				if v == nil && !contains(*dst, k) {
					*dst = append(*dst, k)
				}
			}
		}
	}
	sort.Strings(envs)
	sort.Strings(secrets)
	return envs, secrets
}

// dryrunAll runs `sky launch --dryrun` on every file: each either chooses
// a candidate (exit 0 with a ✔ row) or fails with an explaining error,
// never a panic and never a silent empty result. Several infras are
// enabled (fake AWS and Kubernetes credentials, plus local). It returns
// the files that chose a candidate.
func dryrunAll(t *testing.T, e *skyEnv, files []string) (chosen map[string]bool) {
	t.Helper()
	fakeCloudHome(t, e)
	e.must("check")
	chosen = map[string]bool{}
	explained := 0
	for _, f := range files {
		args := []string{"launch", "--dryrun", "-y", f}
		envs, secrets := requiredVars(t, f)
		for _, k := range envs {
			args = append(args, "--env", k+"=x")
		}
		for _, k := range secrets {
			args = append(args, "--secret", k+"=x")
		}
		r := e.exec(30*time.Second, nil, args...)
		name := filepath.Base(f)
		out := r.out()
		switch {
		case strings.Contains(out, "goroutine ") || strings.Contains(out, "panic:"):
			t.Errorf("%s: the CLI or server panicked:\n%s", name, r)
		case r.code == 0:
			if !strings.Contains(r.stdout, "CHOSEN") || !strings.Contains(r.stdout, "✔") {
				t.Errorf("%s: exit 0 without a chosen row in the plan:\n%s", name, r)
			}
			chosen[name] = true
		case r.code < 0:
			// runCmd already reported the hang.
		default:
			if !explains(out) {
				t.Errorf("%s: exit %d without an explaining error:\n%s", name, r.code, r)
			}
			explained++
		}
	}
	t.Logf("%d YAMLs: %d chose a candidate, %d were refused with an explanation", len(files), len(chosen), explained)
	return chosen
}

// TestDryrunExamples: `sky launch --dryrun` over the project's example
// tasks, on the test catalog.
func TestDryrunExamples(t *testing.T) {
	parallel(t)
	files, err := filepath.Glob(testutil.Testdata("tasks", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example YAMLs (%v)", err)
	}
	chosen := dryrunAll(t, newEnv(t), files)
	// AWS is enabled and the test catalog sells these there (H100:8 as
	// p5.48xlarge, also the second choice of the ordered list; L4 as g6).
	for _, f := range []string{"task-gpus-alias.yaml", "task-ordered.yaml", "task-needs-env.yaml"} {
		if !chosen[f] {
			t.Errorf("%s: no candidate chosen", f)
		}
	}
	// GCP is not enabled: a TPU has nowhere to go.
	if chosen["task-tpu.yaml"] {
		t.Errorf("task-tpu.yaml: a candidate was chosen with GCP disabled")
	}
}

// TestSkyPilotCorpusDryrun is the e2e part of the corpus compatibility
// suite: the dry run over every SkyPilot YAML of the shared corpus, on the
// full shared catalog. It is skipped, with one line, without ../shared.
func TestSkyPilotCorpusDryrun(t *testing.T) {
	parallel(t)
	shared := testutil.Shared(t)
	files, err := filepath.Glob(filepath.Join(shared, "corpus", "yamls", "*.y*ml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus YAMLs in %s (%v)", shared, err)
	}
	e := newEnv(t)
	for i, kv := range e.env {
		if strings.HasPrefix(kv, "SKYPILOT_CATALOG_DIR=") {
			e.env[i] = "SKYPILOT_CATALOG_DIR=" + filepath.Join(shared, "catalog", "v8")
		}
	}
	if chosen := dryrunAll(t, e, files); len(chosen) == 0 {
		t.Errorf("no corpus YAML chose a candidate")
	}
}

// explains accepts an error that says what is wrong: the optimizer's list
// of infras considered, a pointer to `sky jobs launch` for multi-task
// files, or any "Error: " line with a message of some substance.
func explains(stderr string) bool {
	if strings.Contains(stderr, "Infras considered:") || strings.Contains(stderr, "sky jobs launch") {
		return true
	}
	for _, line := range strings.Split(stderr, "\n") {
		if msg, ok := strings.CutPrefix(line, "Error: "); ok && len(strings.Fields(msg)) >= 4 {
			return true
		}
	}
	return false
}

// waitCallback waits for the `sky stop|down` that a firing autostop runs
// (detached, through the API server) to exit: the cluster's state changes
// before that CLI process ends, and stopping the server under it would
// make it start a new one.
func (e *skyEnv) waitCallback(cmdSuffix string) {
	e.t.Helper()
	var left []proc
	ok := waitFor(30*time.Second, func() bool {
		left = left[:0]
		for _, p := range procsWithEnv(e.home) {
			if strings.HasSuffix(p.cmdline, cmdSuffix) {
				left = append(left, p)
			}
		}
		return len(left) == 0
	})
	if !ok {
		e.t.Errorf("the autostop callback is still running after 30 s: %v", left)
	}
}
