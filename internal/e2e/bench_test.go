package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmarks time whole `sky` processes, as a user sees them, and
// report each against a trivial process started the same way in the same
// run: the ratio is the figure to compare across machines. Nothing here
// asserts a time.

// timeRun runs one command and returns its wall time, failing the
// benchmark unless it exits 0 (and prints want, when given).
func timeRun(b *testing.B, env []string, want string, bin string, args ...string) time.Duration {
	b.Helper()
	start := time.Now()
	r := runCmd(b, cmdTimeout, env, bin, args...)
	d := time.Since(start)
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		b.Fatalf("%s\n(want exit 0 and %q in stdout)", r, want)
	}
	return d
}

// report prints ms/op of the measured command and of its baseline, and
// their ratio.
func report(b *testing.B, what string, sum, base time.Duration, n int) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(ms(sum), what+"-ms/op")
	b.ReportMetric(ms(base), "baseline-ms/op")
	b.ReportMetric(float64(sum)/float64(base), "ratio")
}

// BenchmarkLaunchLocal: `sky launch -y -c b -- echo hi` of a 1-node task
// from no cluster to SUCCEEDED (the server already runs; down is outside
// the timer), against /bin/true.
func BenchmarkLaunchLocal(b *testing.B) {
	e := newEnv(b)
	e.must("check") // starts the server and records the enabled infras
	var sum, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("b%d", i)
		sum += timeRun(b, e.env, "hi", e.bin, "launch", "-y", "-c", name, "--", "echo hi")
		b.StopTimer()
		base += timeRun(b, e.env, "", "/bin/true")
		e.must("down", "-y", name)
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "launch", sum, base, b.N)
}

// BenchmarkExecDetach: `sky exec -d` submit latency on an UP cluster
// against `bash -c true`.
func BenchmarkExecDetach(b *testing.B) {
	e := newEnv(b)
	e.must("launch", "-y", "-c", "ex", "--", "true")
	var sum, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum += timeRun(b, e.env, "Job submitted", e.bin, "exec", "-d", "ex", "--", "true")
		b.StopTimer()
		base += timeRun(b, e.env, "", "/bin/bash", "-c", "true")
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "exec-d", sum, base, b.N)
}

// BenchmarkDryrunH100: `sky launch --dryrun --gpus H100:8` with fake AWS
// credentials enabled (catalog local), against /bin/true. One untimed call
// first: the server loads a cloud's catalog on its first query.
func BenchmarkDryrunH100(b *testing.B) {
	e := newEnv(b)
	fakeCloudHome(b, e)
	e.must("check")
	first := timeRun(b, e.env, "H100:8", e.bin, "launch", "--dryrun", "-y", "--gpus", "H100:8")
	var sum, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum += timeRun(b, e.env, "H100:8", e.bin, "launch", "--dryrun", "-y", "--gpus", "H100:8")
		b.StopTimer()
		base += timeRun(b, e.env, "", "/bin/true")
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "dryrun", sum, base, b.N)
	b.ReportMetric(float64(first.Microseconds())/1000, "first-call-ms")
}

// BenchmarkJobsPerSecond: 1,000 tiny jobs per iteration, submitted with
// `sky agent submit --json` on the head node (8 submitters) behind a gate
// job that holds both CPUs; when the gate opens, the head agent starts
// the queue as fast as it can (0.5 CPU each: four at a time on 2 CPUs).
// Reports jobs started per second from the queue's start_at times, and
// the submission rate.
func BenchmarkJobsPerSecond(b *testing.B) {
	const jobs, submitters = 1000, 8
	e := newEnv(b)
	e.must("launch", "-y", "-c", "jps", "--cpus", "2", "--", "true")
	head := e.nodeHome("jps", 0)
	headEnv := append(append([]string{}, e.env...), "HOME="+head)
	// Jobs carry the launching user, or `sky queue` (this user's jobs)
	// would not list them.
	me := e.queue("jps")[1]
	spec, _ := json.Marshal(map[string]any{"run": "true", "user": me.Username, "user_hash": me.UserHash})
	gate := filepath.Join(head, "gate-open")

	var started, submitted float64
	for i := 0; i < b.N; i++ {
		os.Remove(gate)
		g := e.must("exec", "-d", "jps", "--cpus", "2", "--", "while [ ! -e ~/gate-open ]; do sleep 0.01; done")
		var gateID int
		fmt.Sscanf(g.stdout[strings.Index(g.stdout, "ID: ")+4:], "%d", &gateID)
		e.waitJob("jps", gateID, 30*time.Second, "RUNNING", func(j job) bool { return j.Status == "RUNNING" })

		t0 := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ids []int
		for w := 0; w < submitters; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for k := w; k < jobs; k += submitters {
					r := runCmdStdin(b, cmdTimeout, headEnv, string(spec), e.node(), "agent", "submit", "--json")
					var out struct {
						JobID int `json:"job_id"`
					}
					if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.JobID == 0 {
						b.Errorf("agent submit: %s", r)
						return
					}
					mu.Lock()
					ids = append(ids, out.JobID)
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
		submitted += float64(len(ids)) / time.Since(t0).Seconds()
		if b.Failed() {
			b.FailNow()
		}
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			b.Fatal(err)
		}
		var q map[int]job
		if !waitFor(120*time.Second, func() bool {
			q = e.queue("jps")
			for _, id := range ids {
				if q[id].EndAt == nil {
					return false
				}
			}
			return true
		}) {
			b.Fatalf("%d jobs did not all finish within 120 s", len(ids))
		}
		var starts []float64
		for _, id := range ids {
			j := q[id]
			if j.Status != "SUCCEEDED" || j.StartAt == nil {
				b.Fatalf("job %d: %+v, want SUCCEEDED", id, j)
			}
			starts = append(starts, *j.StartAt)
		}
		sort.Float64s(starts)
		if span := starts[len(starts)-1] - starts[0]; span > 0 {
			started += float64(len(starts)-1) / span
		}
	}
	b.ReportMetric(started/float64(b.N), "jobs-started/s")
	b.ReportMetric(submitted/float64(b.N), "submits/s")
}
