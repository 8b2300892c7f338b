package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestManagedInvestigationGuide: every command of the job-investigation
// guide answers as the guide says, for jobs in the states it describes.
func TestManagedInvestigationGuide(t *testing.T) {
	t.Parallel()
	e := managedEnv(t)
	e.must("check")

	// `sky jobs queue -v -o json`: the five fields the guide reads, and
	// submitted_at, are there for every job, with the values the guide
	// explains.
	t.Run("queue-fields", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		running := e.jobsLaunch("-n", "g-running", "--", "sleep 600")[0]
		failed := e.jobsLaunch("-n", "g-failed", "--", "exit 7")[0]
		// A job whose launches fail: a file sits where the local
		// infrastructure would put its cluster's directory (the cluster
		// is named <name>-<id>; the job waits for a short one, so its id
		// is known before it launches).
		short := e.jobsLaunch("-n", "g-short", "--", "sleep 1")[0]
		backoff := e.jobsLaunch("-n", "g-backoff", "--depends-on", fmt.Sprint(short), "--", "true")[0]
		blocker := e.clusterDir(fmt.Sprintf("g-backoff-%d", backoff))
		if err := os.MkdirAll(filepath.Dir(blocker), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(blocker, []byte("in the way\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// A failed launch's teardown removes whatever sits at its
		// cluster's path (the file included), so the file is put back
		// until the test is done with the backoff.
		unblock := make(chan struct{})
		blocking := make(chan struct{})
		go func() {
			defer close(blocking)
			for {
				select {
				case <-unblock:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := os.Lstat(blocker); os.IsNotExist(err) {
					_ = os.WriteFile(blocker, []byte("in the way\n"), 0o600)
				}
			}
		}()
		stopBlocking := sync.OnceFunc(func() { close(unblock); <-blocking })
		t.Cleanup(stopBlocking)
		waiting := e.jobsLaunch("-n", "g-waiting", "--depends-on", fmt.Sprint(running), "--", "true")[0]

		e.waitManaged([]int{running}, 30*time.Second, "RUNNING", func(m mjob) bool { return m.Status == "RUNNING" })
		e.waitManaged([]int{failed}, 30*time.Second, "ended", ended)
		e.waitManaged([]int{backoff}, 30*time.Second, "in backoff", func(m mjob) bool {
			return m.ScheduleState != nil && *m.ScheduleState == "ALIVE_BACKOFF"
		})
		// The raw records: each field the guide names is present.
		var raw []map[string]any
		e.mustJSON(&raw, "jobs", "queue", "-v", "-o", "json")
		for _, r := range raw {
			for _, f := range []string{"status", "details", "failure_reason", "schedule_state", "recovery_count", "submitted_at"} {
				if _, ok := r[f]; !ok {
					t.Errorf("job %v: `sky jobs queue -v -o json` has no %q", r["job_id"], f)
				}
			}
		}
		q := e.jobsQueue()
		str := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		if m := q[mkey{running, 0}]; str(m.ScheduleState) != "ALIVE" || m.RecoveryCount != 0 || m.Details != nil || m.FailureReason != nil || m.SubmittedAt == 0 {
			t.Errorf("a running job: want ALIVE, recovery_count 0, no details, no failure_reason, a submitted_at: %v", m)
		}
		m := q[mkey{failed, 0}]
		if want := fmt.Sprintf("To see the details, run: sky jobs logs --controller %d", failed); m.Status != "FAILED" || str(m.FailureReason) != want || str(m.Details) != "Failure: "+want {
			t.Errorf("a failed job: want FAILED, failure_reason %q and details \"Failure: ...\": %v", want, m)
		}
		m = q[mkey{backoff, 0}]
		if !strings.HasPrefix(str(m.Details), "In backoff, waiting for resources") || m.Status != "STARTING" && m.Status != "PENDING" {
			t.Errorf("a job whose launches fail: want details \"In backoff, waiting for resources\": %v", m)
		}
		if m := q[mkey{waiting, 0}]; m.Status != "PENDING" || str(m.ScheduleState) != "WAITING" || !strings.HasPrefix(str(m.Details), "Waiting for") {
			t.Errorf("a job waiting to be scheduled: want PENDING, WAITING, details \"Waiting for ...\": %v", m)
		}
		// The guide's next step for backoff: the controller log shows the
		// last failure.
		ctl := e.jobsLogs(101, fmt.Sprint(backoff), "--controller", "--no-follow").stdout
		if !strings.Contains(ctl, "not a directory") {
			t.Errorf("the controller log of a job in backoff does not show why its launch failed:\n%s", ctl)
		}
		stopBlocking()
		if err := os.Remove(blocker); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		e.must("jobs", "cancel", "-y", fmt.Sprint(running), fmt.Sprint(backoff))
		q = e.waitManaged([]int{running, backoff, waiting}, 30*time.Second, "ended", ended)
		for _, id := range []int{running, backoff, waiting} {
			if m := q[mkey{id, 0}]; m.Status != "CANCELLED" {
				t.Errorf("want CANCELLED: %v", m)
			}
		}
	})

	// `sky jobs logs N --tail 100 --no-follow`: the last 100 lines of
	// what the task printed, and out.
	t.Run("logs-tail", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		id := e.jobsLaunch("-n", "g-tail", "--", "for i in $(seq 1 250); do echo line-$i; done")[0]
		e.waitManaged([]int{id}, 30*time.Second, "ended", ended)
		out := e.jobsLogs(0, fmt.Sprint(id), "--tail", "100", "--no-follow").stdout
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if i := strings.Index(l, "line-"); i >= 0 {
				got = append(got, l[i:])
			}
		}
		// The task's last 100 lines, then the closing "Job finished" line
		// on top of them, as `sky logs --tail` on a cluster.
		if n := len(got); n != 100 || last(got) != "line-250" || got[0] != "line-151" ||
			len(strings.Split(strings.TrimRight(out, "\n"), "\n")) != 101 || !strings.Contains(out, "Job finished (status: SUCCEEDED)") {
			t.Errorf("--tail 100 gave %d task lines (%v ... %v), want line-151 to line-250 and the closing line:\n%s", len(got), first(got), last(got), out)
		}
		if all := e.jobsLogs(0, fmt.Sprint(id), "--no-follow").stdout; strings.Count(all, "line-") != 250 {
			t.Errorf("--no-follow without --tail should print the whole log (250 lines):\n%s", all)
		}
	})

	// `sky jobs logs N --controller --no-follow`: what the controller did
	// — the launch, the cluster, the end — and, as JSON, the timeline.
	t.Run("logs-controller", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		id := e.jobsLaunch("-n", "g-ctl", "--", "echo hi")[0]
		e.waitManaged([]int{id}, 30*time.Second, "ended", ended)
		out := e.jobsLogs(0, fmt.Sprint(id), "--controller", "--no-follow").stdout
		cl := fmt.Sprintf("g-ctl-%d", id)
		for _, want := range []string{"submitted", "Launching task 0 (g-ctl)", "Cluster launched: " + cl, "is RUNNING", "SUCCEEDED", "Cluster " + cl + " torn down"} {
			if !strings.Contains(out, want) {
				t.Errorf("the controller log lacks %q:\n%s", want, out)
			}
		}
		r := e.jobsLogs(0, fmt.Sprint(id), "--controller", "--no-follow", "-o", "json")
		var ev struct {
			Events []struct {
				Status string `json:"new_status"`
				Reason string `json:"reason"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &ev); err != nil {
			// A bare list is as good.
			if err2 := json.Unmarshal([]byte(r.stdout), &ev.Events); err2 != nil {
				t.Fatalf("--controller -o json is not JSON (%v):\n%s", err, r)
			}
		}
		var seq []string
		for _, x := range ev.Events {
			seq = append(seq, x.Status)
		}
		if len(seq) < 3 || seq[0] != "PENDING" || seq[len(seq)-1] != "SUCCEEDED" {
			t.Errorf("the timeline should run from PENDING to SUCCEEDED: %v\n%s", seq, r.stdout)
		}
	})

	// `sky jobs logs N` blocks until the job ends, and exits 0, 100 or
	// 103 as it ended.
	t.Run("logs-block", func(t *testing.T) {
		parallel(t)
		e := e.as(t)
		ok := e.jobsLaunch("-n", "g-ok", "--", "sleep 3; echo done-ok")[0]
		bad := e.jobsLaunch("-n", "g-bad", "--", "sleep 3; exit 9")[0]
		gone := e.jobsLaunch("-n", "g-gone", "--", "sleep 600")[0]
		type res struct {
			r   result
			end time.Time
		}
		var wg sync.WaitGroup
		got := map[int]res{}
		var mu sync.Mutex
		start := time.Now()
		for _, id := range []int{ok, bad, gone} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.exec(cmdTimeout, nil, "jobs", "logs", fmt.Sprint(id))
				mu.Lock()
				got[id] = res{r, time.Now()}
				mu.Unlock()
			}()
		}
		e.waitManaged([]int{gone}, 30*time.Second, "RUNNING", func(m mjob) bool { return m.Status == "RUNNING" })
		time.Sleep(4 * time.Second)
		mu.Lock()
		early, done := got[gone]
		mu.Unlock()
		if done {
			t.Errorf("sky jobs logs of a running job returned before the job ended: %s", early.r)
		}
		cancelAt := time.Now()
		e.must("jobs", "cancel", "-y", fmt.Sprint(gone))
		wg.Wait()
		for id, want := range map[int]int{ok: 0, bad: 100, gone: 103} {
			if r := got[id].r; r.code != want {
				t.Errorf("sky jobs logs %d: want exit %d:\n%s", id, want, r)
			}
		}
		if g := got[gone]; g.end.Before(cancelAt) {
			t.Errorf("sky jobs logs %d ended %s after it started, before the job was cancelled", gone, g.end.Sub(start))
		}
		if !strings.Contains(got[ok].r.stdout, "done-ok") {
			t.Errorf("sky jobs logs %d did not stream the task's output:\n%s", ok, got[ok].r)
		}
		if got[ok].end.Sub(start) < 2*time.Second {
			t.Errorf("sky jobs logs %d returned after %s, before its 3 s task could end", ok, got[ok].end.Sub(start))
		}
		// And 102 for a job that does not exist.
		e.jobsLogs(102, "9999", "--no-follow")
	})

	t.Cleanup(func() {
		if !t.Failed() {
			e.requireNoClusters()
		}
	})
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}
