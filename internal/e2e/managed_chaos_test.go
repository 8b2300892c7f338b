package e2e

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/paths"
)

// tryJobsQueue is `sky jobs queue -a -u -v -o json` once; ok is false
// when the command failed (a server killed under it).
func (e *skyEnv) tryJobsQueue() (map[int]mjob, result, bool) {
	return tryJSONRows(e, func(j mjob) int { return j.JobID }, "jobs", "queue", "-a", "-u", "-v", "-o", "json")
}

// queueByID is tryJobsQueue retried while a just-killed server is being
// replaced (the first command after a kill -9 may meet a reset).
func (e *skyEnv) queueByID() map[int]mjob {
	e.t.Helper()
	var last result
	for try := 0; try < 10; try++ {
		q, r, ok := e.tryJobsQueue()
		if ok {
			return q
		}
		last = r
		time.Sleep(200 * time.Millisecond)
	}
	e.t.Fatalf("sky jobs queue kept failing: %s\n%s", last, e.serverLogTail())
	return nil
}

// killServer kill -9s the API server and waits until it is dead; false
// when no server was running.
func (e *skyEnv) killServer(t testing.TB) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "server.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || len(procsWithEnvPid(pid, e.home)) == 0 || !alive(pid) {
		return false
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return false
	}
	if !waitFor(10*time.Second, func() bool { return !alive(pid) }) {
		t.Fatalf("API server pid %d still alive 10s after kill -9", pid)
	}
	return true
}

// runMarks reads the lines a job's runs appended: "start PID" when a run
// began, "done PID" when it ran to its end.
func runMarks(dir string, id int) []string {
	b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(id)))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// runningNow says whether a job's latest run has started and not ended.
func runningNow(lines []string) bool {
	return len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], "start ")
}

// chaosJob is one of TestManagedJobsServerChaos's jobs and what the test
// does to it.
type chaosJob struct {
	name        string
	id          int
	preempt     bool // its node is killed once while it runs
	cancelRun   bool // cancelled while it runs
	cancelRec   bool // cancelled once its preemption was seen (RECOVERING)
	cancelEarly bool // cancelled right after submission
	// notBefore spreads the preemptions and cancels over the run, so
	// that each has kills of its own.
	notBefore   time.Duration
	preempted   bool
	preemptAt   time.Time
	cancelled   bool
	checkedGone bool
}

// freshRun says whether a job's latest run began less than within ago:
// a cancel aimed at a run must reach it well before it ends, or the run
// may rightly finish under a job that then ends CANCELLED.
func freshRun(dir string, id int, lines []string, within time.Duration) bool {
	st, err := os.Stat(filepath.Join(dir, strconv.Itoa(id)))
	return err == nil && runningNow(lines) && time.Since(st.ModTime()) < within
}

// TestManagedJobsServerChaos: ten managed jobs run on the local
// infrastructure while the API server, which is their controller, is
// killed -9 twenty times — during their submissions and launches, right
// after a node of four of them is preempted (while the controller sees
// it, moves them to RECOVERING and relaunches), and right after four are
// cancelled (one while it is recovering, one before it ran). After each
// kill the next command starts a new server. Every job must end where it
// would have ended without the kills (SUCCEEDED, or CANCELLED when
// cancelled), with one recovery per preemption and none otherwise; no
// job may run twice at once or run to its end twice; at the end no
// cluster, node directory or node process is left. SKYGO_CRASH_SEED
// replays a run's kill moments.
func TestManagedJobsServerChaos(t *testing.T) {
	parallel(t)
	const (
		numJobs = 10
		kills   = 20
		runFor  = 12 // seconds each run sleeps
		// cancelWithin is how far into a run a cancel is still aimed at
		// it: the cancel and its teardown take well under the rest.
		cancelWithin = (runFor - 5) * time.Second
	)
	began := time.Now()
	e := managedEnv(t)
	seed := time.Now().UnixNano()
	if s := os.Getenv("SKYGO_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SKYGO_CRASH_SEED=%q: %v", s, err)
		}
	}
	t.Logf("kill moments from seed %d (replay with SKYGO_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	marks := t.TempDir()
	run := fmt.Sprintf(`echo "start $$" >> "$MARKS/$SKYPILOT_MANAGED_JOB_ID"; sleep %d; echo "done $$" >> "$MARKS/$SKYPILOT_MANAGED_JOB_ID"`, runFor)

	jobs := make([]*chaosJob, numJobs)
	for i := range jobs {
		jobs[i] = &chaosJob{name: fmt.Sprintf("chaos%d", i)}
	}
	for k, i := range []int{0, 1, 2, 3} {
		jobs[i].preempt = true
		jobs[i].notBefore = time.Duration(k) * 1500 * time.Millisecond
	}
	jobs[3].cancelRec = true
	jobs[4].cancelRun, jobs[5].cancelRun = true, true
	jobs[4].notBefore, jobs[5].notBefore = 750*time.Millisecond, 3750*time.Millisecond
	jobs[6].cancelEarly = true

	e.must("api", "start")
	killed := 0
	var killLog []string
	// q is the queue as last seen: a kill's log line says what the jobs
	// were doing.
	var q map[int]mjob
	kill := func(why string) {
		if killed >= kills {
			return
		}
		if e.killServer(t) {
			killed++
			counts := map[string]int{}
			for _, j := range q {
				counts[j.Status]++
			}
			killLog = append(killLog, fmt.Sprintf("%.1fs %s %v", time.Since(began).Seconds(), why, counts))
		}
	}
	// pending is the next kill at a random moment, if any.
	var pendingAt time.Time
	schedule := func(within time.Duration) {
		if killed < kills && pendingAt.IsZero() {
			pendingAt = time.Now().Add(time.Duration(rng.Int63n(int64(within))))
		}
	}

	// Submissions, with kills among them. A submission the kill cut off
	// either made its job or did not; the queue says which, and a
	// missing one is submitted again.
	for round := 0; ; round++ {
		q := e.queueByID()
		byName := map[string][]int{}
		for _, j := range q {
			byName[j.JobName] = append(byName[j.JobName], j.JobID)
		}
		var missing []*chaosJob
		for _, c := range jobs {
			switch ids := byName[c.name]; len(ids) {
			case 0:
				missing = append(missing, c)
			case 1:
				c.id = ids[0]
			default:
				t.Fatalf("submission of %s made %d jobs: %v", c.name, len(ids), ids)
			}
		}
		if len(missing) == 0 {
			break
		}
		if round == 5 {
			t.Fatalf("%d jobs still not submitted after %d rounds", len(missing), round)
		}
		var wg sync.WaitGroup
		for _, c := range missing {
			wg.Add(1)
			go func(c *chaosJob) {
				defer wg.Done()
				e.exec(cmdTimeout, nil, "jobs", "launch", "-y", "-d", "-n", c.name, "--infra", "local",
					"--env", "MARKS="+marks, "--", run)
			}(c)
		}
		if round < 2 {
			time.Sleep(time.Duration(rng.Int63n(int64(time.Second))))
			kill(fmt.Sprintf("during submission round %d", round))
		}
		wg.Wait()
	}
	byID := map[int]*chaosJob{}
	for _, c := range jobs {
		byID[c.id] = c
	}
	t.Logf("%d jobs submitted in %.1fs, %d kills so far", numJobs, time.Since(began).Seconds(), killed)
	// The scheduler grants the launches at once: a kill within the next
	// few hundred ms cuts some of them off.
	time.Sleep(time.Duration(rng.Int63n(int64(400 * time.Millisecond))))
	kill("during launches")
	submitted := time.Now()

	// What must never be seen, at any moment: two runs of one job at
	// once (two sleeps of its run script alive).
	twinSince := map[string]time.Time{}
	twinReported := map[string]bool{}
	checkDuplicates := func() {
		alive := map[string][]proc{}
		for _, p := range procsWithEnv("MARKS=" + marks) {
			if strings.HasPrefix(p.cmdline, "sleep ") {
				env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
				for _, kv := range strings.Split(string(env), "\x00") {
					if id, ok := strings.CutPrefix(kv, "SKYPILOT_MANAGED_JOB_ID="); ok {
						alive[id] = append(alive[id], p)
					}
				}
			}
		}
		for id, ps := range alive {
			if len(ps) > 1 {
				t.Errorf("job %s runs %d times at once: %v", id, len(ps), ps)
			}
		}
		// Nor two agents for one node: a cluster made again over one
		// whose processes a cut-off teardown left.
		agents := map[string][]proc{}
		for _, p := range procsWithEnv("SKYGO_LOCAL_NODE=" + e.home) {
			if !strings.HasSuffix(p.cmdline, "agent daemon") {
				continue
			}
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
			for _, kv := range strings.Split(string(env), "\x00") {
				if node, ok := strings.CutPrefix(kv, "SKYGO_LOCAL_NODE="); ok {
					agents[node] = append(agents[node], p)
				}
			}
		}
		// An orphan stops by itself within its lock watch's tick plus the
		// time to stop its jobs, so a second agent is an error only once
		// it has run on beside the other for longer than that.
		for node, ps := range agents {
			if len(ps) < 2 {
				continue
			}
			key := fmt.Sprint(node, ps)
			first, seen := twinSince[key]
			if !seen {
				twinSince[key] = time.Now()
				t.Logf("node %s runs %d agents for now: %v", node, len(ps), ps)
			} else if time.Since(first) > 3*time.Second && !twinReported[key] {
				twinReported[key] = true
				t.Errorf("node %s has run %d agents for %.1fs: %v", node, len(ps), time.Since(first).Seconds(), ps)
			}
		}
	}

	// A cancel returns once it is recorded; the teardown follows, and a
	// kill a moment later cuts it off.
	cancel := func(c *chaosJob, why string) {
		if r := e.exec(cmdTimeout, nil, "jobs", "cancel", "-y", strconv.Itoa(c.id)); r.code == 0 {
			c.cancelled = true
			time.Sleep(time.Duration(rng.Int63n(int64(150 * time.Millisecond))))
			kill(why)
		}
	}
	// After a preemption the controller sees the lost cluster within its
	// monitor period; once the job leaves RUNNING (or has recovered
	// between two looks) it is relaunching, and a kill a moment later
	// cuts the recovery off. The loop looks more often meanwhile.
	awaiting := map[*chaosJob]bool{}
	killInRecovery := func(c *chaosJob, j mjob) {
		if j.Status != "RUNNING" || j.RecoveryCount > 0 || time.Since(c.preemptAt) > 5*time.Second {
			delete(awaiting, c)
			time.Sleep(time.Duration(rng.Int63n(int64(150 * time.Millisecond))))
			kill(fmt.Sprintf("while job %d is %s", c.id, j.Status))
		}
	}

	deadline := time.Now().Add(75 * time.Second)
	for {
		if time.Now().After(deadline) {
			var lines []string
			for _, c := range jobs {
				lines = append(lines, q[c.id].String())
			}
			t.Fatalf("jobs not all ended after %.0fs (%d kills: %v):\n%s\n%s", time.Since(began).Seconds(), killed, killLog, strings.Join(lines, "\n"), e.serverLogTail())
		}
		if !pendingAt.IsZero() && time.Now().After(pendingAt) {
			kill("at a random moment")
			pendingAt = time.Time{}
		}
		var ok bool
		if q, _, ok = e.tryJobsQueue(); !ok {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		checkDuplicates()
		done := 0
		for _, c := range jobs {
			j, found := q[c.id]
			if !found {
				t.Fatalf("job %d (%s) is no longer in the queue", c.id, c.name)
			}
			if ended(j) {
				done++
				if !c.checkedGone {
					c.checkedGone = true
					for _, p := range procsWithEnv("MARKS=" + marks) {
						env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
						st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
						if !strings.Contains(string(env), "SKYPILOT_MANAGED_JOB_ID="+strconv.Itoa(c.id)+"\x00") {
							continue
						}
						node := ""
						for _, kv := range strings.Split(string(env), "\x00") {
							if strings.HasPrefix(kv, "SKYGO_LOCAL_NODE=") {
								node = kv
							}
						}
						t.Errorf("%s ended but its process %s lives on (%s; stat %s)", j, p, node, st)
					}
				}
				continue
			}
			if awaiting[c] {
				killInRecovery(c, j)
			}
			lines := runMarks(marks, c.id)
			if time.Since(submitted) < c.notBefore {
				continue
			}
			switch {
			case c.cancelEarly && !c.cancelled:
				cancel(c, fmt.Sprintf("right after job %d was cancelled while %s", c.id, j.Status))
			case c.preempt && !c.preempted && j.Status == "RUNNING" && runningNow(lines):
				e.preemptNode(fmt.Sprintf("%s-%d", c.name, c.id))
				c.preempted, c.preemptAt = true, time.Now()
				awaiting[c] = true
			case c.cancelRec && c.preempted && !c.cancelled && (j.Status == "RECOVERING" || (countPrefix(lines, "start ") > 1 && freshRun(marks, c.id, lines, cancelWithin))):
				// Its recovery may be over before a poll sees it: then
				// the cancel meets its second run, which has just begun
				// (a cancel meeting a run that already ended would rightly
				// leave a finished run behind a CANCELLED job).
				cancel(c, fmt.Sprintf("right after job %d was cancelled while %s", c.id, j.Status))
			case c.cancelRun && !c.cancelled && j.Status == "RUNNING" && freshRun(marks, c.id, lines, cancelWithin):
				cancel(c, fmt.Sprintf("right after job %d was cancelled while %s", c.id, j.Status))
			}
		}
		if done == numJobs {
			break
		}
		// The kills not aimed at a step go to random moments of
		// whatever is going on.
		schedule(900 * time.Millisecond)
		if len(awaiting) > 0 {
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("all jobs ended %.1fs after the start; %d kills: %s", time.Since(began).Seconds(), killed, strings.Join(killLog, "; "))
	if killed < kills {
		t.Errorf("only %d of %d kills happened before the jobs ended: the schedule is too slow for the jobs", killed, kills)
	}

	for _, c := range jobs {
		j := q[c.id]
		lines := runMarks(marks, c.id)
		want := "SUCCEEDED"
		// A cancel the test could not aim in time (a loaded machine) is
		// not made: that job must succeed.
		if (c.cancelRun || c.cancelRec || c.cancelEarly) && !c.cancelled {
			t.Logf("%s: its cancel found no moment early enough in a run; it must succeed", j)
		}
		if c.cancelled {
			want = "CANCELLED"
		}
		if j.Status != want {
			t.Errorf("%s: want %s\n%s", j, want, e.controllerLog(c.id))
			continue
		}
		wantRecoveries := 0
		if c.preempt && c.preempted {
			wantRecoveries = 1
		}
		if c.cancelRec {
			// Cancelled while recovering: it may have run again first.
			wantRecoveries = j.RecoveryCount
		}
		if j.RecoveryCount != wantRecoveries {
			t.Errorf("%s: want %d recoveries (preempted %v)\n%s", j, wantRecoveries, c.preempted, e.controllerLog(c.id))
		}
		starts, dones := countPrefix(lines, "start "), countPrefix(lines, "done ")
		// A run per attempt: the first and one per recovery; a cancelled
		// job may be cancelled before its attempt ran. A job cancelled
		// while recovering may also have started the recovered run before
		// the controller counted the recovery (the count moves when the
		// task is RUNNING again), so one more start is allowed there.
		maxStarts := j.RecoveryCount + 1
		if c.cancelRec && c.cancelled {
			maxStarts++
		}
		if starts > maxStarts || (want == "SUCCEEDED" && starts != j.RecoveryCount+1) {
			t.Errorf("%s: %d runs started, want at most %d (one per attempt): %q\n%s", j, starts, maxStarts, lines, e.controllerLog(c.id))
		}
		wantDones := 0
		if want == "SUCCEEDED" {
			wantDones = 1
		}
		if dones != wantDones || (wantDones == 1 && !strings.HasPrefix(lines[len(lines)-1], "done ")) {
			t.Errorf("%s: %d runs ran to their end, want %d: %q\n%s", j, dones, wantDones, lines, e.controllerLog(c.id))
		}
	}

	// Nothing left: no cluster record, no node directory, no process of
	// any node.
	if st := e.status(false); len(st) > 0 {
		t.Errorf("clusters left after every job ended: %v", st)
	}
	if ents, _ := os.ReadDir(filepath.Join(paths.LocalInfra(e.home), "clusters")); len(ents) > 0 {
		var names []string
		for _, d := range ents {
			names = append(names, d.Name())
		}
		sort.Strings(names)
		// What is in them says who wrote it after the teardown.
		var files []string
		for _, n := range names {
			_ = filepath.WalkDir(filepath.Join(paths.LocalInfra(e.home), "clusters", n), func(path string, d fs.DirEntry, err error) error {
				if err == nil && len(files) < 40 {
					if fi, err := d.Info(); err == nil {
						files = append(files, fmt.Sprintf("%s %s", fi.ModTime().Format("15:04:05.000"), path))
					}
				}
				return nil
			})
		}
		t.Errorf("local cluster directories left: %v\n%s", names, strings.Join(files, "\n"))
	}
	var left []proc
	if !waitFor(5*time.Second, func() bool { left = procsWithEnv("SKYGO_LOCAL_NODE="); return len(nodeProcsOf(left, e.home)) == 0 }) {
		t.Errorf("node processes left after every job ended: %v", nodeProcsOf(left, e.home))
	}
	t.Logf("test took %.1fs", time.Since(began).Seconds())
}

// nodeProcsOf keeps the processes whose node directory is under home.
func nodeProcsOf(ps []proc, home string) []proc {
	var out []proc
	for _, p := range ps {
		if len(procsWithEnvPid(p.pid, "SKYGO_LOCAL_NODE="+home)) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// controllerLog is `sky jobs logs --controller`'s file for a job, to
// explain a failure.
func (e *skyEnv) controllerLog(id int) string {
	b, err := os.ReadFile(filepath.Join(e.home, "sky_logs", "jobs_controller", strconv.Itoa(id)+".log"))
	if err != nil {
		return "(no controller log)"
	}
	out := "--- controller log of job " + strconv.Itoa(id) + ":\n" + string(b)
	if sl, err := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "server.log")); err == nil {
		out += "--- server.log lines of it:\n"
		for _, l := range strings.Split(string(sl), "\n") {
			if strings.Contains(l, fmt.Sprintf("-%d\"", id)) || strings.Contains(l, fmt.Sprintf("-%d ", id)) || strings.Contains(l, fmt.Sprintf("\"%d\"", id)) || strings.Contains(l, "panic") {
				out += l + "\n"
			}
		}
	}
	return out
}
