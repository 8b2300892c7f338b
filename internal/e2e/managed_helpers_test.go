package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// mjob is a row of `sky jobs queue -v -o json`: one task of a managed job.
type mjob struct {
	JobID         int      `json:"job_id"`
	TaskID        int      `json:"task_id"`
	JobName       string   `json:"job_name"`
	TaskName      string   `json:"task_name"`
	Status        string   `json:"status"`
	ScheduleState *string  `json:"schedule_state"`
	RecoveryCount int      `json:"recovery_count"`
	Details       *string  `json:"details"`
	FailureReason *string  `json:"failure_reason"`
	SubmittedAt   float64  `json:"submitted_at"`
	StartAt       *float64 `json:"start_at"`
	EndAt         *float64 `json:"end_at"`
	Resources     string   `json:"resources"`
	ClusterRes    *string  `json:"cluster_resources"`
	Cluster       *string  `json:"current_cluster_name"`
	NumJobs       int      `json:"num_jobs"`
	JobRank       int      `json:"job_rank"`
	DependsOn     []int    `json:"depends_on"`
	Execution     string   `json:"execution"`
	IsJobGroup    bool     `json:"is_job_group"`
	Events        *struct {
		Count int `json:"count"`
	} `json:"events"`
}

func (m mjob) String() string {
	s := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	return fmt.Sprintf("job %d task %d (%s) %s sched=%s recoveries=%d details=%q failure=%q",
		m.JobID, m.TaskID, m.TaskName, m.Status, s(m.ScheduleState), m.RecoveryCount, s(m.Details), s(m.FailureReason))
}

// terminal says whether a managed status is final (api.ManagedTerminal,
// restated so the tests check the CLI's words, not the server's code).
func terminal(status string) bool {
	return slices.Contains([]string{"SUCCEEDED", "CANCELLED", "FAILED", "FAILED_SETUP",
		"FAILED_PRECHECKS", "FAILED_NO_RESOURCE", "FAILED_CONTROLLER"}, status)
}

// mkey names one task of one managed job.
type mkey struct{ job, task int }

// managedEnv is newEnv with the launch backoff shortened, as every
// managed-jobs test wants (the server inherits the first client's env).
func managedEnv(t testing.TB) *skyEnv {
	e := newEnv(t)
	e.env = append(e.env, "SKYGO_JOBS_RETRY_GAP=1s")
	return e
}

// as is e for a subtest: the same installation, failing t.
func (e *skyEnv) as(t testing.TB) *skyEnv {
	c := *e
	c.t = t
	return &c
}

// ended says a managed job is over: its status is final and its
// clusters are gone (schedule state DONE), as `sky jobs logs` waits for.
func ended(m mjob) bool {
	return terminal(m.Status) && m.ScheduleState != nil && *m.ScheduleState == "DONE"
}

// jobsQueue is every task of every managed job, by job and task id.
func (e *skyEnv) jobsQueue() map[mkey]mjob {
	e.t.Helper()
	var rows []mjob
	e.mustJSON(&rows, "jobs", "queue", "-a", "-v", "-o", "json")
	m := make(map[mkey]mjob, len(rows))
	for _, r := range rows {
		m[mkey{r.JobID, r.TaskID}] = r
	}
	return m
}

// jobsLaunch submits a managed job (detached) and returns its ids.
func (e *skyEnv) jobsLaunch(args ...string) []int {
	e.t.Helper()
	r := e.must(append([]string{"jobs", "launch", "-y", "-o", "id"}, args...)...)
	var ids []int
	for _, f := range strings.Fields(r.stdout) {
		id, err := strconv.Atoi(f)
		if err != nil {
			e.t.Fatalf("sky jobs launch -o id printed %q, not job ids:\n%s", f, r)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		e.t.Fatalf("sky jobs launch -o id printed no id:\n%s", r)
	}
	return ids
}

// waitManaged polls the queue until ok holds for every task of the given
// jobs, and returns the last queue.
func (e *skyEnv) waitManaged(ids []int, timeout time.Duration, what string, ok func(mjob) bool) map[mkey]mjob {
	e.t.Helper()
	var q map[mkey]mjob
	var bad []string
	if testutil.WaitFor(timeout, 200*time.Millisecond, func() bool {
		q, bad = e.jobsQueue(), nil
		for _, id := range ids {
			found := false
			for k, r := range q {
				if k.job != id {
					continue
				}
				found = true
				if !ok(r) {
					bad = append(bad, r.String())
				}
			}
			if !found {
				bad = append(bad, fmt.Sprintf("job %d: not in the queue", id))
			}
		}
		return len(bad) == 0
	}) {
		return q
	}
	slices.Sort(bad)
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
	}
	e.t.Fatalf("managed jobs not %s after %s:\n%s\n%s", what, timeout, strings.Join(bad, "\n"), e.serverLogTail())
	return nil
}

// preemptNode does to a local node what a cloud preemption does to a VM:
// every process of the node (its agent daemon and its jobs, found by the
// SKYGO_LOCAL_NODE marker they all carry) dies by SIGKILL, all at once, and
// then the cluster's directory disappears. (Removing the directory first
// would let the server see the cluster gone and launch its replacement,
// whose processes carry the same marker, while the kills still land.) It
// returns how many processes it killed.
func (e *skyEnv) preemptNode(cluster string) int {
	e.t.Helper()
	marker := "SKYGO_LOCAL_NODE=" + e.nodeHome(cluster, 0) + "\x00"
	killed := 0
	signalled := map[int]bool{}
	// A node dies at once: every process is stopped before any is
	// killed, so that none runs a line more because another died first
	// (a job's shell whose sleep was killed before it would go on to its
	// next command: /proc lists 10003 before 9961). A job's shell may
	// fork while the signals land; repeat until nothing of the node is
	// left.
	for range 20 {
		ps := procsWithEnv(marker)
		if len(ps) == 0 {
			break
		}
		for _, p := range ps {
			_ = syscall.Kill(p.pid, syscall.SIGSTOP)
		}
		for _, p := range ps {
			if syscall.Kill(p.pid, syscall.SIGKILL) == nil {
				killed++
			}
			signalled[p.pid] = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The server may already be repairing the node (a status refresh that
	// found its agent dead runs `sky agent start` there): such a process
	// is new, not a survivor, and dies with the node like the others, also
	// when it starts while the directory is being removed and writes into
	// it (the removal then fails: not empty). Only a process that was sent
	// SIGKILL and is still there fails the test.
	var err error
	for range 20 {
		ps := procsWithEnv(marker)
		for _, p := range ps {
			if signalled[p.pid] {
				e.t.Fatalf("processes of node %s survive SIGKILL: %v", cluster, ps)
			}
		}
		for _, p := range ps {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			signalled[p.pid] = true
		}
		if len(ps) > 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err = os.RemoveAll(e.clusterDir(cluster)); err == nil {
			return killed
		}
	}
	e.t.Fatalf("removing the cluster directory of %s: %v", cluster, err)
	return killed
}

// localClusters lists the cluster directories of the local infrastructure.
func (e *skyEnv) localClusters() []string {
	ents, _ := os.ReadDir(filepath.Join(e.clusterDir("x"), ".."))
	var out []string
	for _, d := range ents {
		if d.IsDir() {
			out = append(out, d.Name())
		}
	}
	return out
}

// readEnvDump parses a `env` dump (one KEY=VALUE a line) of SKYPILOT_*
// variables a job wrote.
func readEnvDump(t testing.TB, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the env dump a job should have written: %v", err)
	}
	m := map[string]string{}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if k, v, ok := strings.Cut(string(line), "="); ok {
			m[k] = v
		}
	}
	return m
}

// sharedDir is a directory jobs on every local node can write to (it is
// outside the server's ~/.sky, which a node's sandbox hides), for markers
// and the proofs they leave.
func sharedDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "skyshared-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// jobsLogs runs `sky jobs logs ARGS` and fails the test unless it exits
// with code (0 succeeded, 100 failed, 101 not finished, 102 not found,
// 103 cancelled).
func (e *skyEnv) jobsLogs(code int, args ...string) result {
	e.t.Helper()
	r := e.exec(cmdTimeout, nil, append([]string{"jobs", "logs"}, args...)...)
	if r.code != code {
		e.t.Fatalf("want exit %d:\n%s\n%s", code, r, e.serverLogTail())
	}
	return r
}
