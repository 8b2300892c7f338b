package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rssBound is what the server may hold while it takes the largest array
// it admits: generous (it idles near 40 MiB), far below the gigabytes a
// billion-job request took.
const rssBound = 1 << 20 // KiB: 1 GiB

// TestHostileArrayIsBounded is issue 26's fourth attack: bob (no admin)
// asks for a billion managed jobs. The server must refuse at once, naming
// its limit and the config key that raises it, without its memory
// growing; the key, set in the server's config, is what is enforced; and
// an array of exactly the default limit is still taken with the server's
// RSS bounded. It logs the RSS figures for the note.
func TestHostileArrayIsBounded(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	pid := tm.serverPID()
	rss := func() int { return procKB(pid, "status", "VmRSS")["VmRSS"] }
	rss0 := rss()
	if rss0 == 0 {
		t.Fatalf("no VmRSS for the server's pid %d", pid)
	}

	r := tm.as("bob", "jobs", "launch", "-y", "-d", "-n", "huge", "--num-jobs", "1000000000", "--", "true")
	if r.code == 0 || !strings.Contains(r.out(), "--num-jobs 1000000000 is more than this API server's limit of 10000 jobs per array") ||
		!strings.Contains(r.out(), "jobs.max_array_size") {
		t.Fatalf("a billion jobs: want a refusal naming the limit and jobs.max_array_size:\n%s", r)
	}
	if after := rss(); after > rssBound {
		t.Errorf("server RSS %d KiB after the refused billion-job request (bound %d KiB)", after, rssBound)
	}
	if r := tm.as("bob", "jobs", "queue", "-o", "json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("the refused request left jobs behind: %s", r)
	}

	// A pipeline of more tasks than the limit is refused the same way.
	var docs []string
	for i := range 101 {
		docs = append(docs, fmt.Sprintf("name: t%d\nrun: \"true\"\n", i))
	}
	pipeline := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(pipeline, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	r = tm.as("bob", "jobs", "launch", "-y", "-d", "-n", "long-pipeline", pipeline)
	if r.code == 0 || !strings.Contains(r.out(), "limit of 100 tasks per pipeline") || !strings.Contains(r.out(), "jobs.max_pipeline_tasks") {
		t.Errorf("a pipeline of 101 tasks: want a refusal naming the limit and jobs.max_pipeline_tasks:\n%s", r)
	}

	// The key in the API server's config is the limit (read per request).
	cfg := filepath.Join(tm.home, ".sky", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("jobs:\n  max_array_size: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = tm.as("bob", "jobs", "launch", "-y", "-d", "-n", "six", "--num-jobs", "6", "--", "true")
	if r.code == 0 || !strings.Contains(r.out(), "limit of 5 jobs per array") {
		t.Errorf("6 jobs with jobs.max_array_size: 5 in the server's config: want a refusal naming 5:\n%s", r)
	}
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}

	// An array at the default limit waits behind a job that runs until
	// the test's cleanup cancels it, so the array launches no cluster.
	head := tm.as("bob", "jobs", "launch", "-y", "-o", "id", "-n", "head", "--", "sleep 3600")
	headID, err := strconv.Atoi(strings.TrimSpace(head.stdout))
	if head.code != 0 || err != nil {
		t.Fatalf("head job: %s", head)
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if v := int64(rss()); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	before := rss()
	r = tm.as("bob", "jobs", "launch", "-y", "-o", "id", "-n", "at-limit", "--num-jobs", "10000", "--depends-on", strconv.Itoa(headID), "--", "true")
	close(stop)
	wg.Wait()
	if r.code != 0 {
		t.Fatalf("an array of 10000 (the limit): %s\n%s", r, tm.serverLogTail())
	}
	if n := len(strings.Fields(r.stdout)); n != 10000 {
		t.Errorf("an array of 10000 printed %d job ids", n)
	}
	after := rss()
	t.Logf("server RSS: %.1f MiB at start, %.1f MiB before `--num-jobs 10000`, peak %.1f MiB while it was submitted (sampled every 20 ms), %.1f MiB after",
		float64(rss0)/1024, float64(before)/1024, float64(peak.Load())/1024, float64(after)/1024)
	if peak.Load() > rssBound || after > rssBound {
		t.Errorf("server RSS peaked at %d KiB (%d after) for an array at the limit; bound %d KiB", peak.Load(), after, rssBound)
	}
}
