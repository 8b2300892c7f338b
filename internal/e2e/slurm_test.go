package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/testutil/slurmtest"
)

// Slurm end to end, against the real Slurm of internal/testutil/slurmtest
// (3 nodes in network namespaces, 4 fake h100 GPUs each, partitions cpu
// and gpu, accounting on; SKYGO_SKIP_SLURM=1 skips these tests). The
// server reaches the cluster as SkyPilot does: ssh to the login node,
// srun --overlap into the allocation.

const slurmAlias = "testcluster"

// slurmEnv is a server whose ~/.slurm/config names the test cluster.
func slurmEnv(t testing.TB) (*skyEnv, *slurmtest.Cluster) {
	t.Helper()
	c := slurmtest.Get(t)
	e := newEnv(t)
	if err := c.WriteSlurmConfig(e.home, slurmAlias); err != nil {
		t.Fatal(err)
	}
	return e, c
}

func (e *skyEnv) writeYAML(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// squeueNames are the names of the login user's live jobs.
func squeueNames(t testing.TB, c *slurmtest.Cluster) []string {
	t.Helper()
	out := strings.Fields(c.Run(t, "squeue -h -u "+c.User+" -o %j"))
	sort.Strings(out)
	return out
}

// TestSlurmCluster walks one cluster through a user's story: check, GPU
// listing, a 2-node GPU task on distinct nodes with Slurm's and SkyPilot's
// variables, per-node logs, exec, cancel leaving no process, stop refused,
// down cancelling the allocation.
func TestSlurmCluster(t *testing.T) {
	// One at a time with the other Slurm tests: one cluster per machine (slurmtest), whose queue they read whole.
	slurmHarness.parallel(t)
	e, c := slurmEnv(t)
	t.Cleanup(func() { c.CancelAll(t) })

	r := e.must("check", "slurm")
	if !strings.Contains(r.out(), "Slurm: enabled") {
		t.Fatalf("sky check slurm did not enable Slurm:\n%s", r)
	}
	r = e.must("gpus", "list", "--infra", "slurm")
	for _, want := range []string{"H100", "12 of 12 free", "CLUSTER", "PARTITION", slurmAlias + "  gpu"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("sky gpus list --infra slurm lacks %q:\n%s", want, r.stdout)
		}
	}

	task := e.writeYAML(t, "two.yaml", `num_nodes: 2
resources:
  infra: slurm/`+slurmAlias+`/gpu
  accelerators: H100:2
  cpus: 1
  memory: 1
setup: echo setup-on-$(hostname)
run: |
  echo "R rank=$SKYPILOT_NODE_RANK host=$(hostname) cuda=$CUDA_VISIBLE_DEVICES gpus=$SKYPILOT_NUM_GPUS_PER_NODE nnodes=$SLURM_NNODES nodelist=$SLURM_JOB_NODELIST procid=${SLURM_PROCID:-unset} stepid=${SLURM_STEP_ID:-unset} ips=$(echo $SKYPILOT_NODE_IPS | tr ' ' ,)"
`)
	r = e.launchOK(t, "-c", "sl", task)
	launchOut := r.stdout
	var ranks []string
	hosts := map[string]bool{}
	for _, line := range strings.Split(r.out(), "\n") {
		i := strings.Index(line, "R rank=")
		if i < 0 {
			continue
		}
		f := line[i:]
		ranks = append(ranks, f)
		for _, kv := range strings.Fields(f) {
			if h, ok := strings.CutPrefix(kv, "host="); ok {
				hosts[h] = true
			}
		}
		for _, want := range []string{"gpus=2", "nnodes=2", "procid=unset", "stepid=unset", "ips=" + c.NodeAddrs[0] + "," + c.NodeAddrs[1]} {
			if !strings.Contains(f, want) {
				t.Errorf("rank line lacks %q: %s", want, f)
			}
		}
		if !strings.Contains(f, "cuda=0,1") && !strings.Contains(f, "cuda=2,3") {
			t.Errorf("rank line has no 2-GPU CUDA_VISIBLE_DEVICES from Slurm: %s", f)
		}
	}
	if len(ranks) != 2 || len(hosts) != 2 {
		t.Fatalf("want 2 ranks on 2 distinct nodes, got %v:\n%s", ranks, r.out())
	}
	if !strings.Contains(r.out(), "(head, rank=0") || !strings.Contains(r.out(), "(worker1, rank=1") {
		t.Errorf("the run's log is not labelled per node:\n%s", r.out())
	}
	if !strings.Contains(r.out(), "setup-on-") {
		t.Errorf("setup did not run:\n%s", r.out())
	}
	jobName := ""
	for _, n := range squeueNames(t, c) {
		if strings.HasPrefix(n, "sl-") {
			jobName = n
		}
	}
	if jobName == "" {
		t.Fatalf("no allocation named sl-* in squeue: %v", squeueNames(t, c))
	}

	var st []map[string]any
	e.mustJSON(&st, "status", "-o", "json")
	if len(st) != 1 || st[0]["status"] != "UP" || !strings.Contains(fmt.Sprint(st[0]["infra"], st[0]["cloud"]), "Slurm") {
		t.Fatalf("sky status -o json: %v", st)
	}

	// Per-node logs of job 1, downloaded: the head's run.log with both
	// ranks, and the worker's own file.
	r = e.must("logs", "--sync-down", "sl", "1")
	m := regexp.MustCompile("Job 1 logs: (.*)\x1b\\[0m").FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("logs --sync-down printed no directory:\n%s", r)
	}
	if run, err := os.ReadFile(filepath.Join(m[1], "run.log")); err != nil || !strings.Contains(string(run), "R rank=0") || !strings.Contains(string(run), "R rank=1") {
		t.Errorf("run.log (%v):\n%s", err, run)
	}
	if w, err := os.ReadFile(filepath.Join(m[1], "tasks", "1-worker1.log")); err != nil || !strings.Contains(string(w), "R rank=1") {
		t.Errorf("the worker's own log (%v): %q", err, w)
	}

	// ssh <cluster> and <cluster>-worker1 land on the allocation's nodes
	// (through the login node and srun), as the node's jobs run; rsync
	// takes the same way.
	if !strings.Contains(launchOut, "ssh sl") {
		t.Errorf("launch does not offer `ssh sl`:\n%s", r.stdout)
	}
	gen := filepath.Join(paths.GeneratedSSH(e.home), "sl")
	for alias, rank := range map[string]string{"sl": "0", "sl-worker1": "1"} {
		sr := runCmd(t, 60*time.Second, e.env, "ssh", "-F", gen, "-o", "BatchMode=yes", alias, "echo ssh-rank=$SKYPILOT_NODE_RANK host=$(hostname) job=$SLURM_JOB_ID nnodes=$SLURM_NNODES step=${SLURM_STEP_ID:-none}")
		if sr.code != 0 || !strings.Contains(sr.stdout, "ssh-rank="+rank+" host=") || strings.Contains(sr.stdout, "job= ") || !strings.Contains(sr.stdout, " nnodes=2 step=none") {
			t.Errorf("ssh %s: %s", alias, sr)
		}
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f.txt"), []byte("synced\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rs := runCmd(t, 60*time.Second, e.env, "rsync", "-a", "-e", "ssh -F "+gen+" -o BatchMode=yes", src+"/", "sl-worker1:~/dst/"); rs.code != 0 {
		t.Errorf("rsync to sl-worker1: %s", rs)
	} else if sr := runCmd(t, 60*time.Second, e.env, "ssh", "-F", gen, "-o", "BatchMode=yes", "sl-worker1", "cat ~/dst/f.txt"); !strings.Contains(sr.stdout, "synced") {
		t.Errorf("the rsynced file is not on sl-worker1: %s", sr)
	}

	// The head's agent lives in the allocation's batch step, which starts
	// it again when it dies.
	c.RunOn(t, 0, `for f in /tmp/sl-*/.sky/agent/daemon.pid; do kill -9 "$(cat "$f")"; done`)
	r = e.must("exec", "sl", "--", "echo exec-on-$(hostname)-$SKYPILOT_NODE_RANK")
	if !strings.Contains(r.out(), "exec-on-") {
		t.Fatalf("sky exec printed nothing of the job:\n%s", r)
	}

	// A cancelled job leaves no process on any node.
	e.must("exec", "-d", "sl", "--num-nodes", "2", "--", "sleep 987")
	if !waitFor(30*time.Second, func() bool { return strings.Contains(c.Run(t, "pgrep -af 'sleep 987' || true"), "sleep 987") }) {
		t.Fatal("the sleep job never started")
	}
	e.must("cancel", "-y", "sl", "3")
	if !waitFor(20*time.Second, func() bool { return !strings.Contains(c.Run(t, "pgrep -af 'sleep 98[7]' || true"), "sleep 987") }) {
		t.Fatalf("processes of the cancelled job survive: %s", c.Run(t, "pgrep -af 'sleep 98[7]' || true"))
	}

	r = e.exec(cmdTimeout, nil, "stop", "-y", "sl")
	if !strings.Contains(r.out(), "Cluster sl cannot be stopped: Slurm clusters cannot be stopped") || !strings.Contains(r.out(), "Cluster(s) failed.") {
		t.Fatalf("sky stop of a Slurm cluster was not refused clearly:\n%s", r)
	}
	r = e.exec(cmdTimeout, nil, "autostop", "-y", "sl", "-i", "5")
	if !strings.Contains(r.out(), "--down") || !strings.Contains(r.out(), "Cluster(s) failed.") {
		t.Fatalf("autostop (stop) of a Slurm cluster was not refused with the --down hint:\n%s", r)
	}

	e.must("exec", "-d", "sl", "--", "sleep 988")
	e.must("down", "-y", "sl")
	if names := squeueNames(t, c); slices.Contains(names, jobName) {
		t.Fatalf("the allocation %s is still queued after sky down: %v", jobName, names)
	}
	if out := c.Run(t, "pgrep -af 'sleep 98[78]|home/"+c.User+"/[.]sky/bin/sky-node agent' || true"); strings.TrimSpace(out) != "" {
		t.Fatalf("processes survive sky down: %s", out)
	}
	if out := c.Run(t, "ls ~/.sky_clusters 2>/dev/null || true"); strings.Contains(out, jobName) {
		t.Fatalf("the cluster's shared directory survives sky down: %s", out)
	}
}

// TestSlurmAutodown: autostop --down on a Slurm cluster is carried out by
// the API server (the head cannot call back), and cancels the allocation.
func TestSlurmAutodown(t *testing.T) {
	// One at a time with the other Slurm tests: one cluster per machine (slurmtest), whose queue they read whole.
	slurmHarness.parallel(t)
	e, c := slurmEnv(t)
	t.Cleanup(func() { c.CancelAll(t) })
	task := e.writeYAML(t, "one.yaml", "resources:\n  infra: slurm\n  cpus: 1\n  memory: 1\nrun: echo up\n")
	e.launchOK(t, "-c", "ad", task)
	if len(squeueNames(t, c)) != 1 {
		t.Fatalf("want one allocation, have %v", squeueNames(t, c))
	}
	e.must("autostop", "-y", "ad", "-i", "0", "--down")
	if !waitFor(60*time.Second, func() bool { _, ok := e.status(false)["ad"]; return !ok }) {
		t.Fatalf("autostop --down did not tear the Slurm cluster down within 60 s: %+v", e.status(false)["ad"])
	}
	if names := squeueNames(t, c); len(names) != 0 {
		t.Fatalf("allocations left after autodown: %v", names)
	}
}

// TestSlurmTooBig: a request no node can hold fails with the spec's
// message naming the GPU types found, and with a fallback it fails over.
func TestSlurmTooBig(t *testing.T) {
	// One at a time with the other Slurm tests: one cluster per machine (slurmtest), whose queue they read whole.
	slurmHarness.parallel(t)
	e, _ := slurmEnv(t)
	task := e.writeYAML(t, "big.yaml", "resources:\n  infra: slurm\n  accelerators: H100:8\nrun: echo never\n")
	r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "big", task)
	if r.code == 0 || !strings.Contains(r.out(), "No GPU nodes matching 'H100' (count>=8) found on Slurm cluster '"+slurmAlias+"'") ||
		!strings.Contains(strings.ToLower(r.out()), "discovered gpu types on cluster: ['h100']") {
		t.Fatalf("launch of 8 GPUs per node did not fail with the spec's message:\n%s", r)
	}
	// Containers run through Pyxis on Slurm; the test cluster has none.
	img := e.writeYAML(t, "img.yaml", "resources:\n  infra: slurm\n  image_id: docker:ubuntu:22.04\nrun: echo never\n")
	r = e.exec(cmdTimeout, nil, "launch", "-y", "-c", "img", img)
	if r.code == 0 || !strings.Contains(r.out(), "needs the Pyxis plugin") {
		t.Fatalf("a docker image on a Slurm cluster without Pyxis was not refused clearly:\n%s", r)
	}
	e.exec(cmdTimeout, nil, "down", "-y", "img")
	e.must("check") // the local infra next to Slurm, for the fallback
	fo := e.writeYAML(t, "fo.yaml", `resources:
  ordered:
    - infra: slurm
      cpus: 64
    - infra: local
      cpus: 1
run: echo fell-over-to-$SKYPILOT_CLUSTER_INFO
`)
	r = e.launchOK(t, "-c", "fo", fo)
	if !strings.Contains(r.out(), "fell-over-to-") || !strings.Contains(r.out(), `"cloud": "Local"`) && !strings.Contains(r.out(), `"cloud":"Local"`) {
		t.Fatalf("the launch did not fall over to the local infra:\n%s", r)
	}
	e.must("down", "-y", "fo")
}

// TestSlurmManagedPending: with the gpu partition full, a managed job's
// details say what Slurm waits on and where; every change is an event;
// the job runs once the blocker ends.
func TestSlurmManagedPending(t *testing.T) {
	// One at a time with the other Slurm tests: one cluster per machine (slurmtest), whose queue they read whole.
	slurmHarness.parallel(t)
	e, c := slurmEnv(t)
	t.Cleanup(func() { c.CancelAll(t) })
	c.Run(t, fmt.Sprintf("sbatch -p gpu -N%d --gres=gpu:%s:%d -c1 --mem=100M -J blocker -o /dev/null --wrap 'sleep 600'",
		len(c.Nodes), c.GPUType, c.GPUsPerNode))
	task := e.writeYAML(t, "mj.yaml", `name: pend
resources:
  infra: slurm/`+slurmAlias+`/gpu
  accelerators: H100:1
  cpus: 1
  memory: 1
run: echo managed-ran-on-$(hostname)
`)
	if !waitFor(30*time.Second, func() bool { return strings.TrimSpace(c.Run(t, "squeue -h -n blocker -o %T")) == "RUNNING" }) {
		t.Fatalf("the blocking job does not run: %s", c.Run(t, "squeue -u "+c.User))
	}
	e.must("jobs", "launch", "-y", "-d", task)
	var details string
	ok := waitFor(60*time.Second, func() bool {
		var rows []map[string]any
		r := e.exec(cmdTimeout, nil, "jobs", "queue", "-v", "-o", "json")
		if json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) == 0 {
			return false
		}
		details, _ = rows[0]["details"].(string)
		return details == "Launching (pending: Resources; partition: gpu)"
	})
	if !ok {
		t.Fatalf("details never showed the pending reason and partition; last: %q", details)
	}
	c.Run(t, "scancel -n blocker")
	var status string
	ok = waitFor(90*time.Second, func() bool {
		var rows []map[string]any
		r := e.exec(cmdTimeout, nil, "jobs", "queue", "-o", "json")
		if json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) == 0 {
			return false
		}
		status, _ = rows[0]["status"].(string)
		return status == "RUNNING" || status == "SUCCEEDED"
	})
	if !ok {
		t.Fatalf("the job did not run once the partition freed; status %q", status)
	}
	// Each reason the allocation waited on is an event of the job.
	var events []struct {
		Status string `json:"new_status"`
		Reason string `json:"reason"`
	}
	e.mustJSON(&events, "jobs", "logs", "--controller", "1", "-o", "json")
	var reasons []string
	for _, ev := range events {
		reasons = append(reasons, ev.Reason)
	}
	if !slices.Contains(reasons, "Launching (pending: Resources; partition: gpu)") || !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, "Launching (nodes allocated; Slurm job ") }) {
		t.Errorf("the job's events lack the pending reason or the allocation: %q", reasons)
	}
	r := e.exec(cmdTimeout, nil, "jobs", "logs", "--controller", "1", "--no-follow")
	if r.code != 0 && r.code != 101 { // 101: the job has not finished
		t.Fatalf("%s", r)
	}
	for _, want := range []string{"Launching (pending: ", "partition: gpu)", "Launching (nodes allocated; Slurm job "} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("controller log lacks %q:\n%s", want, r.out())
		}
	}
}

// BenchmarkSlurmExecDetach: `sky exec -d` on a 1-node Slurm cluster
// against `ssh login true` + `srun --overlap true` into the same
// allocation (goal: ratio ≤ 1.5).
func BenchmarkSlurmExecDetach(b *testing.B) {
	e, c := slurmEnv(b)
	b.Cleanup(func() { c.CancelAll(b) })
	task := e.writeYAML(b, "one.yaml", "resources:\n  infra: slurm\n  cpus: 1\n  memory: 1\n")
	e.launchOK(b, "-c", "bx", task)
	job := strings.TrimSpace(c.Run(b, "squeue -h -u "+c.User+" -o %i | head -n1"))
	base := func() time.Duration {
		start := time.Now()
		c.Run(b, "true")
		c.Run(b, "srun --overlap --jobid="+job+" --nodes=1 --ntasks=1 --quiet true")
		return time.Since(start)
	}
	var sum, baseSum time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum += timeRun(b, e.env, "", e.bin, "exec", "-d", "bx", "--", "true")
		b.StopTimer()
		baseSum += base()
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "exec", sum, baseSum, b.N)
}

// TestSlurmConvertRuns: every sbatch script of the converter's tests (the
// migration guide's examples and more) converts to a YAML `sky validate`
// accepts, and the scripts written to run here (bash and Slurm only) run
// on the test cluster once converted: a multi-node srun, a GPU job, an
// MPI-style launch kept on rank 0, an array and a dependency chain.
func TestSlurmConvertRuns(t *testing.T) {
	// One at a time with the other Slurm tests: one cluster per machine (slurmtest), whose queue they read whole.
	slurmHarness.parallel(t)
	e, c := slurmEnv(t)
	t.Cleanup(func() { c.CancelAll(t) })
	dir := t.TempDir()
	convert := func(out string, scripts ...string) result {
		t.Helper()
		r := e.must(append([]string{"slurm", "convert", "--cluster", slurmAlias, "--gpu-type", "H100", "-o", filepath.Join(dir, out)}, scripts...)...)
		e.must("validate", filepath.Join(dir, out))
		return r
	}
	all, _ := filepath.Glob("../infra/slurm/convert/testdata/*.sbatch")
	if len(all) < 10 {
		t.Fatalf("want the converter's scripts, found %v", all)
	}
	for _, s := range all {
		convert(strings.TrimSuffix(filepath.Base(s), ".sbatch")+".yaml", s)
	}

	// A cluster job: sky launch of the converted GPU script.
	convert("gpuranks.yaml", "testdata/slurm/gpu-ranks.sbatch")
	r := e.launchOK(t, "-c", "cv", filepath.Join(dir, "gpuranks.yaml"))
	for _, want := range []string{"gpu-rank 0 of 2 cuda=", "gpu-rank 1 of 2 cuda="} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("converted GPU job lacks %q:\n%s", want, r.out())
		}
	}
	e.must("down", "-y", "cv")

	// Managed jobs, as the converter says to submit them.
	convert("ranks.yaml", "../infra/slurm/convert/testdata/runnable-ranks.sbatch")
	convert("mpihost.yaml", "testdata/slurm/mpi-hostname.sbatch")
	convert("shard.yaml", "../infra/slurm/convert/testdata/runnable-array.sbatch")
	r = convert("chain.yaml", "testdata/slurm/prep.sbatch", "testdata/slurm/train.sbatch")
	if !strings.Contains(r.out(), "sky jobs launch") {
		t.Fatalf("no submit command printed:\n%s", r)
	}
	e.must("jobs", "launch", "-y", "-d", "-n", "ranks", filepath.Join(dir, "ranks.yaml"))
	e.must("jobs", "launch", "-y", "-d", "-n", "mpihost", filepath.Join(dir, "mpihost.yaml"))
	e.must("jobs", "launch", "-y", "-d", "-n", "shard", "--num-jobs", "3", filepath.Join(dir, "shard.yaml"))
	e.must("jobs", "launch", "-y", "-d", filepath.Join(dir, "chain.yaml"))
	var rows []map[string]any
	done := waitFor(4*time.Minute, func() bool {
		r := e.exec(cmdTimeout, nil, "jobs", "queue", "-o", "json")
		if json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) == 0 {
			return false
		}
		for _, row := range rows {
			if st, _ := row["status"].(string); st != "SUCCEEDED" {
				if strings.HasPrefix(st, "FAILED") || st == "CANCELLED" {
					return true
				}
				return false
			}
		}
		return true
	})
	if !done {
		t.Fatalf("the converted jobs did not finish: %v", rows)
	}
	want := map[string][]string{
		"ranks":           {"node 0 of 2 on ", "node 1 of 2 on ", "finished"},
		"mpihost":         {"task 0 on ", "task 3 on "},
		"shard":           {"shard "},
		"prep-then-train": {"prep done (chain)", "train ran after prep"},
	}
	seen, ids := map[string]int{}, map[string]bool{}
	for _, row := range rows {
		name, _ := row["job_name"].(string)
		if name == "" {
			name, _ = row["name"].(string)
		}
		id := fmt.Sprint(row["job_id"])
		if ids[id] {
			continue // a pipeline has a row per task
		}
		ids[id] = true
		if st := row["status"]; st != "SUCCEEDED" {
			t.Errorf("job %s (%s) ended %v:\n%s", id, name, st, e.exec(cmdTimeout, nil, "jobs", "logs", id, "--no-follow").out())
			continue
		}
		out := e.exec(cmdTimeout, nil, "jobs", "logs", id, "--no-follow").out()
		if name == "prep-then-train" {
			out += e.exec(cmdTimeout, nil, "jobs", "logs", id, "1", "--no-follow").out()
		}
		seen[name]++
		for _, w := range want[name] {
			if !strings.Contains(out, w) {
				t.Errorf("job %s (%s) log lacks %q:\n%s", id, name, w, out)
			}
		}
	}
	if seen["shard"] != 3 || seen["ranks"] != 1 || seen["mpihost"] != 1 || seen["prep-then-train"] != 1 {
		t.Errorf("jobs by name: %v (rows %v)", seen, rows)
	}
}

// TestSlurmPendingFailover: an allocation that stays pending past
// slurm.provision_timeout is cancelled and the launch fails over, partition
// by partition, then to the next option of the task.
func TestSlurmPendingFailover(t *testing.T) {
	// One at a time with the other Slurm tests: one cluster per machine (slurmtest), whose queue they read whole.
	slurmHarness.parallel(t)
	e, c := slurmEnv(t)
	t.Cleanup(func() { c.CancelAll(t) })
	if err := os.MkdirAll(filepath.Join(e.home, ".sky"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, ".sky", "config.yaml"), []byte("slurm:\n  provision_timeout: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Run(t, fmt.Sprintf("sbatch -p cpu -N%d -c%d --mem=100M -J blocker -o /dev/null --wrap 'sleep 600'", len(c.Nodes), c.CPUsPerNode))
	if !waitFor(30*time.Second, func() bool { return strings.TrimSpace(c.Run(t, "squeue -h -n blocker -o %T")) == "RUNNING" }) {
		t.Fatalf("the blocking job does not run: %s", c.Run(t, "squeue -u "+c.User))
	}
	e.must("check")
	task := e.writeYAML(t, "fo.yaml", `resources:
  ordered:
    - infra: slurm
      cpus: 1
      memory: 1
    - infra: local
      cpus: 1
run: echo ran-on-$(echo $SKYPILOT_CLUSTER_INFO | tr -d ' ')
`)
	r := e.launchOK(t, "-c", "pf", task)
	for _, want := range []string{"still pending after 3s in partition cpu", "still pending after 3s in partition gpu", `ran-on-{"cloud":"Local"`} {
		if !strings.Contains(strings.ReplaceAll(r.out(), `"cloud": "Local"`, `"cloud":"Local"`), want) {
			t.Errorf("launch output lacks %q:\n%s", want, r.out())
		}
	}
	if names := squeueNames(t, c); len(names) != 1 || names[0] != "blocker" {
		t.Errorf("pending allocations were not cancelled on failover: %v", names)
	}
	e.must("down", "-y", "pf")
}
