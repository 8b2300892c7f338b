package e2e

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
)

// TestJobsQueueReadsPages: a queue longer than one page (1,000 jobs) is
// listed whole by `sky jobs queue -a`, each job once and newest first,
// as JSON (streamed, with no request recorded) and as a table (in
// pages), and --limit above a page stops at the limit; the in-progress
// counts are over every job.
func TestJobsQueueReadsPages(t *testing.T) {
	parallel(t)
	const n = 2100
	e := managedEnv(t)
	head := e.jobsLaunch("-n", "head", "--", "sleep 600")[0]
	e.waitManaged([]int{head}, time.Minute, "RUNNING", func(m mjob) bool { return m.Status == "RUNNING" })
	ids := e.jobsLaunch("-n", "paged", "--num-jobs", strconv.Itoa(n), "--depends-on", strconv.Itoa(head), "--", "true")
	if len(ids) != n {
		t.Fatalf("submitted %d jobs, want %d", len(ids), n)
	}
	t.Cleanup(func() { e.run("jobs", "cancel", "-a", "-y") })
	want := append(slices.Clone(ids), head)
	slices.Sort(want)
	slices.Reverse(want)

	queueRequests := func() int {
		var recs []request
		e.mustJSON(&recs, "api", "status", "-a", "-o", "json")
		k := 0
		for _, r := range recs {
			if r.Name == "jobs.queue" || r.Name == "sky.jobs.queue" {
				k++
			}
		}
		return k
	}
	before := queueRequests()
	raw := e.must("jobs", "queue", "-a", "-v", "-o", "json").stdout
	var all []mjob
	if err := json.Unmarshal([]byte(raw), &all); err != nil {
		t.Fatalf("`sky jobs queue -a -v -o json`: %v", err)
	}
	// JSON is streamed (POST /jobs/queue/stream): no request is recorded.
	if asked := queueRequests() - before; asked != 0 {
		t.Errorf("`sky jobs queue -a -o json` of %d jobs made %d jobs.queue requests, want none (streamed)", n+1, asked)
	}
	// Printed as the CLI prints the records it decodes: byte for byte
	// what the paged listing printed.
	var recs []api.ManagedJobRecord
	if err := json.Unmarshal([]byte(raw), &recs); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	enc := json.NewEncoder(&again)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(recs); err != nil {
		t.Fatal(err)
	}
	if again.String() != raw {
		t.Errorf("`sky jobs queue -a -v -o json` is not printed as the CLI prints its records; first lines:\n%s\nwant\n%s", firstLines(raw, 30), firstLines(again.String(), 30))
	}
	got := make([]int, len(all))
	for i, r := range all {
		got[i] = r.JobID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("`sky jobs queue -a -o json` listed %d jobs (%v ... %v), want the %d submitted, newest first, each once",
			len(got), got[:min(3, len(got))], got[max(0, len(got)-3):], len(want))
	}

	var limited []mjob
	e.mustJSON(&limited, "jobs", "queue", "-l", "1500", "-o", "json")
	if len(limited) != 1500 || limited[0].JobID != want[0] || limited[1499].JobID != want[1499] {
		t.Fatalf("`sky jobs queue -l 1500 -o json`: %d jobs, want the newest 1500", len(limited))
	}

	before = queueRequests()
	out := e.must("jobs", "queue", "-a").stdout
	// The table reads pages: 2,101 jobs are 1,000, 1,000 and 101.
	if asked := queueRequests() - before; asked != 3 {
		t.Errorf("`sky jobs queue -a` of %d jobs made %d jobs.queue requests, want 3 pages", n+1, asked)
	}
	if !strings.Contains(out, "In progress tasks: "+strconv.Itoa(n)+" PENDING, 1 RUNNING") {
		t.Errorf("in-progress line does not count every job:\n%s", firstLines(out, 4))
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				rows++
			}
		}
	}
	if rows != n+1 || strings.Contains(out, "Showing the latest") {
		t.Errorf("`sky jobs queue -a` shows %d job rows, want %d and no \"Showing the latest\" line:\n%s", rows, n+1, firstLines(out, 4))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
