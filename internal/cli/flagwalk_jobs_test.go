package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The flag probes of `sky jobs launch / queue / cancel / logs`, run in the
// flag walk's installation against the managed-jobs controller of its API
// server, on the local infrastructure.

// withEnv is e with extra environment variables for the sky processes.
func (e *flagEnv) withEnv(extra ...string) *flagEnv {
	c := *e
	c.env = append(append([]string{}, e.env...), extra...)
	return &c
}

// submitJob launches a managed job detached and returns its ID (from
// -o id, whose stdout holds nothing else).
func (e *flagEnv) submitJob(t *testing.T, args ...string) int {
	t.Helper()
	r := e.sky(append([]string{"jobs", "launch", "-y", "-o", "id"}, args...)...)
	ids := jobIDsOf(t, r)
	if len(ids) != 1 {
		t.Fatalf("want one job ID on stdout: %s", r)
	}
	return ids[0]
}

func jobIDsOf(t *testing.T, r flagRun) []int {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("jobs launch failed: %s", r)
	}
	var ids []int
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		id, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("-o id printed %q, not a job ID: %s", line, r)
		}
		ids = append(ids, id)
	}
	return ids
}

// waitJob blocks until the job ends (`sky jobs logs` follows it) and
// returns the exit code it ended with.
func (e *flagEnv) waitJob(t *testing.T, id int) flagRun {
	t.Helper()
	return e.sky("jobs", "logs", strconv.Itoa(id))
}

// jobRecords is `sky jobs queue -a -o json [args]`.
func (e *flagEnv) jobRecords(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	r := e.sky(append([]string{"jobs", "queue", "-a", "-o", "json"}, args...)...)
	var recs []map[string]any
	if err := json.Unmarshal([]byte(r.out), &recs); err != nil {
		t.Fatalf("jobs queue -o json: %v: %s", err, r)
	}
	return recs
}

// jobRecord is the first task record of job id ("status": "" if absent).
func (e *flagEnv) jobRecord(t *testing.T, id int, args ...string) map[string]any {
	t.Helper()
	for _, r := range e.jobRecords(t, append(args, "-v")...) {
		if r["job_id"] == float64(id) {
			return r
		}
	}
	return map[string]any{"status": ""}
}

func hasJob(recs []map[string]any, id int) bool {
	for _, r := range recs {
		if r["job_id"] == float64(id) {
			return true
		}
	}
	return false
}

// finishedJobs are two managed jobs the queue probes filter on, made
// once per installation: one SUCCEEDED, one FAILED (0 until made).
type finishedJobs struct{ ok, failed int }

func (e *flagEnv) finished(t *testing.T) finishedJobs {
	t.Helper()
	if e.jobs.ok == 0 {
		ok := e.submitJob(t, "-n", "fwj-ok", "--", "echo line-1; echo line-2; echo ok-output")
		failed := e.submitJob(t, "-n", "fwj-fail", "--", "echo failing; exit 3")
		if r := e.waitJob(t, ok); r.code != 0 {
			t.Fatalf("fwj-ok did not succeed: %s", r)
		}
		if r := e.waitJob(t, failed); r.code != 100 {
			t.Fatalf("fwj-fail: want exit 100: %s", r)
		}
		*e.jobs = finishedJobs{ok, failed}
	}
	return *e.jobs
}

// managedTaskCases are the task and resource flags of `sky jobs launch`:
// what the job runs shows in its followed log; resources no local node
// has are refused by the optimizer the command asks before its prompt.
func managedTaskCases() []flagCase {
	run := func(flags ...string) []string {
		return append(append([]string{"jobs", "launch", "-y"}, flags...), "--")
	}
	ask := func(flags ...string) []string { // no -y: the plan comes first
		return append(append([]string{"jobs", "launch"}, flags...), "--")
	}
	k := func(f string) string { return "jobs launch --" + f }
	return []flagCase{
		{k("workdir"), works(append(run("--workdir", "wd"), "cat hello.txt"), "hello from the workdir")},
		{k("git-url"), func(t *testing.T, e *flagEnv) {
			repo := "file://" + filepath.Join(e.dir, "git")
			wantWorks(t, e.sky(append(run("--git-url", repo), "cat README.txt")...), "from git")
			wantRefused(t, e.sky(append(run("--git-url", repo, "--workdir", "wd"), "true")...), "--workdir and --git-url")
		}},
		{k("git-ref"), func(t *testing.T, e *flagEnv) {
			repo := "file://" + filepath.Join(e.dir, "git")
			wantWorks(t, e.sky(append(run("--git-url", repo, "--git-ref", "other"), "cat OTHER.txt")...), "on the other branch")
			wantRefused(t, e.sky(append(run("--git-ref", "main"), "true")...), "--git-ref needs a git workdir")
		}},
		{k("infra"), func(t *testing.T, e *flagEnv) {
			wantWorks(t, e.sky(append(run("--infra", "local"), "echo on-local")...), "on-local")
			wantRefused(t, e.sky(append(ask("--infra", "aws"), "true")...), "aws: not enabled")
		}},
		{k("cloud"), refuses(append(ask("--cloud", "aws"), "true"), "aws: not enabled")},
		{k("region"), refuses(append(ask("--region", "us-east-1"), "true"), "asked for us-east-1")},
		{k("zone"), refuses(append(ask("--zone", "us-east-1a"), "true"), "asked for us-east-1a")},
		{k("num-nodes"), func(t *testing.T, e *flagEnv) {
			wantWorks(t, e.sky(append(run("--num-nodes", "2"), "echo nodes=$SKYPILOT_NUM_NODES")...), "nodes=2")
			wantRefused(t, e.sky(append(ask("--num-nodes", "0"), "true")...), "--num-nodes 0")
		}},
		{k("cpus"), func(t *testing.T, e *flagEnv) {
			id := e.submitJob(t, "--cpus", "1", "--", "true")
			if res, _ := e.jobRecord(t, id)["resources"].(string); res != "1x[CPU:1]" {
				t.Errorf("--cpus 1: requested %v", res)
			}
			wantRefused(t, e.sky(append(ask("--cpus", "4096"), "true")...), "4096 CPUs")
		}},
		{k("memory"), refuses(append(ask("--memory", "99999"), "true"), "99999 GB of memory")},
		{k("disk-size"), refuses(append(ask("--disk-size", "100"), "true"), "disk_size 100")},
		{k("disk-tier"), refuses(append(ask("--disk-tier", "high"), "true"), "disk_tier high")},
		{k("network-tier"), func(t *testing.T, e *flagEnv) {
			wantWorks(t, e.sky(append(run("--network-tier", "standard"), "echo std")...), "std")
			wantRefused(t, e.sky(append(ask("--network-tier", "best"), "true")...), "network_tier best")
		}},
		{k("use-spot"), refuses(append(ask("--use-spot"), "true"), "spot")},
		{k("no-use-spot"), works(append(run("--no-use-spot"), "echo on-demand"), "on-demand")},
		{k("image-id"), refuses(append(ask("--image-id", "ami-123"), "true"), "image_id")},
		{k("local-disk"), refuses(append(ask("--local-disk", "nvme"), "true"), "local_disk nvme")},
		{k("gpus"), refuses(append(ask("--gpus", "A100:1"), "true"), "A100")},
		{k("instance-type"), refuses(append(ask("-t", "m5.large"), "true"), "instance types (asked for m5.large)")},
		{k("ports"), works(append(run("--ports", "18099"), "echo ports-ok"), "ports-ok")},
		{k("env"), works(append(run("--env", "FOO=bar-value"), "echo $FOO"), "bar-value")},
		{k("env-file"), works(append(run("--env-file", "vars.env"), "echo $FROM_FILE"), "file-value")},
		{k("secret"), works(append(run("--secret", "TOKEN=tok-value"), "echo len=${#TOKEN}"), "len=9")},
		{k("secret-file"), works(append(run("--secret-file", "secrets.env"), "echo len=${#SECRET_FILE}"), "len=11")},
		{k("async"), works(append(run("--async"), "true"), "Submitted sky.jobs.launch request")},
		{k("no-async"), works(append(run("--no-async"), "echo waited"), "waited", "Managed job finished")},
		{k("detach-run"), func(t *testing.T, e *flagEnv) {
			r := e.sky(append(run("-d"), "sleep 2; echo LATE-$((40+2))")...)
			wantWorks(t, r, "Managed Job ID:")
			if strings.Contains(r.out, "LATE-42") {
				t.Errorf("-d streamed the job to its end: %s", r)
			}
		}},
	}
}

// managedFlagCases are the probes of every flag of the four commands.
func managedFlagCases() []flagCase {
	var cs []flagCase
	add := func(key string, p func(*testing.T, *flagEnv)) { cs = append(cs, flagCase{key, p}) }

	// sky jobs launch
	cs = append(cs, managedTaskCases()...)
	add("jobs launch --config", configRefused("jobs", "launch", "-y", "job.yaml"))
	add("jobs launch --workspace", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "-w", "team", "--", "true")
		if ws := e.jobRecord(t, id)["workspace"]; ws != "team" {
			t.Errorf("-w team: workspace %v", ws)
		}
	})
	add("jobs launch --name", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "-n", "fwj-named", "--", "true")
		if n := e.jobRecord(t, id)["job_name"]; n != "fwj-named" {
			t.Errorf("-n fwj-named: job_name %v", n)
		}
	})
	add("jobs launch --cluster", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "-c", "fwj-alias", "--", "true")
		if n := e.jobRecord(t, id)["job_name"]; n != "fwj-alias" {
			t.Errorf("-c fwj-alias: job_name %v", n)
		}
		wantRefused(t, e.sky("jobs", "launch", "-y", "-c", "a", "-n", "b", "--", "true"), "-c/--cluster", "disagree")
	})
	add("jobs launch --priority", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "--priority", "7", "--", "true")
		if p := e.jobRecord(t, id)["priority"]; p != float64(7) {
			t.Errorf("--priority 7: priority %v", p)
		}
		wantRefused(t, e.sky("jobs", "launch", "-y", "--priority", "5000", "--", "true"), "--priority 5000")
	})
	add("jobs launch --job-recovery", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("jobs", "launch", "-y", "--job-recovery", "FAILOVER", "--", "echo recovered-ok"), "recovered-ok")
		// The value goes through the resources parser, as job_recovery.
		wantRefused(t, e.sky("jobs", "launch", "-y", "--job-recovery", "NO_SUCH_STRATEGY", "--", "true"), "--job-recovery")
	})
	add("jobs launch --pool", refuses([]string{"jobs", "launch", "-y", "-p", "fwj-nopool", "--", "true"}, "fwj-nopool"))
	add("jobs launch --num-jobs", func(t *testing.T, e *flagEnv) {
		ids := jobIDsOf(t, e.sky("jobs", "launch", "-y", "-o", "id", "--num-jobs", "3", "--", "echo rank=$SKYPILOT_JOB_RANK/$SKYPILOT_NUM_JOBS"))
		if len(ids) != 3 {
			t.Fatalf("--num-jobs 3: %d IDs", len(ids))
		}
		for rank, id := range ids {
			r := e.waitJob(t, id)
			wantWorks(t, r, "rank="+strconv.Itoa(rank)+"/3")
		}
		wantWorks(t, e.sky("jobs", "launch", "-y", "-d", "--num-jobs", "2", "--", "true"), "Jobs submitted with IDs: ")
	})
	add("jobs launch --job-group", func(t *testing.T, e *flagEnv) {
		parent := e.submitJob(t, "--", "sleep 30")
		child := e.submitJob(t, "--job-group", strconv.Itoa(parent), "--", "true")
		if p := e.jobRecord(t, child)["parent_job_id"]; p != float64(parent) {
			t.Errorf("--job-group %d: parent_job_id %v", parent, p)
		}
		// Launched from inside a managed job, a job joins its group.
		inside := e.withEnv("SKYPILOT_MANAGED_JOB_ID="+strconv.Itoa(parent)).submitJob(t, "--", "true")
		if p := e.jobRecord(t, inside)["parent_job_id"]; p != float64(parent) {
			t.Errorf("inside job %d: parent_job_id %v", parent, p)
		}
		e.sky("jobs", "cancel", "-y", strconv.Itoa(parent))
	})
	add("jobs launch --no-job-group", func(t *testing.T, e *flagEnv) {
		parent := e.submitJob(t, "--", "sleep 30")
		id := e.withEnv("SKYPILOT_MANAGED_JOB_ID="+strconv.Itoa(parent)).submitJob(t, "--no-job-group", "--", "true")
		if p, ok := e.jobRecord(t, id)["parent_job_id"]; ok && p != nil {
			t.Errorf("--no-job-group: parent_job_id %v", p)
		}
		e.sky("jobs", "cancel", "-y", strconv.Itoa(parent))
	})
	add("jobs launch --depends-on", func(t *testing.T, e *flagEnv) {
		first := e.submitJob(t, "--", "sleep 1")
		second := e.submitJob(t, "--depends-on", strconv.Itoa(first), "--", "echo after")
		if d, _ := e.jobRecord(t, second)["depends_on"].([]any); len(d) != 1 || d[0] != float64(first) {
			t.Errorf("--depends-on %d: depends_on %v", first, d)
		}
		if r := e.waitJob(t, second); r.code != 0 {
			t.Errorf("the dependent job did not succeed: %s", r)
		}
		wantRefused(t, e.sky("jobs", "launch", "-y", "--depends-on", strconv.Itoa(e.finished(t).failed), "--", "true"), strconv.Itoa(e.finished(t).failed))
	})
	add("jobs launch --output", func(t *testing.T, e *flagEnv) {
		r := e.sky("jobs", "launch", "-y", "-o", "json", "--", "true")
		var got struct {
			JobIDs []int `json:"job_ids"`
		}
		if err := json.Unmarshal([]byte(r.out), &got); err != nil || len(got.JobIDs) != 1 || r.code != 0 {
			t.Errorf("-o json: stdout must be {\"job_ids\": [N]} alone: %v: %s", err, r)
		}
		if !strings.Contains(r.errOut, "Managed Job ID:") {
			t.Errorf("-o json: the transcript belongs on stderr: %s", r)
		}
		jobIDsOf(t, e.sky("jobs", "launch", "-y", "-o", "id", "--", "true"))
	})
	add("jobs launch --yes", func(t *testing.T, e *flagEnv) {
		r := e.sky("jobs", "launch", "-n", "fwj-ask", "--", "true")
		if r.code == 0 || !strings.Contains(r.out, "Managed job 'fwj-ask' will be launched on (estimated):") ||
			!strings.Contains(r.out, "Launching a managed job 'fwj-ask'. Proceed?") || !strings.Contains(r.errOut, "Aborted!") {
			t.Errorf("without -y: want the plan, the prompt and an abort: %s", r)
		}
		wantWorks(t, e.sky("jobs", "launch", "-y", "-n", "fwj-yes", "--", "echo yes-ran"), "yes-ran")
	})

	// sky jobs queue
	add("jobs queue --config", configRefused("jobs", "queue"))
	add("jobs queue --verbose", func(t *testing.T, e *flagEnv) {
		e.finished(t)
		wantWorks(t, e.sky("jobs", "queue", "-v"), "SCHED. STATE", "DETAILS", "EVENTS", "fwj-fail")
	})
	add("jobs queue --limit", func(t *testing.T, e *flagEnv) {
		e.finished(t) // two jobs at least
		r := e.sky("jobs", "queue", "-l", "1", "-o", "json")
		var recs []map[string]any
		if err := json.Unmarshal([]byte(r.out), &recs); err != nil || len(recs) != 1 {
			t.Errorf("-l 1: %d records (%v): %s", len(recs), err, r)
		}
		wantWorks(t, e.sky("jobs", "queue", "-l", "1"), "Showing the latest 1 of")
	})
	add("jobs queue --all", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		recs := e.jobRecords(t, "-l", "1")
		if !hasJob(recs, j.ok) || !hasJob(recs, j.failed) {
			t.Errorf("-a -l 1 must show every job: %v", recs)
		}
	})
	add("jobs queue --refresh", refuses([]string{"jobs", "queue", "-r"}, "-r/--refresh", "inside the API server"))
	add("jobs queue --skip-finished", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		if recs := e.jobRecords(t, "--skip-finished"); hasJob(recs, j.ok) || hasJob(recs, j.failed) {
			t.Errorf("--skip-finished shows finished jobs: %v", recs)
		}
	})
	add("jobs queue --status", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		recs := e.jobRecords(t, "-s", "FAILED")
		if !hasJob(recs, j.failed) || hasJob(recs, j.ok) {
			t.Errorf("-s FAILED: %v", recs)
		}
		wantRefused(t, e.sky("jobs", "queue", "-s", "NOPE"), "--status")
	})
	add("jobs queue --since", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		if !hasJob(e.jobRecords(t, "--since", "1h"), j.ok) {
			t.Errorf("--since 1h misses a job submitted a moment ago")
		}
	})
	add("jobs queue --after", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		if !hasJob(e.jobRecords(t, "--after", "2000-01-01"), j.ok) || hasJob(e.jobRecords(t, "--after", "2999-01-01"), j.ok) {
			t.Errorf("--after does not bound submitted_at")
		}
	})
	add("jobs queue --before", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		if hasJob(e.jobRecords(t, "--before", "2000-01-01"), j.ok) || !hasJob(e.jobRecords(t, "--before", "2999-01-01"), j.ok) {
			t.Errorf("--before does not bound submitted_at")
		}
	})
	add("jobs queue --infra", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		if !hasJob(e.jobRecords(t, "--infra", "local"), j.ok) || hasJob(e.jobRecords(t, "--infra", "aws"), j.ok) {
			t.Errorf("--infra does not filter by where the job ran")
		}
	})
	add("jobs queue --all-users", func(t *testing.T, e *flagEnv) {
		e.finished(t)
		wantWorks(t, e.sky("jobs", "queue", "-u"), "USER", "flagwalk")
	})
	add("jobs queue --output", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		rec := e.jobRecord(t, j.failed)
		for _, k := range []string{"status", "details", "failure_reason", "schedule_state", "recovery_count"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("-o json record lacks %q: %v", k, rec)
			}
		}
		if rec["status"] != "FAILED" {
			t.Errorf("fwj-fail: status %v", rec["status"])
		}
		wantRefused(t, e.sky("jobs", "queue", "-o", "yaml"), "-o/--output")
	})

	// sky jobs cancel
	add("jobs cancel --config", configRefused("jobs", "cancel", "-y", "1"))
	add("jobs cancel --yes", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "--", "sleep 60")
		r := e.sky("jobs", "cancel", strconv.Itoa(id))
		if r.code == 0 || !strings.Contains(r.out, "Cancelling managed job with ID "+strconv.Itoa(id)+". Proceed?") {
			t.Errorf("without -y: want the prompt and an abort: %s", r)
		}
		wantWorks(t, e.sky("jobs", "cancel", "-y", strconv.Itoa(id)), "cancelled")
		if r := e.waitJob(t, id); r.code != 103 {
			t.Errorf("a cancelled job's logs exit %d, want 103: %s", r.code, r)
		}
	})
	add("jobs cancel --name", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "-n", "fwj-cancel-me", "--", "sleep 60")
		wantWorks(t, e.sky("jobs", "cancel", "-y", "-n", "fwj-cancel-me"), "cancelled")
		if r := e.waitJob(t, id); r.code != 103 {
			t.Errorf("-n: the job was not cancelled: %s", r)
		}
	})
	// No pool exists in this build (pools are refused), so none has jobs.
	add("jobs cancel --pool", works([]string{"jobs", "cancel", "-y", "-p", "fwj-nopool"}, "No job to cancel."))
	add("jobs cancel --task", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "--", "sleep 60")
		// Task 0 is the job's declared task: only a dynamic one can go alone.
		wantRefused(t, e.sky("jobs", "cancel", "-y", "--task", "0", strconv.Itoa(id)), "task")
		wantRefused(t, e.sky("jobs", "cancel", "-y", "--task", "0", "-a"), "--task")
		e.sky("jobs", "cancel", "-y", strconv.Itoa(id))
	})
	add("jobs cancel --graceful", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "--", "sleep 60")
		wantWorks(t, e.sky("jobs", "cancel", "-y", "--graceful", strconv.Itoa(id)), "cancelled")
		if r := e.waitJob(t, id); r.code != 103 {
			t.Errorf("--graceful: the job was not cancelled: %s", r)
		}
	})
	add("jobs cancel --graceful-timeout", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "--", "sleep 60")
		wantRefused(t, e.sky("jobs", "cancel", "-y", "--graceful-timeout", "5", strconv.Itoa(id)), "--graceful-timeout only applies with --graceful")
		wantWorks(t, e.sky("jobs", "cancel", "-y", "--graceful", "--graceful-timeout", "5", strconv.Itoa(id)), "cancelled")
		if r := e.waitJob(t, id); r.code != 103 {
			t.Errorf("--graceful-timeout: the job was not cancelled: %s", r)
		}
	})
	add("jobs cancel --all", func(t *testing.T, e *flagEnv) {
		a := e.submitJob(t, "--", "sleep 60")
		b := e.submitJob(t, "--", "sleep 60")
		wantWorks(t, e.sky("jobs", "cancel", "-y", "-a"), "cancelled")
		for _, id := range []int{a, b} {
			if r := e.waitJob(t, id); r.code != 103 {
				t.Errorf("-a left job %d: %s", id, r)
			}
		}
	})
	add("jobs cancel --all-users", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "--", "sleep 60")
		r := e.sky("jobs", "cancel", "-u")
		if r.code == 0 || !strings.Contains(r.out, "Cancelling all managed jobs FOR ALL USERS. Proceed?") {
			t.Errorf("-u without -y: want the prompt: %s", r)
		}
		wantWorks(t, e.sky("jobs", "cancel", "-y", "-u"), "cancelled")
		if r := e.waitJob(t, id); r.code != 103 {
			t.Errorf("-u left job %d: %s", id, r)
		}
	})

	// sky jobs logs
	add("jobs logs --config", configRefused("jobs", "logs", "--no-follow", "1"))
	add("jobs logs --name", func(t *testing.T, e *flagEnv) {
		e.finished(t)
		wantWorks(t, e.sky("jobs", "logs", "-n", "fwj-ok"), "ok-output")
	})
	add("jobs logs --follow", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "--", "sleep 1; echo followed-to-the-end")
		wantWorks(t, e.sky("jobs", "logs", "--follow", strconv.Itoa(id)), "followed-to-the-end")
	})
	add("jobs logs --no-follow", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		wantWorks(t, e.sky("jobs", "logs", "--no-follow", strconv.Itoa(j.ok)), "ok-output")
		if r := e.sky("jobs", "logs", "--no-follow", strconv.Itoa(j.failed)); r.code != 100 || !strings.Contains(r.out, "failing") {
			t.Errorf("--no-follow of a failed job: want its log and exit 100: %s", r)
		}
		if r := e.sky("jobs", "logs", "--no-follow", "99999"); r.code != 102 {
			t.Errorf("--no-follow of a missing job: want exit 102: %s", r)
		}
	})
	add("jobs logs --tail", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		r := e.sky("jobs", "logs", "--no-follow", "--tail", "2", strconv.Itoa(j.ok))
		wantWorks(t, r, "ok-output")
		if strings.Contains(r.out, "line-1") {
			t.Errorf("--tail 2 printed earlier lines: %s", r)
		}
		if r := e.sky("jobs", "logs", strconv.Itoa(j.ok)); !strings.Contains(r.errOut, "last 1000 lines") {
			t.Errorf("following without --tail: want the 1000-line notice on stderr: %s", r)
		}
	})
	add("jobs logs --controller", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		wantWorks(t, e.sky("jobs", "logs", "--controller", "--no-follow", strconv.Itoa(j.ok)), "SUCCEEDED")
	})
	add("jobs logs --output", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		r := e.sky("jobs", "logs", "--controller", "-o", "json", strconv.Itoa(j.ok))
		var evs []map[string]any
		if err := json.Unmarshal([]byte(r.out), &evs); err != nil || len(evs) < 2 {
			t.Fatalf("--controller -o json: want the event timeline: %v: %s", err, r)
		}
		if evs[0]["new_status"] != "PENDING" || evs[len(evs)-1]["new_status"] != "SUCCEEDED" {
			t.Errorf("timeline from PENDING to SUCCEEDED: %v", evs)
		}
		wantRefused(t, e.sky("jobs", "logs", "-o", "json", strconv.Itoa(j.ok)), "--controller")
	})
	add("jobs logs --refresh", refuses([]string{"jobs", "logs", "-r", "1"}, "-r/--refresh", "inside the API server"))
	add("jobs logs --sync-down", func(t *testing.T, e *flagEnv) {
		j := e.finished(t)
		for _, ctl := range []bool{false, true} {
			args := []string{"jobs", "logs", "-s", strconv.Itoa(j.ok)}
			want := "Job " + strconv.Itoa(j.ok) + " logs: "
			if ctl {
				args = append(args, "--controller")
				want = "Job " + strconv.Itoa(j.ok) + " logs (controller): "
			}
			r := e.sky(args...)
			wantWorks(t, r, want)
			dir := strings.TrimSuffix(strings.TrimSpace(strings.SplitN(r.out, want, 2)[1]), "\x1b[0m")
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) == 0 {
				t.Errorf("%v: %s holds nothing (%v)", args, dir, err)
			}
		}
	})

	// sky status: the managed-jobs section.
	add("status --show-managed-jobs", func(t *testing.T, e *flagEnv) {
		id := e.submitJob(t, "-n", "fwj-status", "--", "sleep 60")
		wantWorks(t, e.sky("status", "--show-managed-jobs"), "Managed jobs", "In progress tasks:", "fwj-status", "To see all managed jobs: sky jobs queue")
		if r := e.sky("status", "--no-show-managed-jobs"); strings.Contains(r.out, "Managed jobs") {
			t.Errorf("--no-show-managed-jobs shows the job: %s", r)
		}
		e.sky("jobs", "cancel", "-y", strconv.Itoa(id))
	})
	add("status --no-show-managed-jobs", works([]string{"status", "--no-show-managed-jobs"}, "fw"))
	return cs
}
