package agent_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/agent"
	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/proc"
)

// BenchmarkSubmitLatency compares `sky agent submit` on an UP node with
// the cost of starting `bash -c true`, measured in the same run; the
// ratio is the figure to watch.
func BenchmarkSubmitLatency(b *testing.B) {
	c := newCluster(b, 1, 2)
	env := proc.NodeEnv(os.Environ(), c.home(0), c.info.Nodes[0].InternalIP)
	spec, _ := json.Marshal(agentapi.JobSpec{Run: "true", CPUs: ptr(0.001)})
	run := func(name string, args []string, stdin string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		start := time.Now()
		out, err := cmd.Output()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("%s %v: %v %s", name, args, err, out)
		}
		return d
	}
	var submit, bash time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bash += run("bash", []string{"-c", "true"}, "")
		submit += run(c.sky, []string{"agent", "submit", "--json"}, string(spec))
	}
	b.ReportMetric(float64(submit.Microseconds())/float64(b.N), "submit-µs/op")
	b.ReportMetric(float64(bash.Microseconds())/float64(b.N), "bash-µs/op")
	b.ReportMetric(float64(submit)/float64(bash), "submit/bash")
}

// BenchmarkJobsStartedPerSecond submits 1,000 tiny jobs (default 0.5 CPU
// demand on a 2-CPU node, so 4 run at a time) and reports how many the
// scheduler started per second, from the first start to the last.
func BenchmarkJobsStartedPerSecond(b *testing.B) {
	c := newCluster(b, 1, 2)
	perIter := max(1000/b.N, 50)
	var ids []int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < perIter; k++ {
			id, err := agent.SubmitAt(c.home(0), agentapi.JobSpec{Run: "true"})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	last := ids[len(ids)-1]
	c.waitFor(last, "terminal", func(j agentapi.Job) bool { return j.Status.Terminal() })
	b.StopTimer()
	out, _ := c.agent(0, "", "queue", "--json")
	var jobs []agentapi.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		b.Fatal(err)
	}
	// FIFO: the last job finishing means all started; wait for the rest.
	deadline := time.Now().Add(time.Minute)
	for {
		done := 0
		for _, j := range jobs {
			if j.Status.Terminal() {
				done++
			}
		}
		if done == len(jobs) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
		out, _ = c.agent(0, "", "queue", "--json")
		_ = json.Unmarshal([]byte(out), &jobs)
	}
	var starts []float64
	for _, j := range jobs {
		if j.Status != agentapi.StatusSucceeded || j.StartAt == nil {
			b.Fatalf("job %+v", j)
		}
		starts = append(starts, *j.StartAt)
	}
	sort.Float64s(starts)
	span := starts[len(starts)-1] - starts[0]
	if span > 0 {
		b.ReportMetric(float64(len(starts)-1)/span, "jobs-started/s")
	}
}

// BenchmarkAgentStart times `sky agent start` of a 2-node cluster's head
// (spawning the daemon until it answers), with the SSH server for both
// nodes and without: the difference is what serving `ssh <cluster>` adds
// to every launch.
func BenchmarkAgentStart(b *testing.B) {
	for _, withSSH := range []bool{false, true} {
		name := "ssh=off"
		if withSSH {
			name = "ssh=on"
		}
		b.Run(name, func(b *testing.B) {
			c := newCluster(b, 2, 2)
			cfg := c.cfgs[0]
			if !withSSH {
				for i := range cfg.Nodes {
					cfg.Nodes[i].AgentSSHPort = 0
				}
			}
			body, _ := json.Marshal(cfg)
			var sum time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if out, code := c.agent(0, "", "stop-daemon", "--json"); code != 0 {
					b.Fatalf("stop-daemon: %d %s", code, out)
				}
				b.StartTimer()
				start := time.Now()
				if out, code := c.agent(0, string(body), "start", "--json"); code != 0 {
					b.Fatalf("start: %d %s", code, out)
				}
				sum += time.Since(start)
			}
			b.ReportMetric(float64(sum.Microseconds())/1000/float64(b.N), "start-ms/op")
		})
	}
}
