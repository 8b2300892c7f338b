package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil"
)

// cluster is a real local cluster with agents started through the sky
// binary, as the backend will do it.
type cluster struct {
	t       testing.TB
	sky     string
	prov    *local.Provisioner
	info    *provision.ClusterInfo
	runners []provision.CommandRunner
	cfgs    []agentapi.Config
}

func newCluster(t testing.TB, nodes int, cpus float64) *cluster {
	t.Helper()
	sky := testutil.NodeBinary(t, runtime.GOARCH)
	home := testutil.TempHome(t)
	prov, err := local.New(filepath.Join(home, ".sky", "local"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := prov.Provision(ctx, provision.ClusterSpec{Name: "c1", NumNodes: nodes, Resources: provision.Resources{CPUs: cpus}})
	if err != nil {
		t.Fatal(err)
	}
	// Terminate kills every process carrying the nodes' markers: agents,
	// ranks, anything they left behind.
	t.Cleanup(func() {
		if err := prov.Terminate(context.Background(), "c1"); err != nil {
			t.Errorf("terminate: %v", err)
		}
	})
	runners, _ := prov.Runners(info)
	c := &cluster{t: t, sky: sky, prov: prov, info: info, runners: runners}
	for i := range info.Nodes {
		cfg := agentapi.ConfigFromCluster(info, i, "local")
		for j := range cfg.Nodes {
			cfg.Nodes[j].Sky = sky
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	c.startAgents()
	return c
}

func (c *cluster) startAgents() {
	c.t.Helper()
	for i, cfg := range c.cfgs {
		b, _ := json.Marshal(cfg)
		out, code := c.agent(i, string(b), "start", "--json")
		if code != 0 {
			c.t.Fatalf("agent start on node %d: %d %s", i, code, out)
		}
	}
}

// agent runs `sky agent args...` on node i and returns stdout and the code.
func (c *cluster) agent(i int, stdin string, args ...string) (string, int) {
	c.t.Helper()
	cmd := provision.Join(append([]string{c.sky, "agent"}, args...)...)
	opts := provision.RunOptions{}
	if stdin != "" {
		opts.Stdin = strings.NewReader(stdin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.runners[i].Run(ctx, cmd, opts)
	if err != nil {
		c.t.Fatalf("sky agent %v: %v", args, err)
	}
	if len(res.Stderr) > 0 && res.ExitCode != 0 {
		c.t.Logf("sky agent %v stderr: %s", args, res.Stderr)
	}
	return string(res.Stdout), res.ExitCode
}

func (c *cluster) submit(spec agentapi.JobSpec) int {
	c.t.Helper()
	b, _ := json.Marshal(spec)
	out, code := c.agent(0, string(b), "submit", "--json")
	var res struct {
		JobID int    `json:"job_id"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.JobID == 0 {
		c.t.Fatalf("submit: code %d out %q", code, out)
	}
	return res.JobID
}

func (c *cluster) status(ids ...int) agentapi.StatusReport {
	c.t.Helper()
	args := []string{"status", "--json"}
	for _, id := range ids {
		args = append(args, strconv.Itoa(id))
	}
	out, code := c.agent(0, "", args...)
	var rep agentapi.StatusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		c.t.Fatalf("status: %d %q", code, out)
	}
	return rep
}

func (c *cluster) job(id int) agentapi.Job {
	c.t.Helper()
	rep := c.status(id)
	if len(rep.Jobs) != 1 {
		c.t.Fatalf("job %d not in status: %+v", id, rep)
	}
	return rep.Jobs[0]
}

// waitFor polls job id until cond holds.
func (c *cluster) waitFor(id int, what string, cond func(agentapi.Job) bool) agentapi.Job {
	c.t.Helper()
	var j agentapi.Job
	if !testutil.WaitFor(60*time.Second, 20*time.Millisecond, func() bool { j = c.job(id); return cond(j) }) {
		c.t.Fatalf("job %d never became %s; last: %+v", id, what, j)
	}
	return j
}

func (c *cluster) waitTerminal(id int) agentapi.Job {
	return c.waitFor(id, "terminal", func(j agentapi.Job) bool { return j.Status.Terminal() })
}

func (c *cluster) home(i int) string { return c.info.Nodes[i].Home }

// rankProcs lists live processes of one rank (by its environment tag).
func (c *cluster) rankProcs(job, rank, node int) []int {
	return proc.ProcsWithEnv(fmt.Sprintf("SKYGO_RANK_TAG=%s:%d:%d", c.home(node), job, rank))
}

func TestTwoNodeJobGetsRankEnvAndLogs(t *testing.T) {
	c := newCluster(t, 2, 2)
	if err := os.MkdirAll(filepath.Join(c.home(1), "sky_workdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := c.submit(agentapi.JobSpec{
		Name:     "envjob",
		NumNodes: 2,
		Setup:    `echo "setup rank=$SKYPILOT_SETUP_NODE_RANK cuda=${CUDA_VISIBLE_DEVICES-unset}"`,
		Run: `echo "rank=$SKYPILOT_NODE_RANK n=$SKYPILOT_NUM_NODES home=$HOME cwd=$PWD user=$SKYPILOT_USER greet=$GREETING secret=$TOKEN"
echo "ips=$(echo "$SKYPILOT_NODE_IPS" | paste -sd,)"
echo "task=$SKYPILOT_TASK_ID"
echo "info=$SKYPILOT_CLUSTER_INFO"`,
		Envs:    map[string]string{"GREETING": "hi there"},
		Secrets: map[string]string{"TOKEN": "s3cret"},
		User:    "alice",
	})
	j := c.waitTerminal(id)
	if j.Status != agentapi.StatusSucceeded {
		run, _ := os.ReadFile(filepath.Join(j.LogPath, "run.log"))
		t.Fatalf("job = %+v\nrun.log:\n%s", j, run)
	}
	if j.Resources != "2x[CPU:0.5]" || len(j.ReturnCodes) != 2 || j.StartAt == nil || j.EndAt == nil {
		t.Errorf("job record = %+v", j)
	}
	ip0, ip1 := c.info.Nodes[0].InternalIP, c.info.Nodes[1].InternalIP
	if ip0 == ip1 || !(strings.HasPrefix(ip0, "127.0.0.") || c.info.Nodes[0].NetNS != "") {
		t.Fatalf("node IPs %s %s", ip0, ip1)
	}
	for rank, name := range []string{"0-head.log", "1-worker1.log"} {
		b, err := os.ReadFile(filepath.Join(j.LogPath, "tasks", name))
		if err != nil {
			t.Fatalf("per-rank log: %v", err)
		}
		got := string(b)
		cwd := c.home(rank)
		if rank == 1 {
			cwd = filepath.Join(c.home(1), "sky_workdir")
		}
		// The job had its secret: only the value itself is redacted in
		// the log (an unset TOKEN would print "secret=").
		for _, want := range []string{
			fmt.Sprintf("rank=%d n=2 home=%s cwd=%s user=alice greet=hi there secret=<redacted>", rank, c.home(rank), cwd),
			"ips=" + ip0 + "," + ip1,
			fmt.Sprintf("task=%s_c1_%d", filepath.Base(j.LogPath), id),
			`info={"cloud":"Local","cluster_name":"c1","region":"local","zone":null}`,
		} {
			if !strings.Contains(got, want+"\n") {
				t.Errorf("%s lacks %q:\n%s", name, want, got)
			}
		}
		setup, err := os.ReadFile(filepath.Join(j.LogPath, fmt.Sprintf("setup-%d.log", rank)))
		if err != nil || string(setup) != fmt.Sprintf("setup rank=%d cuda=unset\n", rank) {
			t.Errorf("setup-%d.log = %q, %v", rank, setup, err)
		}
	}
	run, _ := os.ReadFile(filepath.Join(j.LogPath, "run.log"))
	for _, want := range []string{"(head, rank=0, pid=", "(worker1, rank=1, pid=", "Job 1 finished (status: SUCCEEDED)."} {
		if !strings.Contains(string(run), want) {
			t.Errorf("run.log lacks %q:\n%s", want, run)
		}
	}
	// Secrets never leave through the agent's outputs.
	out, _ := c.agent(0, "", "queue", "--json")
	if strings.Contains(out, "s3cret") || !strings.Contains(out, `"job_name":"envjob"`) {
		t.Errorf("queue output: %s", out)
	}
	// logs: rank selection, tail and exit code of a finished job.
	logs, code := c.agent(0, "", "logs", "--job", strconv.Itoa(id), "--rank", "1", "--tail", "1")
	if code != 0 || !strings.HasPrefix(logs, "info=") || strings.Count(logs, "\n") != 1 {
		t.Errorf("logs --rank 1 --tail 1 = %d %q", code, logs)
	}
	if _, code := c.agent(0, "", "logs", "--job", "99"); code != agentapi.ExitNotFound {
		t.Errorf("logs of a missing job exit %d, want %d", code, agentapi.ExitNotFound)
	}
}

func TestRankFailureKillsOtherRanks(t *testing.T) {
	c := newCluster(t, 2, 2)
	id := c.submit(agentapi.JobSpec{NumNodes: 2, Run: `if [ "$SKYPILOT_NODE_RANK" = 1 ]; then sleep 0.3; exit 3; fi; sleep 300`})
	j := c.waitTerminal(id)
	if j.Status != agentapi.StatusFailed || fmt.Sprint(j.ReturnCodes) != "[137 3]" {
		t.Fatalf("job = %+v, want FAILED with codes [137 3]", j)
	}
	if !strings.Contains(j.FailureReason, "return code list: [137, 3]") || !strings.Contains(j.FailureReason, "A Worker failed with return code 3") {
		t.Errorf("failure reason %q", j.FailureReason)
	}
	for rank := 0; rank < 2; rank++ {
		if procs := c.rankProcs(id, rank, rank); len(procs) > 0 {
			t.Errorf("rank %d still has processes %v", rank, procs)
		}
	}
	if _, code := c.agent(0, "", "logs", "--job", strconv.Itoa(id)); code != 100 {
		t.Errorf("logs exit code %d, want 100", code)
	}
	run, _ := os.ReadFile(filepath.Join(j.LogPath, "run.log"))
	if want := "ERROR: \x1b[31mJob 1 failed with return code list:\x1b[0m [137, 3] (A Worker failed with return code 3, SkyPilot cleaned up the processes on other nodes with return code 137)\n"; !strings.Contains(string(run), want) {
		t.Errorf("run.log lacks %q:\n%s", want, run)
	}
	// A segfault-like code gets its note.
	id = c.submit(agentapi.JobSpec{Run: `kill -SEGV $$`})
	if j := c.waitTerminal(id); !strings.Contains(j.FailureReason, "Segmentation Fault") {
		t.Errorf("SEGV job = %+v", j)
	}
	// No note: SkyPilot's line still has the space before it.
	id = c.submit(agentapi.JobSpec{Run: `exit 1`})
	j = c.waitTerminal(id)
	run, _ = os.ReadFile(filepath.Join(j.LogPath, "run.log"))
	if want := fmt.Sprintf("ERROR: \x1b[31mJob %d failed with return code list:\x1b[0m [1] \n", id); !strings.HasSuffix(string(run), want) {
		t.Errorf("run.log of `exit 1` does not end with %q:\n%q", want, run)
	}
}

// TestJobShellOnEveryNode: setup and run on both nodes see their node's
// ~/.bashrc (an interactive bash, as SkyPilot runs them), start in
// ~/sky_workdir when there is one and in HOME otherwise, and print none
// of bash's job-control complaints nor anything of the conda line.
func TestJobShellOnEveryNode(t *testing.T) {
	c := newCluster(t, 2, 2)
	for i := 0; i < 2; i++ {
		bashrc := fmt.Sprintf("case $- in *i*) ;; *) return;; esac\nexport TEST_VAR=bashrc-of-node-%d\nexport PATH=$PATH:/bashrc/bin\n", i)
		if err := os.WriteFile(filepath.Join(c.home(i), ".bashrc"), []byte(bashrc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(c.home(1), "sky_workdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := `echo "$PHASE var=${TEST_VAR-unset} cwd=$PWD py=$PYTHONUNBUFFERED path-has-bashrc=$(case $PATH in *:/bashrc/bin*) echo yes;; esac)"`
	id := c.submit(agentapi.JobSpec{NumNodes: 2,
		Setup:   `PHASE=setup; ` + check,
		Run:     `PHASE=run; ` + check + `; ps -o args= -p $$`,
		Secrets: map[string]string{"TOKEN": "s3cret-argv"},
	})
	j := c.waitTerminal(id)
	run, _ := os.ReadFile(filepath.Join(j.LogPath, "run.log"))
	if j.Status != agentapi.StatusSucceeded {
		t.Fatalf("job = %+v\nrun.log:\n%s", j, run)
	}
	for node, rankLog := range []string{"0-head.log", "1-worker1.log"} {
		cwd := c.home(node)
		if node == 1 {
			cwd = filepath.Join(c.home(1), "sky_workdir")
		}
		want := fmt.Sprintf("var=bashrc-of-node-%d cwd=%s py=1 path-has-bashrc=yes\n", node, cwd)
		setup, _ := os.ReadFile(filepath.Join(j.LogPath, fmt.Sprintf("setup-%d.log", node)))
		if string(setup) != "setup "+want {
			t.Errorf("setup-%d.log = %q, want %q", node, setup, "setup "+want)
		}
		b, _ := os.ReadFile(filepath.Join(j.LogPath, "tasks", rankLog))
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) != 2 || lines[0]+"\n" != "run "+want {
			t.Errorf("%s = %q, want %q then bash's command line", rankLog, b, "run "+want)
			continue
		}
		// The rank's bash runs a script file: no secret in its argv.
		if !strings.HasPrefix(lines[1], "/bin/bash -i ") || strings.Contains(lines[1], "s3cret") {
			t.Errorf("%s: the rank's command line is %q, want /bin/bash -i <script file>", rankLog, lines[1])
		}
	}
	for _, noise := range []string{"bash:", "job control", "conda"} {
		if strings.Contains(string(run), noise) {
			t.Errorf("run.log has %q:\n%s", noise, run)
		}
	}
	for i := 0; i < 2; i++ {
		if left, _ := filepath.Glob(filepath.Join(c.home(i), ".sky", "agent", "scripts", "*")); len(left) > 0 {
			t.Errorf("node %d keeps job scripts after the job: %v", i, left)
		}
	}
}

// TestSetupFailureFailsFast: node 1's setup fails while node 0's is in a
// `sleep 10000`: node 0's setup is killed at once, the job ends
// FAILED_SETUP naming only node 1's setup, run never starts, and no
// process of the job is left on either node.
func TestSetupFailureFailsFast(t *testing.T) {
	c := newCluster(t, 2, 2)
	started := filepath.Join(c.home(0), "setup-0-sleeping")
	ran := filepath.Join(c.home(0), "run-ran")
	// Node 1 fails only once node 0's setup is in its sleep, so the kill
	// is what ends it, whatever the timing.
	id := c.submit(agentapi.JobSpec{NumNodes: 2,
		Envs: map[string]string{"STARTED": started},
		Setup: `if [ "$SKYPILOT_SETUP_NODE_RANK" = 0 ]; then touch "$STARTED"; sleep 10000; fi
while [ ! -e "$STARTED" ]; do sleep 0.02; done
echo "setup of node 1 fails"; exit 5`,
		Run: "touch " + ran,
	})
	j := c.waitTerminal(id)
	if j.Status != agentapi.StatusFailedSetup || fmt.Sprint(j.ReturnCodes) != "[137 5]" || len(j.Pids) != 2 || j.Pids[1] <= 0 {
		t.Fatalf("job = %+v, want FAILED_SETUP with codes [137 5] and both setup pids", j)
	}
	reason := fmt.Sprintf("Job %d's setup failed. Failed workers: (pid=%d, returncode=5). See error logs above for more details.", id, j.Pids[1])
	if j.FailureReason != reason {
		t.Errorf("failure reason %q, want %q", j.FailureReason, reason)
	}
	run, _ := os.ReadFile(filepath.Join(j.LogPath, "run.log"))
	if want := "ERROR: \x1b[31m" + reason + "\x1b[0m\n"; !strings.Contains(string(run), want) {
		t.Errorf("run.log lacks %q:\n%s", want, run)
	}
	if !strings.Contains(string(run), "setup of node 1 fails") {
		t.Errorf("run.log lacks node 1's setup output:\n%s", run)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("run started after a failed setup (%v)", err)
	}
	for rank := 0; rank < 2; rank++ {
		if procs := c.rankProcs(id, rank, rank); len(procs) > 0 {
			t.Errorf("node %d still runs setup processes %v", rank, procs)
		}
	}
	if _, code := c.agent(0, "", "logs", "--job", strconv.Itoa(id)); code != 100 {
		t.Errorf("logs exit code %d, want 100", code)
	}
}

func TestFIFOWithCPULimit(t *testing.T) {
	c := newCluster(t, 1, 2)
	one := 1.0
	trace := filepath.Join(c.home(0), "trace")
	var ids []int
	for i := 0; i < 50; i++ {
		ids = append(ids, c.submit(agentapi.JobSpec{CPUs: &one, Run: fmt.Sprintf(`echo S %d >> %s; sleep 0.02; echo E %d >> %s`, i, trace, i, trace)}))
	}
	var starts []float64
	for _, id := range ids {
		j := c.waitTerminal(id)
		if j.Status != agentapi.StatusSucceeded {
			t.Fatalf("job %+v", j)
		}
		starts = append(starts, *j.StartAt)
	}
	if !sort.Float64sAreSorted(starts) {
		t.Errorf("jobs did not start in submission order: %v", starts)
	}
	b, _ := os.ReadFile(trace)
	running, peak := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "S ") {
			running++
		} else {
			running--
		}
		peak = max(peak, running)
	}
	if peak > 2 || peak < 1 {
		t.Errorf("peak concurrency %d, want at most 2 (2 CPUs, 1 CPU per job)", peak)
	}
	t.Logf("peak concurrency %d", peak)
}

func TestCancelRunningTwoNodeJob(t *testing.T) {
	c := newCluster(t, 2, 2)
	id := c.submit(agentapi.JobSpec{NumNodes: 2, Run: `sleep 300 & sleep 300 & wait`})
	pending := c.submit(agentapi.JobSpec{NumNodes: 2, CPUs: ptr(2), Run: `true`})
	j := c.waitFor(id, "running with pids", func(j agentapi.Job) bool {
		return j.Status == agentapi.StatusRunning && len(j.Pids) == 2 && j.Pids[0] > 0 && j.Pids[1] > 0
	})
	out, code := c.agent(0, "", "cancel", "--json", strconv.Itoa(id), strconv.Itoa(pending))
	if code != 0 || !strings.Contains(out, fmt.Sprintf(`"cancelled":[%d,%d]`, id, pending)) {
		t.Fatalf("cancel: %d %s", code, out)
	}
	for _, pid := range j.Pids {
		if proc.Alive(pid) {
			t.Errorf("rank process %d survived cancel", pid)
		}
	}
	for rank := 0; rank < 2; rank++ {
		if procs := c.rankProcs(id, rank, rank); len(procs) > 0 {
			t.Errorf("rank %d still has processes %v", rank, procs)
		}
	}
	if j := c.job(id); j.Status != agentapi.StatusCancelled {
		t.Errorf("cancelled job = %+v", j)
	}
	if j := c.job(pending); j.Status != agentapi.StatusCancelled {
		t.Errorf("cancelled pending job = %+v", j)
	}
	if _, code := c.agent(0, "", "logs", "--job", strconv.Itoa(id)); code != 103 {
		t.Errorf("logs exit %d, want 103", code)
	}
}

func TestLogsFollowUntilJobEnds(t *testing.T) {
	c := newCluster(t, 1, 2)
	id := c.submit(agentapi.JobSpec{Name: "slow", Run: "echo first; sleep 0.5; echo second"})
	out, code := c.agent(0, "", "logs", "--job", strconv.Itoa(id), "--follow")
	if code != 0 {
		t.Fatalf("logs --follow exit %d", code)
	}
	// SkyPilot's lines, byte for byte (cli-output.md §sky launch, step 9).
	waiting := "\x1b[2m├── \x1b[0m\x1b[2mWaiting for task resources on 1 node.\x1b[0m"
	started := "\x1b[2m└── \x1b[0mJob started. Streaming logs... \x1b[2m(Ctrl-C to exit log streaming; job will not be killed)\x1b[0m"
	want := regexp.MustCompile("^" + regexp.QuoteMeta(waiting+"\n"+started+"\n") +
		`\x1b\[36m\(slow, pid=[0-9]+\)\x1b\[0m first\n\x1b\[36m\(slow, pid=[0-9]+\)\x1b\[0m second\n` +
		regexp.QuoteMeta("\x1b[0m\x1b[32m✓ Job finished (status: SUCCEEDED).\x1b[0m\x1b[0m\n") + "$")
	if !want.MatchString(out) {
		t.Fatalf("followed log:\n%q\nwant it to match %s", out, want)
	}
}

func ptr(v float64) *float64 { return &v }

func TestDaemonKilledMidJobEndsTruthfully(t *testing.T) {
	c := newCluster(t, 2, 2)
	id := c.submit(agentapi.JobSpec{NumNodes: 2, Run: `sleep 300`})
	j := c.waitFor(id, "running", func(j agentapi.Job) bool { return j.Status == agentapi.StatusRunning && len(j.Pids) == 2 })
	rep := c.status()
	if !rep.Daemon.Alive || rep.Daemon.Pid == 0 {
		t.Fatalf("daemon health %+v", rep.Daemon)
	}
	if err := syscall.Kill(rep.Daemon.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !testutil.WaitFor(10*time.Second, 10*time.Millisecond, func() bool { return !proc.Alive(rep.Daemon.Pid) }) {
		t.Fatalf("daemon %d survives SIGKILL", rep.Daemon.Pid)
	}
	if rep := c.status(); rep.Daemon.Alive {
		t.Fatalf("daemon reported alive after kill: %+v", rep.Daemon)
	}
	c.startAgents()
	j = c.waitTerminal(id)
	if j.Status != agentapi.StatusFailedDriver {
		t.Fatalf("job after daemon death = %+v, want FAILED_DRIVER", j)
	}
	for _, pid := range j.Pids {
		if proc.Alive(pid) {
			t.Errorf("rank process %d survived the daemon's restart", pid)
		}
	}
	// The scripts hold the job's secrets; the dead daemon's are gone too.
	for i := 0; i < 2; i++ {
		if left, _ := filepath.Glob(filepath.Join(c.home(i), ".sky", "agent", "scripts", "*")); len(left) > 0 {
			t.Errorf("node %d keeps the orphaned job's scripts: %v", i, left)
		}
	}
	// The restarted daemon works.
	if j := c.waitTerminal(c.submit(agentapi.JobSpec{NumNodes: 2, Run: "true"})); j.Status != agentapi.StatusSucceeded {
		t.Errorf("job after restart = %+v", j)
	}
}

func TestStartIsIdempotent(t *testing.T) {
	c := newCluster(t, 1, 2)
	first := c.status().Daemon.Pid
	out, code := c.agent(0, "", "start", "--json")
	if code != 0 || !strings.Contains(out, `"started":false`) || !strings.Contains(out, fmt.Sprintf(`"pid":%d`, first)) {
		t.Fatalf("second start: %d %s", code, out)
	}
}

func TestStopStartKeepsWorkdirTerminateRemovesAll(t *testing.T) {
	c := newCluster(t, 2, 2)
	ctx := context.Background()
	if err := c.runners[1].Rsync(ctx, writeTree(t, map[string]string{"data.txt": "kept\n"}), "~/sky_workdir", provision.RsyncOptions{}); err != nil {
		t.Fatal(err)
	}
	id := c.submit(agentapi.JobSpec{NumNodes: 2, Run: `sleep 300`})
	c.waitFor(id, "running", func(j agentapi.Job) bool { return j.Status == agentapi.StatusRunning })
	if err := c.prov.Stop(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	for i := range c.info.Nodes {
		if procs := proc.ProcsWithEnv(proc.EnvNode + "=" + c.home(i)); len(procs) > 0 {
			t.Fatalf("node %d has processes after stop: %v", i, procs)
		}
	}
	if _, err := c.prov.Start(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	c.startAgents()
	if j := c.waitTerminal(id); j.Status != agentapi.StatusFailedDriver {
		t.Errorf("job running at stop = %+v, want FAILED_DRIVER", j)
	}
	id = c.submit(agentapi.JobSpec{NumNodes: 2, Run: `[ "$SKYPILOT_NODE_RANK" = 0 ] || cat data.txt`})
	j := c.waitTerminal(id)
	b, _ := os.ReadFile(filepath.Join(j.LogPath, "tasks", "1-worker1.log"))
	if j.Status != agentapi.StatusSucceeded || string(b) != "kept\n" {
		t.Fatalf("after stop/start: %+v, worker log %q", j, b)
	}
	if err := c.prov.Terminate(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.prov.ClusterDir("c1")); !os.IsNotExist(err) {
		t.Errorf("cluster dir after terminate: %v", err)
	}
	for i := range c.info.Nodes {
		if procs := proc.ProcsWithEnv(proc.EnvNode + "=" + c.home(i)); len(procs) > 0 {
			t.Errorf("node %d has processes after terminate: %v", i, procs)
		}
	}
}

func writeTree(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestAutostopRunsHookAndAction(t *testing.T) {
	c := newCluster(t, 1, 2)
	c.cfgs[0].OnAutostop = `echo "$SKYGO_AUTOSTOP_ACTION" > ~/autostop-fired`
	c.startAgents() // records the new action; the daemon keeps running
	out, code := c.agent(0, "", "set-autostop", "--json", "--idle-seconds", "1", "--wait-for", "jobs", "--down",
		"--hook", `echo "hook $SKYPILOT_HOOK_EVENT"`)
	if code != 0 || !strings.Contains(out, `"down":true`) {
		t.Fatalf("set-autostop: %d %s", code, out)
	}
	fired := filepath.Join(c.home(0), "autostop-fired")
	if !testutil.WaitFor(20*time.Second, 50*time.Millisecond, func() bool {
		b, err := os.ReadFile(fired)
		return err == nil && string(b) == "down\n"
	}) {
		t.Fatal("autostop action never ran")
	}
	rep := c.status()
	if rep.Autostop == nil || !rep.Autostop.Autostopping || rep.Autostop.HookLog == "" {
		t.Fatalf("autostop status %+v", rep.Autostop)
	}
	if b, err := os.ReadFile(rep.Autostop.HookLog); err != nil || string(b) != "hook down\n" {
		t.Errorf("hook log %q %v", b, err)
	}
}

// TestAutostopRetriesFailedAction: an action that fails (the server was
// busy with the cluster, say) is tried again within seconds, not after
// the five minutes a fired action otherwise waits.
func TestAutostopRetriesFailedAction(t *testing.T) {
	c := newCluster(t, 1, 2)
	// Fails the first time, succeeds the second.
	c.cfgs[0].OnAutostop = `n=$(cat ~/tries 2>/dev/null || echo 0); echo $((n+1)) > ~/tries; [ "$n" -ge 1 ] && touch ~/stopped || exit 1`
	c.startAgents()
	if out, code := c.agent(0, "", "set-autostop", "--json", "--idle-seconds", "1", "--wait-for", "none"); code != 0 {
		t.Fatalf("set-autostop: %d %s", code, out)
	}
	if !testutil.WaitFor(20*time.Second, 100*time.Millisecond, func() bool {
		_, err := os.Stat(filepath.Join(c.home(0), "stopped"))
		return err == nil
	}) {
		tries, _ := os.ReadFile(filepath.Join(c.home(0), "tries"))
		t.Fatalf("the failed autostop action was not retried within 20 s (tries: %q)", tries)
	}
}

// TestOrphanDaemonStops: a daemon whose node directory is removed and made
// again (a teardown cut off, a new cluster in the same place) stops within
// a second, and leaves the new daemon's socket and pid file alone.
func TestOrphanDaemonStops(t *testing.T) {
	c := newCluster(t, 1, 2)
	old := c.status().Daemon.Pid
	agentDir := filepath.Join(c.home(0), ".sky", "agent")
	moved := agentDir + ".gone"
	if err := os.Rename(agentDir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(moved, "config.json"), filepath.Join(agentDir, "config.json")); err != nil {
		t.Fatal(err)
	}
	c.startAgents() // the new daemon of the node made again
	fresh := c.status().Daemon.Pid
	if fresh == old {
		t.Fatalf("no new daemon started (pid %d)", fresh)
	}
	if !testutil.WaitFor(5*time.Second, 50*time.Millisecond, func() bool { return syscall.Kill(old, 0) != nil }) {
		t.Fatalf("the orphaned daemon %d still runs", old)
	}
	if got := c.status().Daemon.Pid; got != fresh {
		t.Fatalf("after the orphan stopped, the node's daemon is %d, want %d", got, fresh)
	}
}
