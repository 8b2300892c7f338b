package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stamps reads the "<name> <start> <end>" lines tasks append to a shared
// file, by name.
func stamps(t *testing.T, path string) map[string][2]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the tasks left no timestamps: %v", err)
	}
	m := map[string][2]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("bad timestamp line %q in %s", line, path)
		}
		s, _ := strconv.ParseFloat(f[1], 64)
		e, _ := strconv.ParseFloat(f[2], 64)
		m[f[0]] = [2]float64{s, e}
	}
	return m
}

// stampedRun is a task's run that records when it started and ended.
func stampedRun(name, body string) string {
	return fmt.Sprintf(`run: |
  s=$(date +%%s.%%N)
  %s
  echo "%s $s $(date +%%s.%%N)" >> $SHARED/stamps
`, body, name)
}

// TestManagedDAGs: pipelines, job groups, arrays and dependencies, each
// through `sky jobs launch` and `sky jobs queue -v -o json`, side by side
// on one server.
func TestManagedDAGs(t *testing.T) {
	t.Parallel()
	e := managedEnv(t)
	e.must("check")

	// A 3-task pipeline runs its tasks one after the other, each on a
	// cluster of its own with the resources it asked for.
	t.Run("pipeline", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		shared := sharedDir(t)
		y := writeFile(t, "pipe.yaml", fmt.Sprintf(`name: pipe
---
name: prep
resources: {cpus: 1+}
envs: {SHARED: %[1]s}
%[2]s---
name: train
num_nodes: 2
resources: {cpus: 2}
envs: {SHARED: %[1]s}
%[3]s---
name: eval
resources: {cpus: 1+, memory: 1+}
envs: {SHARED: %[1]s}
%[4]s`, shared, stampedRun("prep", "sleep 1"),
			stampedRun("train", `[ "$SKYPILOT_NODE_RANK" = 0 ] || exit 0; sleep 1`),
			stampedRun("eval", "sleep 1")))
		id := e.jobsLaunch(y)[0]
		q := e.waitManaged([]int{id}, 60*time.Second, "ended", ended)
		var res, clusters []string
		for task, name := range []string{"prep", "train", "eval"} {
			m := q[mkey{id, task}]
			if m.Status != "SUCCEEDED" || m.TaskName != name {
				t.Errorf("task %d: want %s SUCCEEDED: %v", task, name, m)
			}
			res = append(res, m.Resources)
		}
		if u := slices.Compact(slices.Sorted(slices.Values(res))); len(u) != 3 {
			t.Errorf("the pipeline's tasks should show their own resources: %q", res)
		}
		st := stamps(t, filepath.Join(shared, "stamps"))
		if st["prep"][1] > st["train"][0] || st["train"][1] > st["eval"][0] || len(st) != 3 {
			t.Errorf("the tasks did not run in order: %v", st)
		}
		ctl := e.jobsLogs(0, fmt.Sprint(id), "--controller", "--no-follow").stdout
		for _, c := range []string{"prep-" + fmt.Sprint(id), "train-" + fmt.Sprint(id), "eval-" + fmt.Sprint(id)} {
			if !strings.Contains(ctl, "on cluster "+c) {
				t.Errorf("the controller log does not show a cluster %s:\n%s", c, ctl)
			}
			clusters = append(clusters, c)
		}
		t.Logf("resources %q on clusters %v", res, clusters)
	})

	// A task that fails stops the pipeline: the next never starts.
	t.Run("pipeline-failure", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		shared := sharedDir(t)
		y := writeFile(t, "pipefail.yaml", fmt.Sprintf(`name: pipefail
---
name: one
envs: {SHARED: %[1]s}
%[2]s---
name: two
envs: {SHARED: %[1]s}
run: exit 3
---
name: three
envs: {SHARED: %[1]s}
%[3]s`, shared, stampedRun("one", "true"), stampedRun("three", "true")))
		id := e.jobsLaunch(y)[0]
		q := e.waitManaged([]int{id}, 60*time.Second, "ended", ended)
		for task, want := range []string{"SUCCEEDED", "FAILED", "CANCELLED"} {
			if m := q[mkey{id, task}]; m.Status != want {
				t.Errorf("task %d: want %s: %v", task, want, m)
			}
		}
		if st := stamps(t, filepath.Join(shared, "stamps")); len(st) != 1 {
			t.Errorf("only task one should have run: %v", st)
		}
		e.jobsLogs(100, fmt.Sprint(id), "--no-follow")
	})

	// A job group runs its tasks at once, and each finds the other in the
	// hosts file the controller writes.
	t.Run("job-group", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		shared := sharedDir(t)
		task := func(name string) string {
			return fmt.Sprintf(`name: %s
envs: {SHARED: %s}
run: |
  s=$(date +%%s.%%N)
  cp "$SKYPILOT_JOBGROUP_HOSTS_FILE" $SHARED/hosts-%[1]s
  echo "$SKYPILOT_NODE_IPS" > $SHARED/ip-%[1]s
  sleep 2
  echo "%[1]s $s $(date +%%s.%%N)" >> $SHARED/stamps
`, name, shared)
		}
		y := writeFile(t, "group.yaml", "name: grp\nexecution: parallel\n---\n"+task("server")+"---\n"+task("client"))
		id := e.jobsLaunch(y)[0]
		q := e.waitManaged([]int{id}, 60*time.Second, "ended", ended)
		for task := range 2 {
			if m := q[mkey{id, task}]; m.Status != "SUCCEEDED" || !m.IsJobGroup {
				t.Errorf("task %d: want SUCCEEDED in a job group: %v", task, m)
			}
		}
		st := stamps(t, filepath.Join(shared, "stamps"))
		if st["server"][0] > st["client"][1] || st["client"][0] > st["server"][1] {
			t.Errorf("the group's tasks did not run at the same time: %v", st)
		}
		for _, pair := range [][2]string{{"server", "client"}, {"client", "server"}} {
			hosts, err := os.ReadFile(filepath.Join(shared, "hosts-"+pair[0]))
			ip, err2 := os.ReadFile(filepath.Join(shared, "ip-"+pair[1]))
			if err != nil || err2 != nil {
				t.Fatalf("%s: no hosts file or %s: no IP: %v %v", pair[0], pair[1], err, err2)
			}
			want := strings.TrimSpace(string(ip)) + " " + pair[1] + "-0.grp"
			if !strings.Contains(string(hosts), want) {
				t.Errorf("%s's hosts file does not give %s's address (want a line %q):\n%s", pair[0], pair[1], want, hosts)
			}
		}
	})

	// --num-jobs without a pool: eight jobs, ranks 0-7, each on its own
	// cluster.
	t.Run("num-jobs", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		shared := sharedDir(t)
		ids := e.jobsLaunch("-n", "arr", "--num-jobs", "8", "--env", "SHARED="+shared, "--",
			`echo "$SKYPILOT_JOB_RANK $SKYPILOT_NUM_JOBS $SKYPILOT_MANAGED_JOB_ID" > $SHARED/rank-$SKYPILOT_JOB_RANK; echo "$SKYPILOT_CLUSTER_INFO" >> $SHARED/rank-$SKYPILOT_JOB_RANK`)
		if len(ids) != 8 {
			t.Fatalf("--num-jobs 8 gave job ids %v", ids)
		}
		q := e.waitManaged(ids, 60*time.Second, "ended", ended)
		clusters := map[string]bool{}
		for rank := range 8 {
			b, err := os.ReadFile(filepath.Join(shared, fmt.Sprintf("rank-%d", rank)))
			first, info, _ := strings.Cut(string(b), "\n")
			f := strings.Fields(first)
			if err != nil || len(f) != 3 || f[1] != "8" {
				t.Errorf("rank %d: the job wrote %q (%v), want \"%d 8 <id>\"", rank, b, err, rank)
				continue
			}
			id, _ := strconv.Atoi(f[2])
			m := q[mkey{id, 0}]
			if m.Status != "SUCCEEDED" || m.JobRank != rank || m.NumJobs != 8 {
				t.Errorf("rank %d: want SUCCEEDED with job_rank %d of num_jobs 8: %v (rank %d of %d)", rank, rank, m, m.JobRank, m.NumJobs)
			}
			var ci struct {
				Cluster string `json:"cluster_name"`
			}
			if err := json.Unmarshal([]byte(info), &ci); err != nil || ci.Cluster == "" {
				t.Errorf("rank %d: SKYPILOT_CLUSTER_INFO = %q: %v", rank, info, err)
			}
			clusters[ci.Cluster] = true
		}
		if len(clusters) != 8 {
			t.Errorf("the 8 array jobs should each have had a cluster of their own: %v", clusters)
		}
	})

	// --depends-on waits for the dependency to succeed; a failed
	// dependency cancels the dependent; one already failed is refused.
	t.Run("depends-on", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		shared := sharedDir(t)
		first := e.jobsLaunch("-n", "dep-first", "--env", "SHARED="+shared, "--", `sleep 3; date +%s.%N > $SHARED/first-end`)[0]
		then := e.jobsLaunch("-n", "dep-then", "--depends-on", fmt.Sprint(first), "--env", "SHARED="+shared, "--", `date +%s.%N > $SHARED/then-start`)[0]
		bad := e.jobsLaunch("-n", "dep-bad", "--", "sleep 2; exit 1")[0]
		never := e.jobsLaunch("-n", "dep-never", "--depends-on", fmt.Sprint(bad), "--env", "SHARED="+shared, "--", `touch $SHARED/never-ran`)[0]

		q := e.jobsQueue()
		if m := q[mkey{then, 0}]; m.Status != "PENDING" || m.Details == nil || !strings.Contains(*m.Details, fmt.Sprintf("Waiting for job(s) %d", first)) {
			t.Errorf("a job waiting for its dependency should be PENDING and say so: %v", m)
		}
		q = e.waitManaged([]int{first, then, bad, never}, 60*time.Second, "ended", ended)
		for id, want := range map[int]string{first: "SUCCEEDED", then: "SUCCEEDED", bad: "FAILED", never: "CANCELLED"} {
			if m := q[mkey{id, 0}]; m.Status != want {
				t.Errorf("job %d: want %s: %v", id, want, m)
			}
		}
		endB, err1 := os.ReadFile(filepath.Join(shared, "first-end"))
		startB, err2 := os.ReadFile(filepath.Join(shared, "then-start"))
		end, _ := strconv.ParseFloat(strings.TrimSpace(string(endB)), 64)
		start, _ := strconv.ParseFloat(strings.TrimSpace(string(startB)), 64)
		if err1 != nil || err2 != nil || start < end {
			t.Errorf("the dependent job started at %f, before its dependency ended at %f (%v %v)", start, end, err1, err2)
		}
		if _, err := os.Stat(filepath.Join(shared, "never-ran")); err == nil {
			t.Errorf("the job depending on a failed one ran")
		}
		ctl := e.jobsLogs(103, fmt.Sprint(never), "--controller", "--no-follow").stdout
		if want := fmt.Sprintf("dependency job %d ended FAILED", bad); !strings.Contains(ctl, want) {
			t.Errorf("the controller log of job %d should say %q:\n%s", never, want, ctl)
		}
		r := e.exec(cmdTimeout, nil, "jobs", "launch", "-y", "-d", "-n", "dep-late", "--depends-on", fmt.Sprint(bad), "--", "true")
		if r.code == 0 || !strings.Contains(r.out(), fmt.Sprintf("managed job %d has already ended FAILED", bad)) {
			t.Errorf("a launch depending on a failed job should be refused, saying why:\n%s", r)
		}
	})
	t.Cleanup(func() {
		if !t.Failed() {
			e.requireNoClusters()
		}
	})
}
