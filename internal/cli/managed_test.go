package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
)

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "< 1s"},
		{900 * time.Millisecond, "< 1s"},
		{time.Second, "1s"},
		{65 * time.Second, "1m 5s"},
		{time.Hour + 5*time.Second, "1h 5s"},
		{2*time.Hour + 3*time.Minute, "2h 3m"},
		{26*time.Hour + 61*time.Second, "1d 2h 1m 1s"},
	} {
		if got := humanDuration(tc.d); got != tc.want {
			t.Errorf("humanDuration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if secondsCell(0) != "-" {
		t.Errorf("a job that never ran shows %q, want -", secondsCell(0))
	}
}

func TestInProgressLine(t *testing.T) {
	if got := inProgressLine(api.JobsQueueResult{}); got != "No in-progress managed jobs." {
		t.Errorf("no jobs: %q", got)
	}
	// The server's count (over every selected job) wins over the rows,
	// and the statuses come in enum order.
	res := api.JobsQueueResult{InProgress: map[string]int{"PENDING": 2, "RUNNING": 1, "RECOVERING": 1},
		Jobs: []api.ManagedJobRecord{{JobID: 1, Status: "RUNNING"}}}
	if got, want := inProgressLine(res), "In progress tasks: 2 PENDING, 1 RUNNING, 1 RECOVERING"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	rows := api.JobsQueueResult{Jobs: []api.ManagedJobRecord{{Status: "SUCCEEDED"}, {Status: "STARTING"}, {Status: "STARTING"}}}
	if got, want := inProgressLine(rows), "In progress tasks: 2 STARTING"; got != want {
		t.Errorf("from rows: got %q, want %q", got, want)
	}
}

func fp(v float64) *float64 { return &v }
func sp(v string) *string   { return &v }

// queueFixture is a finished single-task job and a running two-task
// pipeline, newest first, as the server sends them.
func queueFixture(now float64) []api.ManagedJobRecord {
	return []api.ManagedJobRecord{
		{JobID: 2, TaskID: 0, JobName: "pipe", TaskName: "prep", Workspace: "default", Status: "SUCCEEDED",
			Resources: "1x[CPU:1]", SubmittedAt: now - 300, EndAt: fp(now - 200), JobDuration: 90,
			ScheduleState: sp("ALIVE"), Events: &api.ManagedEventSummary{Count: 4, Last: api.ManagedEvent{Status: "RUNNING", Reason: "Job has started", Timestamp: now - 120}}},
		{JobID: 2, TaskID: 1, JobName: "pipe", TaskName: "train", Workspace: "default", Status: "RUNNING",
			Resources: "1x[A100:1]", SubmittedAt: now - 190, JobDuration: 65, RecoveryCount: 1, StartAt: fp(now - 125),
			CurrentClusterName: sp("train-2"), Infra: sp("Local"), ClusterResources: sp("1x(cpus=1, mem=1)"),
			ScheduleState: sp("ALIVE"), Details: sp("Recovering: node lost")},
		{JobID: 1, TaskID: 0, JobName: "solo", TaskName: "solo", Workspace: "default", Status: "FAILED",
			Resources: "1x[CPU:1]", SubmittedAt: now - 3700, EndAt: fp(now - 3600), JobDuration: 65,
			UserName: sp("alice"), Metadata: map[string]any{"git_commit": "abc123"},
			Details: sp("Failure: To see the details, run: sky jobs logs --controller 1")},
	}
}

func TestManagedQueueTable(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	recs := queueFixture(float64(now.Unix()))
	io, out, _ := testIO("", false)
	res := api.JobsQueueResult{Jobs: recs, Total: 2, InProgress: map[string]int{"RUNNING": 1}}
	if err := writeManagedJobs(io, res, managedTableOptions{}, now); err != nil {
		t.Fatal(err)
	}
	want := `In progress tasks: 1 RUNNING
ID  TASK  NAME   REQUESTED   SUBMITTED   TOT. DURATION  JOB DURATION  #RECOVERIES  STATUS             PROGRESS  POOL
2         pipe   -           5 mins ago  5m             2m 35s        1            RUNNING (task: 1)  -         -
 ↳  0     prep   1x[CPU:1]   5 mins ago  1m 40s         1m 30s        0            SUCCEEDED          -         -
 ↳  1     train  1x[A100:1]  3 mins ago  3m 10s         1m 5s         1            RUNNING            -         -
1   -     solo   1x[CPU:1]   1 hr ago    1m 40s         1m 5s         0            FAILED             -         -
`
	if got := out.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestManagedQueueTableVerbose(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	recs := queueFixture(float64(now.Unix()))
	io, out, _ := testIO("", false)
	if err := writeManagedJobs(io, api.JobsQueueResult{Jobs: recs}, managedTableOptions{Verbose: true, AllUsers: true}, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("want summary, header and 4 rows:\n%s", out)
	}
	header := strings.Fields(lines[1])
	wantHeader := []string{"ID", "TASK", "NAME", "USER", "USER_ID", "REQUESTED", "SUBMITTED", "TOT.", "DURATION", "JOB", "DURATION",
		"#RECOVERIES", "STATUS", "PROGRESS", "POOL", "WORKER_CLUSTER", "WORKER_JOB_ID", "STARTED", "INFRA", "RESOURCES", "SCHED.", "STATE", "DETAILS", "GIT_COMMIT", "EVENTS"}
	if strings.Join(header, " ") != strings.Join(wantHeader, " ") {
		t.Errorf("header %q,\nwant %q", header, wantHeader)
	}
	for i, want := range []string{
		"4 events, last RUNNING: Job has started (2 mins ago)", // the pipeline's summary row carries its timeline
		"train-2", "Recovering: node lost", "1x(cpus=1, mem=1)", "2 mins ago",
		"alice", "abc123", "Failure: To see the details",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%d: verbose table lacks %q:\n%s", i, want, out)
		}
	}
}

func TestManagedStatusColours(t *testing.T) {
	io, _, _ := testIO("", true)
	io.Color = true
	for status, code := range map[string]string{"PENDING": "\x1b[34m", "RUNNING": "\x1b[32m", "RECOVERING": "\x1b[36m",
		"CANCELLED": "\x1b[33m", "FAILED_SETUP": "\x1b[31m", "SUCCEEDED": "\x1b[32m"} {
		if got := io.managedStatus(status); !strings.HasPrefix(got, code) {
			t.Errorf("%s: %q, want colour %q", status, got, code)
		}
	}
	io.Color = false
	if got := io.managedStatus("FAILED"); got != "FAILED" {
		t.Errorf("no colour: %q", got)
	}
}

func TestManagedUsefulCommands(t *testing.T) {
	io, out, _ := testIO("", false)
	printManagedFinished(io, 3, "SUCCEEDED")
	printManagedUsefulCommands(io, []int{3})
	want := "✓ Managed job finished: 3 (status: SUCCEEDED).\n" +
		"\n📋 Useful Commands\nManaged Job ID: 3\n" +
		"├── To cancel the job:\t\tsky jobs cancel 3\n" +
		"├── To stream job logs:\t\tsky jobs logs 3\n" +
		"├── To stream controller logs:\tsky jobs logs --controller 3\n" +
		"└── To view all managed jobs:\tsky jobs queue\n"
	if out.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", out.String(), want)
	}
	out.Reset()
	printManagedUsefulCommands(io, []int{4, 5, 6})
	if !strings.HasPrefix(out.String(), "Jobs submitted with IDs: 4,5,6.\n\n📋 Useful Commands\n") ||
		!strings.Contains(out.String(), "sky jobs cancel 4 5 6") {
		t.Errorf("array: %q", out.String())
	}
}

func TestManagedInProgressHint(t *testing.T) {
	if got := managedInProgressHint(0, 5); got != "* To see all managed jobs: sky jobs queue" {
		t.Errorf("none: %q", got)
	}
	if got := managedInProgressHint(1, 5); got != "* 1 managed job is in progress. To see all managed jobs: sky jobs queue" {
		t.Errorf("one: %q", got)
	}
	if got := managedInProgressHint(7, 5); got != "* 7 managed jobs are in progress (5 latest ones shown). To see all managed jobs: sky jobs queue" {
		t.Errorf("seven: %q", got)
	}
}

func TestManagedCancelPrompt(t *testing.T) {
	for _, tc := range []struct {
		o    JobsCancelOptions
		want string
	}{
		{JobsCancelOptions{JobIDs: []int{3}}, "managed job with ID 3"},
		{JobsCancelOptions{JobIDs: []int{1, 2}}, "managed jobs with IDs 1,2"},
		{JobsCancelOptions{Name: "train"}, "managed job 'train'"},
		{JobsCancelOptions{Pool: "p"}, "managed jobs with pool 'p'"},
		{JobsCancelOptions{All: true}, "all managed jobs"},
		{JobsCancelOptions{AllUsers: true}, "all managed jobs FOR ALL USERS"},
		{JobsCancelOptions{JobIDs: []int{3}, Task: "eval"}, "task 'eval' of managed job with ID 3"},
	} {
		if got := managedCancelWhat(&tc.o); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
}

func TestJobsQueueBody(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var got *JobsQueueOptions
	parse := func(args ...string) api.JobsQueueBody {
		t.Helper()
		io, _, _ := testIO("", false)
		if err := execCmd(t, newJobsQueueCmd(testFactory(io, nil), func(o *JobsQueueOptions) error { got = o; return nil }), args...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return jobsQueueBody(got, now)
	}
	if b := parse(); b.Limit != 50 || b.After != 0 || b.SkipFinished {
		t.Errorf("defaults: %+v", b)
	}
	if b := parse("-a"); b.Limit != 0 {
		t.Errorf("-a keeps a limit: %+v", b)
	}
	if b := parse("-l", "3", "--since", "2h", "-u", "--infra", "aws", "-s", "FAILED,running", "-v"); b.Limit != 3 ||
		b.After != float64(now.Unix()-7200) || !b.AllUsers || b.Infra != "aws" || !b.Verbose ||
		strings.Join(b.Statuses, ",") != "FAILED,RUNNING" {
		t.Errorf("filters: %+v", b)
	}
	b := parse("--after", "2026-01-13", "--before", "2026-01-14 12:00:00")
	after, _ := time.ParseInLocation("2006-01-02", "2026-01-13", time.Local)
	before, _ := time.ParseInLocation("2006-01-02 15:04:05", "2026-01-14 12:00:00", time.Local)
	if b.After != float64(after.Unix()) || b.Before != float64(before.Unix()) {
		t.Errorf("window: %+v", b)
	}
	if b := parse("-s"); !b.SkipFinished {
		t.Errorf("bare -s is --skip-finished: %+v", b)
	}
}

// parseJobsLaunch runs `sky jobs launch` up to its run function and
// builds the request body as the real run does.
func parseJobsLaunch(t *testing.T, env map[string]string, args ...string) (api.JobsLaunchBody, error) {
	t.Helper()
	io, _, _ := testIO("", false)
	f := testFactory(io, env)
	var got *JobsLaunchOptions
	if err := execCmd(t, newJobsLaunchCmd(f, func(o *JobsLaunchOptions) error { got = o; return nil }), args...); err != nil {
		return api.JobsLaunchBody{}, err
	}
	b, _, err := prepareManagedJob(f, got, f.LookupEnv)
	return b, err
}

func TestJobsLaunchBody(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	single := write("single.yaml", "resources:\n  cpus: 1+\nsecrets:\n  TOKEN: null\nrun: echo hi\n")
	pipe := write("pipe.yaml", "name: pipe\n---\nrun: echo a\n---\nname: second\nrun: echo b\n")
	group := write("group.yaml", "name: grp\nexecution: parallel\nprimary_tasks: [a]\ntermination_delay: 30s\n---\nname: a\nrun: echo a\n---\nname: b\nrun: echo b\n")

	b, err := parseJobsLaunch(t, nil, "-n", "job1", "--job-recovery", "FAILOVER", "--priority", "7",
		"--secret", "TOKEN=tok-s3cr3t-value", "--depends-on", "4,5", single)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "job1" || len(b.Tasks) != 1 || b.Tasks[0].Name != "job1" || b.Execution != "serial" {
		t.Errorf("single: name %q tasks %d execution %q", b.Name, len(b.Tasks), b.Execution)
	}
	res := b.Tasks[0].Resources.ToMap()
	if jr, _ := res["job_recovery"].(map[string]any); jr == nil || jr["strategy"] != "FAILOVER" {
		t.Errorf("--job-recovery not in resources: %v", res)
	}
	if res["priority"] != 7 {
		t.Errorf("--priority not in resources: %v", res)
	}
	if joinInts(b.DependsOn, ",") != "4,5" {
		t.Errorf("depends_on %v", b.DependsOn)
	}
	if strings.Contains(b.YAML, "tok-s3cr3t-value") || strings.Contains(b.Command, "tok-s3cr3t-value") {
		t.Errorf("the secret reached the recorded YAML or command: %q / %q", b.YAML, b.Command)
	}
	if b.Tasks[0].Secrets["TOKEN"] != "tok-s3cr3t-value" {
		t.Errorf("the task itself must carry the secret to the server: %v", b.Tasks[0].Secrets)
	}

	b, err = parseJobsLaunch(t, map[string]string{envManagedJobID: "12"}, pipe)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "pipe" || len(b.Tasks) != 2 || b.Tasks[0].Name != "pipe-0" || b.Tasks[1].Name != "second" {
		t.Errorf("pipeline names: %q %+v", b.Name, b.Tasks)
	}
	if b.JobGroup != "12" {
		t.Errorf("inside a managed job the job group defaults to it: %q", b.JobGroup)
	}
	b, err = parseJobsLaunch(t, map[string]string{envManagedJobID: "12"}, "--no-job-group", "-n", "renamed", pipe)
	if err != nil {
		t.Fatal(err)
	}
	if b.JobGroup != "" || b.Name != "renamed" || b.Tasks[1].Name != "second" {
		t.Errorf("--no-job-group / -n on a pipeline: group %q name %q task %q", b.JobGroup, b.Name, b.Tasks[1].Name)
	}

	b, err = parseJobsLaunch(t, nil, "--num-jobs", "3", group)
	if err != nil {
		t.Fatal(err)
	}
	if b.Execution != "parallel" || strings.Join(b.PrimaryTasks, ",") != "a" || b.TerminationDelay["default"] != "30s" || b.NumJobs != 3 {
		t.Errorf("job group: %+v", b)
	}
	if _, err := parseJobsLaunch(t, nil, "-p", "pool1", group); err == nil || !strings.Contains(err.Error(), "pool") {
		t.Errorf("a job group on a pool: %v", err)
	}

	b, err = parseJobsLaunch(t, nil, "--job-recovery", "none", "--", "echo", "hi")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Tasks[0].Resources.ToMap()["job_recovery"]; ok || b.Tasks[0].Run != "echo hi" || !strings.HasPrefix(b.Name, "sky-") {
		t.Errorf("inline command: %+v", b)
	}
}

func TestJobsFlagRefusals(t *testing.T) {
	io, _, _ := testIO("", false)
	f := testFactory(io, nil)
	for _, tc := range []struct {
		cmd  func() error
		want string
	}{
		{func() error {
			return execCmd(t, newJobsLaunchCmd(f, func(*JobsLaunchOptions) error { return nil }), "-o", "id", "--async", "--", "echo")
		}, "--async"},
		{func() error {
			return execCmd(t, newJobsQueueCmd(f, func(*JobsQueueOptions) error { return nil }), "-r")
		}, "-r/--refresh"},
		{func() error {
			return execCmd(t, newJobsLogsCmd(f, func(*JobsLogsOptions) error { return nil }), "-r", "1")
		}, "-r/--refresh"},
		{func() error {
			return execCmd(t, newJobsLogsCmd(f, func(*JobsLogsOptions) error { return nil }), "-o", "json", "1")
		}, "--controller"},
		{func() error {
			return execCmd(t, newJobsLogsCmd(f, func(*JobsLogsOptions) error { return nil }), "--tail", "5", "-s")
		}, "--sync-down"},
	} {
		err := tc.cmd()
		var fe *FlagError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want a flag error naming %s, got %v", tc.want, err)
		}
	}
	// --num-jobs without a pool: each member gets its own cluster.
	if err := execCmd(t, newJobsLaunchCmd(f, func(*JobsLaunchOptions) error { return nil }), "--num-jobs", "4", "--", "echo"); err != nil {
		t.Errorf("--num-jobs without --pool: %v", err)
	}
	var lo *JobsLogsOptions
	if err := execCmd(t, newJobsLogsCmd(f, func(o *JobsLogsOptions) error { lo = o; return nil }), "--controller", "-o", "JSON", "3"); err != nil || lo.Output != "json" || lo.JobID != 3 {
		t.Errorf("--controller -o json: %v %+v", err, lo)
	}
}

func TestNextQueuePage(t *testing.T) {
	for _, c := range []struct {
		name                      string
		want, fetched, asked, got int
		limit                     int
		more                      bool
	}{
		{"all: a full page asks for the next", 0, 1000, 1000, 1000, 1000, true},
		{"all: a short page was the last", 0, 2500, 1000, 500, 0, false},
		{"all: an empty page was the last", 0, 3000, 1000, 0, 0, false},
		{"a limit above a page: the rest of it", 2500, 2000, 1000, 1000, 500, true},
		{"a limit reached", 2500, 2500, 500, 500, 0, false},
		{"a limit within one page was one request", 50, 50, 50, 50, 0, false},
		{"no limit asked: one request", 0, 7, 0, 7, 0, false},
	} {
		limit, more := nextQueuePage(c.want, c.fetched, c.asked, c.got)
		if limit != c.limit || more != c.more {
			t.Errorf("%s: nextQueuePage(%d, %d, %d, %d) = %d, %v; want %d, %v", c.name, c.want, c.fetched, c.asked, c.got, limit, more, c.limit, c.more)
		}
	}
}

// TestJSONArrayWriterPrintsAsPrintJSON: the queue printed a record at a
// time is byte for byte the slice printed at once.
func TestJSONArrayWriterPrintsAsPrintJSON(t *testing.T) {
	name := "a<b>&c \"q\""
	recs := []api.ManagedJobRecord{
		{JobID: 3, TaskID: 0, JobName: "x", Status: "PENDING", DependsOn: []int{1, 2}},
		{JobID: 2, TaskID: 1, JobName: name, Entrypoint: &name, Metadata: map[string]any{"k": []any{1.5, "v"}}},
		{JobID: 1, SubmittedAt: 1.7e9 + 0.1, TotalDuration: 1e21, JobName: "\u2028 é \x7f"},
	}
	for n := range len(recs) + 1 {
		var want, got, streamed bytes.Buffer
		if err := printJSON(&want, recs[:n]); err != nil {
			t.Fatal(err)
		}
		w := newJSONArrayWriter(&got)
		for i := range recs[:n] {
			if err := w.add(&recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.close(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d records:\n%s\nwant\n%s", n, got.String(), want.String())
		}
		// As the API server streams them (one line each, HTML escaping
		// off), added without being decoded.
		sw := newJSONArrayWriter(&streamed)
		for i := range recs[:n] {
			var line bytes.Buffer
			enc := json.NewEncoder(&line)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(&recs[i]); err != nil {
				t.Fatal(err)
			}
			if err := sw.addJSON(bytes.TrimSuffix(line.Bytes(), []byte("\n"))); err != nil {
				t.Fatal(err)
			}
		}
		if err := sw.close(); err != nil {
			t.Fatal(err)
		}
		if streamed.String() != want.String() {
			t.Errorf("%d records streamed:\n%s\nwant\n%s", n, streamed.String(), want.String())
		}
	}
	if err := newJSONArrayWriter(&bytes.Buffer{}).addJSON([]byte(`{"job_id": 1`)); err == nil {
		t.Error("a record cut short was printed")
	}
}
