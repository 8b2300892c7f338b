package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/testutil"
	"github.com/skygo/skygo/internal/testutil/pgtest"
)

// The hammer (issue 9, point 1): many goroutines, and on PostgreSQL two
// API servers, throw exec / stop / start / status -r / down at one
// cluster at once. Whatever the interleaving, the end must be a state some
// serial order of those operations could give (UP, STOPPED or gone, and
// the nodes agreeing), every status transition must be recorded once, in
// one unbroken chain, and cost-report's usage intervals must follow it.
//
// A run is a few rounds: one without down, which ends with the cluster
// alive (UP or STOPPED, checked against its nodes), then rounds in which
// every server is asked for a down late in the round, each of which must
// leave nothing behind; the cluster is launched anew before each of those
// after the first. SKYGO_HAMMER_SEED replays the random choices of a run
// (the seed is logged); the interleaving itself is up to the machine.

const hammerCluster = "hc"

// TestHammerPostgres: two servers sharing one HOME (so both see the same
// local nodes) and one PostgreSQL database.
func TestHammerPostgres(t *testing.T) {
	// Sequential: a storm of concurrent clients by design; alone, neither it nor a neighbour's bounded waits absorb the other's load.
	if pgtest.Skipped() {
		t.Skip(pgtest.SkipEnv + "=1")
	}
	base, stopPG, err := pgtest.Start()
	if err != nil {
		t.Fatalf("PostgreSQL test server: %v", err)
	}
	// Registered before newEnv: cleanups run last-in first-out, so the
	// database outlives both servers' shutdown and the harness's `down -a`.
	t.Cleanup(stopPG)
	uri := pgtest.NewDatabase(t, base)
	e := newEnv(t)
	e.env = append(e.env, state.EnvDBURI+"="+uri)

	// Server B first: both servers write ~/.sky/skygo/api_server/server.pid
	// of their shared HOME, and the harness's cleanup stops the server
	// named there with `sky api stop`. Server A, auto-started afterwards,
	// writes it last; B is stopped by its own PID.
	portB := testutil.FreePort(t)
	for portB == e.port {
		// Nothing listens on the harness's port yet, so the kernel may
		// hand it out again.
		portB = testutil.FreePort(t)
	}
	pidB := startForegroundServer(t, e, portB)
	h := newHammer(t, e, uri, e.port, portB)
	h.launch()
	if b, err := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "server.pid")); err != nil || strings.TrimSpace(string(b)) == strconv.Itoa(pidB) {
		t.Fatalf("server.pid should name the auto-started server A, not B (pid %d): %q, %v", pidB, b, err)
	}
	h.round("no down", 8, 24, false)
	h.round("with downs", 8, 16, true)
	// More incarnations of the same name: downs racing the rest are where
	// servers trip over each other, and nothing of an earlier incarnation
	// may show up in a later one's history.
	for i := 2; i <= 4; i++ {
		h.launch()
		h.round(fmt.Sprintf("incarnation %d, with downs", i), 8, 10, true)
	}
}

// TestHammerSQLite: the same hammer on the default SQLite store and one
// server, so it also runs where PostgreSQL is not installed.
func TestHammerSQLite(t *testing.T) {
	// Sequential: a storm of concurrent clients by design; alone, neither it nor a neighbour's bounded waits absorb the other's load.
	e := newEnv(t)
	h := newHammer(t, e, "", e.port)
	h.launch()
	h.round("no down", 6, 10, false)
	h.round("with downs", 6, 8, true)
	h.launch()
	h.round("incarnation 2, with downs", 6, 8, true)
}

type hammer struct {
	t      *testing.T
	e      *skyEnv
	dbURI  string // "" is the env's SQLite file
	ports  []int  // the API servers; a CLI call picks one at random
	seed   uint64
	rounds int
	hash   string   // cluster_hash of the cluster's current incarnation
	past   []string // cluster_hash of the earlier ones

	mu  sync.Mutex
	ops []hammerOp
}

// hammerOp is one finished CLI call of a round.
type hammerOp struct {
	verb string
	code int
	msg  string // the error line when it failed
}

func newHammer(t *testing.T, e *skyEnv, dbURI string, ports ...int) *hammer {
	seed := rand.Uint64()
	if v := os.Getenv("SKYGO_HAMMER_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SKYGO_HAMMER_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("hammer seed %d (SKYGO_HAMMER_SEED=%d replays the random choices)", seed, seed)
	return &hammer{t: t, e: e, dbURI: dbURI, ports: ports, seed: seed}
}

// sky runs one CLI call against the server on port.
func (h *hammer) sky(port int, args ...string) result {
	h.t.Helper()
	return h.e.exec(cmdTimeout, []string{fmt.Sprintf("SKYPILOT_API_SERVER_LOCAL_PORT=%d", port)}, args...)
}

// mustSky is sky that fails the test unless the call exits 0.
func (h *hammer) mustSky(port int, args ...string) result {
	h.t.Helper()
	r := h.sky(port, args...)
	if r.code != 0 {
		h.t.Fatalf("server on port %d: %s\n%s", port, r, h.e.serverLogTail())
	}
	return r
}

// launch makes the two-node cluster the rounds work on (again, after a
// round that ended with it gone).
func (h *hammer) launch() {
	if h.hash != "" {
		h.past = append(h.past, h.hash)
	}
	// The servers take turns, so that each one launches over the record
	// another one's down removed.
	port := h.ports[len(h.past)%len(h.ports)]
	h.mustSky(port, "launch", "-y", "-c", hammerCluster, "--num-nodes", "2", "--", "true")
	recs := h.records(port)
	c, ok := recs[hammerCluster]
	if !ok || c.Status != "UP" || c.ClusterHash == "" {
		h.t.Fatalf("after launch: %+v, want %s UP with a cluster hash", recs, hammerCluster)
	}
	h.hash = c.ClusterHash
}

// hammerRecord is what the checks read of `sky status -o json`.
type hammerRecord struct {
	Name        string `json:"name"`
	Status      string `json:"status"`
	ClusterHash string `json:"cluster_hash"`
}

func (h *hammer) records(port int, extra ...string) map[string]hammerRecord {
	h.t.Helper()
	r := h.mustSky(port, append([]string{"status", "-o", "json"}, extra...)...)
	var recs []hammerRecord
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		h.t.Fatalf("status -o json on port %d is not a JSON list (%v):\n%s", port, err, r.stdout)
	}
	m := map[string]hammerRecord{}
	for _, c := range recs {
		m[c.Name] = c
	}
	return m
}

// The operations of a round and how often each is picked: mostly work
// and lifecycle changes, some observers.
var hammerMix = []struct {
	weight int
	args   []string
}{
	{30, []string{"exec", "-d", hammerCluster, "--", "echo x"}},
	{22, []string{"stop", "-y", hammerCluster}},
	{28, []string{"start", "-y", hammerCluster}},
	{20, []string{"status", "-r"}},
}

func pickOp(rng *rand.Rand) []string {
	total := 0
	for _, m := range hammerMix {
		total += m.weight
	}
	n := rng.IntN(total)
	for _, m := range hammerMix {
		if n < m.weight {
			return m.args
		}
		n -= m.weight
	}
	panic("unreachable")
}

// round runs workers goroutines of opsEach random operations each, then
// checks the outcome. With downs, once a random late share (2/3 to 11/12)
// of the round's operations has begun, every server is asked for a down
// at the same moment while the workers go on: the downs race each other
// and whatever else is in flight.
func (h *hammer) round(name string, workers, opsEach int, downs bool) {
	t := h.t
	start := time.Now()
	h.rounds++
	roundSeed := h.seed ^ uint64(h.rounds)<<56
	total := workers * opsEach
	downAfter := -1
	if downs {
		rng := rand.New(rand.NewPCG(roundSeed, 0xd0))
		downAfter = total*2/3 + rng.IntN(total/4)
	}
	h.mu.Lock()
	h.ops = nil
	h.mu.Unlock()
	var wg sync.WaitGroup
	release := make(chan struct{})
	if downs {
		for _, port := range h.ports {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				h.do(port, []string{"down", "-y", hammerCluster})
			}()
		}
	}
	var begun atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(roundSeed, uint64(w)))
			for range opsEach {
				args := pickOp(rng)
				if int(begun.Add(1)) == downAfter {
					close(release)
				}
				h.do(h.ports[rng.IntN(len(h.ports))], args)
			}
		}()
	}
	wg.Wait()
	t.Logf("round %q: %d workers x %d ops on %d server(s), downs after op %d, in %s; outcomes: %s",
		name, workers, opsEach, len(h.ports), downAfter, time.Since(start).Round(time.Millisecond), h.outcomes())
	h.logErrors()
	h.check(name, downs)
	if t.Failed() {
		// Later rounds would start from the broken state and only add noise.
		t.FailNow()
	}
}

// hammerTrace matches what a Go panic or crash prints.
var hammerTrace = regexp.MustCompile(`panic:|goroutine \d+ \[|fatal error:|SIGSEGV`)

// do runs one operation of a round. Failing with exit 1 is a legitimate
// outcome (the cluster was stopped or removed by another call); a hang, a
// crash, a stack trace or another exit code is not, and neither is giving
// up on a row that kept changing: conditional updates must retry until
// they win.
func (h *hammer) do(port int, args []string) {
	r := h.sky(port, args...)
	out := r.out()
	switch {
	case r.code == -1:
		// runCmd reported the hang.
	case r.code != 0 && r.code != 1:
		h.t.Errorf("server on port %d: exit code %d is neither success nor an error:\n%s", port, r.code, r)
	case hammerTrace.MatchString(out):
		h.t.Errorf("server on port %d: a crash or stack trace:\n%s", port, r)
	case strings.Contains(out, state.ErrConflict.Error()):
		h.t.Errorf("server on port %d: an update gave up on a contended row:\n%s", port, r)
	case strings.Contains(out, "internal server error"):
		h.t.Errorf("server on port %d: an internal server error:\n%s", port, r)
	}
	op := hammerOp{verb: args[0], code: r.code}
	if r.code != 0 {
		op.msg = errorLine(out)
	}
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// errorLine is the first "Error: " line of a failed call (all of its
// output when there is none).
func errorLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "Error: "); i >= 0 {
			return strings.TrimSpace(line[i:])
		}
	}
	return strings.TrimSpace(out)
}

// outcomes counts the results of the round by operation.
func (h *hammer) outcomes() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	type tally struct{ ok, failed int }
	by := map[string]*tally{}
	for _, op := range h.ops {
		tl := by[op.verb]
		if tl == nil {
			tl = &tally{}
			by[op.verb] = tl
		}
		if op.code == 0 {
			tl.ok++
		} else {
			tl.failed++
		}
	}
	var parts []string
	for _, v := range keys(by) {
		parts = append(parts, fmt.Sprintf("%s %d ok/%d failed", v, by[v].ok, by[v].failed))
	}
	return strings.Join(parts, ", ")
}

// logErrors logs the distinct errors of the round, so that a reader can
// see which interleavings the run hit.
func (h *hammer) logErrors() {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]int{}
	for _, op := range h.ops {
		if op.msg != "" {
			seen[op.verb+": "+op.msg]++
		}
	}
	for _, k := range keys(seen) {
		h.t.Logf("  %dx %s", seen[k], k)
	}
}

// check verifies a round's outcome: the servers and the database agree,
// the record matches the nodes, and the history is one clean chain.
func (h *hammer) check(round string, removed bool) {
	t := h.t
	ctx := context.Background()
	views := make([]map[string]hammerRecord, len(h.ports))
	for i, port := range h.ports {
		views[i] = h.records(port)
	}
	final, exists := views[0][hammerCluster]
	for i := 1; i < len(views); i++ {
		other, ok := views[i][hammerCluster]
		if ok != exists || other != final {
			t.Errorf("round %q: the servers disagree: port %d sees %+v (exists %v), port %d sees %+v (exists %v)",
				round, h.ports[0], final, exists, h.ports[i], other, ok)
		}
	}
	st, err := state.Open(ctx, h.dbURI, state.DefaultSQLitePath(h.e.home))
	if err != nil {
		t.Fatalf("open the servers' database: %v", err)
	}
	defer st.Close()
	row, err := st.GetCluster(ctx, hammerCluster)
	switch {
	case err != nil && !exists:
	case err != nil:
		t.Errorf("round %q: the servers show %+v but the database: %v", round, final, err)
	case !exists:
		t.Errorf("round %q: the database holds %s (%s) but the servers show no such cluster", round, row.Name, row.Status)
	case string(row.Status) != final.Status || row.ClusterHash != final.ClusterHash:
		t.Errorf("round %q: the database holds %s/%s, the servers show %s/%s", round, row.Status, row.ClusterHash, final.Status, final.ClusterHash)
	}

	dir := h.e.clusterDir(hammerCluster)
	endStatus := "TERMINATED"
	switch {
	case exists && removed:
		t.Errorf("round %q: every server was asked for a down, yet the cluster is %s", round, final.Status)
	case !exists && !removed:
		t.Errorf("round %q: no down was asked for, yet the cluster is gone", round)
	}
	if exists {
		endStatus = final.Status
		if final.ClusterHash != h.hash {
			t.Errorf("round %q: cluster_hash %s, want the launched %s: the cluster was recreated", round, final.ClusterHash, h.hash)
		}
		h.checkAlive(round, final.Status)
	} else {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("round %q: the cluster is gone but its local directory %s is still there (%v)", round, dir, err)
		}
		if left := procsWithEnv(dir); len(left) > 0 {
			t.Errorf("round %q: the cluster is gone but processes of its nodes run:\n%v", round, left)
		}
	}

	events, err := st.ListClusterEvents(ctx, hammerCluster, 0)
	if err != nil {
		t.Fatalf("list cluster events: %v", err)
	}
	mine, problems := splitIncarnations(events, h.hash, h.past)
	problems = append(problems, checkTransitions(mine, endStatus)...)
	if len(problems) > 0 {
		t.Errorf("round %q: the event history of incarnation %s is not one chain of transitions:\n  %s\n%s", round, h.hash, strings.Join(problems, "\n  "), formatEvents(events))
	}
	reopened := 0
	for _, ev := range mine {
		if ev.FromStatus == string(state.ClusterStopped) && (ev.ToStatus == string(state.ClusterInit) || ev.ToStatus == string(state.ClusterUp)) {
			reopened++
		}
	}
	hist, err := st.ListHistory(ctx, 0)
	if err != nil {
		t.Fatalf("list history: %v", err)
	}
	var rows []*state.History
	for _, hi := range hist {
		if hi.ClusterHash == h.hash {
			rows = append(rows, hi)
		}
	}
	if len(rows) != 1 {
		t.Errorf("round %q: %d cost-report rows for cluster_hash %s, want 1", round, len(rows), h.hash)
		return
	}
	if problems := checkUsage(rows[0].UsageIntervals, endStatus, 1+reopened); len(problems) > 0 {
		t.Errorf("round %q: usage intervals %s:\n  %s\n%s", round, formatIntervals(rows[0].UsageIntervals), strings.Join(problems, "\n  "), formatEvents(mine))
	}
}

// checkAlive compares a live cluster's record with its nodes: UP runs
// jobs and stays UP on a refresh from every server; STOPPED has no node
// process left and stays STOPPED. Nothing else is a state that a serial
// order of the round's operations ends in.
func (h *hammer) checkAlive(round, status string) {
	t := h.t
	dir := h.e.clusterDir(hammerCluster)
	switch status {
	case "UP":
		for _, port := range h.ports {
			want := fmt.Sprintf("alive-via-%d", port)
			r := h.sky(port, "exec", hammerCluster, "--", "echo "+want)
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("round %q: the cluster is UP but exec through port %d does not run:\n%s", round, port, r)
			}
		}
	case "STOPPED":
		if left := procsWithEnv(dir); len(left) > 0 {
			t.Errorf("round %q: the cluster is STOPPED but processes of its nodes run:\n%v", round, left)
		}
	default:
		t.Errorf("round %q: the cluster ends %s, which no serial order of exec/stop/start/status/down gives", round, status)
		return
	}
	for _, port := range h.ports {
		if c := h.records(port, "-r")[hammerCluster]; c.Status != status {
			t.Errorf("round %q: the cluster is %s, but a refresh through port %d makes it %+v", round, status, port, c)
		}
	}
}

// splitIncarnations returns the events of the current incarnation of a
// cluster name (hash) and what is wrong with the rest: every event belongs
// to it or to an earlier incarnation (past), and those all come first.
func splitIncarnations(events []*state.ClusterEvent, hash string, past []string) ([]*state.ClusterEvent, []string) {
	var mine []*state.ClusterEvent
	var problems []string
	for _, ev := range events {
		switch {
		case ev.ClusterHash == hash:
			mine = append(mine, ev)
		case !contains(past, ev.ClusterHash):
			problems = append(problems, fmt.Sprintf("event %d belongs to cluster_hash %q, which was never launched", ev.ID, ev.ClusterHash))
		case len(mine) > 0:
			problems = append(problems, fmt.Sprintf("event %d of the earlier incarnation %s comes after the current one began", ev.ID, ev.ClusterHash))
		}
	}
	return mine, problems
}

// checkTransitions returns what is wrong with the event history of one
// incarnation of a cluster: the events that move the status (from != to)
// must form one chain, starting with the launch ("" -> INIT) and ending
// in end, each starting where the previous one ended. A transition
// recorded twice breaks the chain, since the second copy starts from where
// the first ended. Nothing may follow TERMINATED.
func checkTransitions(events []*state.ClusterEvent, end string) []string {
	var problems []string
	var prev *state.ClusterEvent
	terminated := false
	for _, ev := range events {
		if terminated {
			problems = append(problems, fmt.Sprintf("event %d (%s -> %s) after TERMINATED", ev.ID, ev.FromStatus, ev.ToStatus))
		}
		if ev.FromStatus == ev.ToStatus {
			continue
		}
		switch {
		case prev == nil && (ev.FromStatus != "" || ev.ToStatus != string(state.ClusterInit)):
			problems = append(problems, fmt.Sprintf("first transition is %q -> %q (event %d), want \"\" -> INIT", ev.FromStatus, ev.ToStatus, ev.ID))
		case prev != nil && ev.FromStatus != prev.ToStatus:
			problems = append(problems, fmt.Sprintf("event %d goes %s -> %s, but the previous transition (event %d) ended in %s",
				ev.ID, ev.FromStatus, ev.ToStatus, prev.ID, prev.ToStatus))
		}
		terminated = ev.ToStatus == "TERMINATED"
		prev = ev
	}
	switch {
	case prev == nil:
		problems = append(problems, "no transition recorded")
	case prev.ToStatus != end:
		problems = append(problems, fmt.Sprintf("the last transition (event %d) ends in %s, but the cluster is %s", prev.ID, prev.ToStatus, end))
	}
	return problems
}

// checkUsage returns what is wrong with an incarnation's usage intervals:
// they follow one another without overlap, only the last may be open, it
// is closed when the cluster is STOPPED or gone, and there is one per
// time the nodes were started (the launch, then each start from STOPPED).
func checkUsage(ivs []state.Interval, end string, want int) []string {
	var problems []string
	if len(ivs) != want {
		problems = append(problems, fmt.Sprintf("%d intervals, want %d (the launch and each transition out of STOPPED)", len(ivs), want))
	}
	for i, iv := range ivs {
		if iv.End == nil {
			if i != len(ivs)-1 {
				problems = append(problems, fmt.Sprintf("interval %d is open but not the last", i))
			}
			continue
		}
		if *iv.End < iv.Start {
			problems = append(problems, fmt.Sprintf("interval %d ends before it starts", i))
		}
		if i+1 < len(ivs) && ivs[i+1].Start < *iv.End {
			problems = append(problems, fmt.Sprintf("interval %d starts before interval %d ends", i+1, i))
		}
	}
	open := len(ivs) > 0 && ivs[len(ivs)-1].End == nil
	switch end {
	case "STOPPED", "TERMINATED":
		if open {
			problems = append(problems, "the last interval is open, but the cluster is "+end)
		}
	default:
		if !open {
			problems = append(problems, "no open interval, but the cluster is "+end)
		}
	}
	return problems
}

func formatEvents(events []*state.ClusterEvent) string {
	var b strings.Builder
	b.WriteString("events:\n")
	for _, ev := range events {
		fmt.Fprintf(&b, "  %d %.6f %s %q -> %q %s\n", ev.ID, ev.TransitionedAt, ev.ClusterHash, ev.FromStatus, ev.ToStatus, ev.Reason)
	}
	return b.String()
}

func formatIntervals(ivs []state.Interval) string {
	raw, _ := json.Marshal(ivs)
	return string(raw)
}

// startForegroundServer runs `sky api start --foreground` on port as a
// child of the test, in e's HOME with e's environment, waits until it
// answers, and stops it by its PID at cleanup.
func startForegroundServer(t testing.TB, e *skyEnv, port int) int {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "server-b.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bin, "api", "start", "--foreground")
	cmd.Dir = e.dir
	cmd.Env = append(append([]string{}, e.env...), fmt.Sprintf("SKYPILOT_API_SERVER_LOCAL_PORT=%d", port))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start server B: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() //nolint:errcheck
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		defer logf.Close()
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-exited:
			return
		case <-time.After(30 * time.Second):
		}
		out, _ := os.ReadFile(logPath)
		t.Errorf("server B (pid %d) did not exit within 30 s of SIGTERM; killing it. Its output:\n%s", pid, out)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-exited
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/api/health", port)
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return pid
			}
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			t.Fatalf("server B exited at start:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("server B did not answer at %s within 30 s:\n%s", url, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
