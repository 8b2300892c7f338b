package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/paths"
)

// stormClients is how many `sky jobs queue` clients hammer the server while
// the managed jobs of TestHostileTeardownUnderStorm are launched, run and
// torn down: the 200, unless SKYGO_HOSTILE_STORM says otherwise
// (a slower machine). The jobs are submitted before the storm starts: the
// `sky jobs launch` request itself waiting behind the storm is the
// responsiveness problem of issue 26 item 8, not what this test is about.
func stormClients(t *testing.T) int {
	if v := os.Getenv("SKYGO_HOSTILE_STORM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SKYGO_HOSTILE_STORM=%q: want a positive number of clients", v)
		}
		return n
	}
	return 200
}

// localWatch remembers every network namespace and veth the local
// infrastructure of one HOME leased while a test ran, so that the test can
// count the ones still on the machine at the end, even after their leases
// are gone.
type localWatch struct {
	home, root string
	mu         sync.Mutex
	ns         map[string]string // namespace -> veth
}

func newLocalWatch(home string) *localWatch {
	return &localWatch{home: home, root: paths.LocalInfra(home), ns: map[string]string{}}
}

// look reads the machine's leases once and keeps those of this HOME.
func (w *localWatch) look() {
	paths, _ := filepath.Glob(filepath.Join(local.DefaultNetDir, "leases", "*.json"))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var l struct {
			NetNS string `json:"netns"`
			Veth  string `json:"veth"`
			Root  string `json:"root"`
		}
		if json.Unmarshal(b, &l) == nil && l.Root == w.root && l.NetNS != "" {
			w.ns[l.NetNS] = l.Veth
		}
	}
}

// every looks every d until stop is closed.
func (w *localWatch) every(d time.Duration, stop <-chan struct{}) {
	for {
		w.look()
		select {
		case <-stop:
			return
		case <-time.After(d):
		}
	}
}

// leftovers lists what of this HOME's local infrastructure is still on the
// machine: processes carrying a node marker under it, node directories,
// leases, and namespaces or veths it had leased that no lease of another
// installation holds now (an address reused by a parallel test is theirs).
func (w *localWatch) leftovers() []string {
	var out []string
	for _, p := range procsWithEnv("SKYGO_LOCAL_NODE=" + w.root + "/") {
		out = append(out, "process "+p.String())
	}
	dirs, _ := filepath.Glob(filepath.Join(w.root, "clusters", "*", "node-*"))
	for _, d := range dirs {
		out = append(out, "node directory "+d)
	}
	for _, ns := range local.Leftovers(w.home) {
		out = append(out, "lease of namespace "+ns)
	}
	leasedNow := map[string]bool{}
	paths, _ := filepath.Glob(filepath.Join(local.DefaultNetDir, "leases", "*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			var l struct {
				NetNS string `json:"netns"`
			}
			if json.Unmarshal(b, &l) == nil {
				leasedNow[l.NetNS] = true
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for ns, veth := range w.ns {
		if leasedNow[ns] {
			continue
		}
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			out = append(out, "network namespace "+ns)
		}
		if _, err := os.Stat(filepath.Join("/sys/class/net", veth)); err == nil {
			out = append(out, "veth "+veth)
		}
	}
	sort.Strings(out)
	return out
}

// teamQueue is every managed job of every user, as the admin sees them.
func (tm *team) teamQueue() (map[int]mjob, result, bool) {
	r := tm.as("admin", "jobs", "queue", "-a", "-u", "-v", "-o", "json")
	if r.code != 0 {
		return nil, r, false
	}
	var rows []mjob
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		return nil, r, false
	}
	out := map[int]mjob{}
	for _, j := range rows {
		out[j.JobID] = j
	}
	return out, r, true
}

// TestHostileTeardownUnderStorm is issue 26 item 7: alice's 50 short
// managed jobs run while a storm of `sky jobs queue` clients (alice's and
// bob's) keeps the server busy; once every job is over, nothing of their
// clusters may be left on the machine: no process, node directory, lease,
// network namespace or veth.
func TestHostileTeardownUnderStorm(t *testing.T) {
	// Sequential: a storm of concurrent clients by design; alone, neither it nor a neighbour's bounded waits absorb the other's load.
	tm := newTeam(t, "SKYGO_JOBS_RETRY_GAP=1s")
	watch := newLocalWatch(tm.home)
	const jobs = 50
	clients := stormClients(t)
	t.Logf("%d managed jobs under a storm of %d `sky jobs queue` clients", jobs, clients)

	r := tm.mustAs("alice", "jobs", "launch", "-y", "-d", "-o", "id", "--num-jobs", strconv.Itoa(jobs), "-n", "storm", "--infra", "local", "--", "echo hi")
	ids := strings.Fields(r.stdout)
	if len(ids) != jobs {
		t.Fatalf("--num-jobs %d gave %d job ids:\n%s", jobs, len(ids), r)
	}
	// The storm runs while the jobs' clusters are launched and torn down.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); watch.every(300*time.Millisecond, stop) }()
	var calls, failed int64
	var cmu sync.Mutex
	for i := 0; i < clients; i++ {
		user := teamUsers[i%len(teamUsers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := tm.exec(2*time.Minute, tm.endpoint(user), "jobs", "queue", "-u")
				cmu.Lock()
				calls++
				if r.code != 0 {
					failed++
				}
				cmu.Unlock()
			}
		}()
	}
	stopStorm := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopStorm)

	deadline := time.Now().Add(20 * time.Minute)
	for {
		q, r, ok := tm.teamQueue()
		done, bad := 0, []string{}
		if ok {
			for _, s := range ids {
				id, _ := strconv.Atoi(s)
				j, found := q[id]
				switch {
				case found && ended(j):
					done++
				case found:
					bad = append(bad, j.String())
				default:
					bad = append(bad, fmt.Sprintf("job %d missing from the queue", id))
				}
			}
		}
		if ok && done == jobs {
			break
		}
		if time.Now().After(deadline) {
			if len(bad) > 10 {
				bad = bad[:10]
			}
			t.Fatalf("managed jobs not all over after 20 minutes (%d done): %s\n%s\n%s", done, r, strings.Join(bad, "\n"), tm.serverLogTail())
		}
		time.Sleep(2 * time.Second)
	}
	stopStorm()
	cmu.Lock()
	t.Logf("storm: %d `sky jobs queue` calls, %d failed", calls, failed)
	cmu.Unlock()
	watch.look()

	// Every job is DONE: its cluster was torn down, so its record is gone
	// and so must be everything it had on the machine.
	var st []map[string]any
	tm.mustJSONAs("admin", &st, "status", "-u", "-o", "json")
	if len(st) != 0 {
		t.Errorf("clusters still listed after every job ended: %v", st)
	}
	if left := watch.leftovers(); len(left) > 0 {
		t.Errorf("%d leftovers of torn-down clusters:\n%s\n%s", len(left), strings.Join(left, "\n"), tm.serverLogTail())
	}
}

// mustJSONAs runs a sky command as user and decodes its JSON output.
func (tm *team) mustJSONAs(user string, v any, args ...string) {
	tm.t.Helper()
	r := tm.mustAs(user, args...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		tm.t.Fatalf("%s: output is not JSON: %v\n%s", user, err, r)
	}
}

// TestHostileDownInterruptsLaunch: `sky down` of a cluster whose launch is
// stuck provisioning interrupts the launch and tears down what it made,
// instead of queueing behind the launch's lock. The launch is stuck on the
// local infrastructure's lock, held here as another server's stuck
// allocation would hold it.
func TestHostileDownInterruptsLaunch(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	watch := newLocalWatch(e.home)
	e.must("status")
	root := paths.LocalInfra(e.home)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(root, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(func() { f.Close() })
	t.Cleanup(release)

	launched := make(chan result, 1)
	go func() {
		launched <- runCmd(t, 4*time.Minute, e.env, e.bin, "launch", "-y", "-c", "stuck", "--infra", "local", "--", "echo hi")
	}()
	if !waitFor(2*time.Minute, func() bool { _, ok := e.status(false)["stuck"]; return ok }) {
		t.Fatalf("the launch never recorded cluster stuck\n%s", e.serverLogTail())
	}
	// The launch is in provisioning and cannot get further while the lock
	// is held: down must not wait for it.
	r := e.exec(2*time.Minute, nil, "down", "-y", "stuck")
	if r.code != 0 || strings.Contains(r.stdout, "failed") {
		release()
		t.Fatalf("sky down of a cluster whose launch is stuck did not finish: %s\n%s", r, e.serverLogTail())
	}
	select {
	case lr := <-launched:
		t.Logf("sky down: %s\nthe launch: %s", r, lr)
		if lr.code == 0 {
			t.Errorf("the interrupted launch reported success: %s", lr)
		} else if !strings.Contains(lr.out(), "interrupted") {
			t.Errorf("the interrupted launch does not say it was interrupted: %s", lr)
		}
	case <-time.After(2 * time.Minute):
		t.Errorf("the launch still runs 2 minutes after `sky down` returned")
	}
	release()
	if _, ok := e.status(false)["stuck"]; ok {
		t.Errorf("cluster stuck still listed after sky down")
	}
	watch.look()
	if left := watch.leftovers(); len(left) > 0 {
		t.Errorf("leftovers of the interrupted launch:\n%s", strings.Join(left, "\n"))
	}
}

// TestHostileTeardownCrashFinished: the API server is SIGKILLed in the
// middle of a teardown (the node's processes already gone, its directory
// being removed); the restarted server finishes the teardown by itself
// (its sweeper, at start): the cluster leaves `sky status` and nothing of
// it is left on the machine, without anyone running `sky down` again.
func TestHostileTeardownCrashFinished(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	watch := newLocalWatch(e.home)
	// Many files in the node's HOME make its removal take a while: the
	// window in which the server is killed.
	e.must("launch", "-y", "-c", "crashy", "--infra", "local", "--",
		"mkdir -p ~/many && cd ~/many && seq 1 150000 | xargs touch")
	watch.look()
	marker := "SKYGO_LOCAL_NODE=" + e.clusterDir("crashy") + "/"
	if len(procsWithEnv(marker)) == 0 {
		t.Fatalf("no process of cluster crashy before its teardown")
	}
	down := make(chan result, 1)
	go func() { down <- runCmd(t, 3*time.Minute, e.env, e.bin, "down", "-y", "crashy") }()
	if !waitFor(2*time.Minute, func() bool { return len(procsWithEnv(marker)) == 0 }) {
		t.Fatalf("the teardown never stopped the node's processes\n%s", e.serverLogTail())
	}
	if !e.killServer(t) {
		t.Fatalf("no API server to kill")
	}
	<-down
	if _, err := os.Stat(filepath.Join(e.nodeHome("crashy", 0), "many")); err != nil {
		t.Fatalf("the teardown was over before the server was killed (%v): the test did not hit its window", err)
	}
	// Any command starts the server again; from then on no one helps.
	gone := waitFor(3*time.Minute, func() bool {
		_, listed := e.status(false)["crashy"]
		return !listed && len(watch.leftovers()) == 0
	})
	if !gone {
		_, listed := e.status(false)["crashy"]
		t.Errorf("after a crash mid-teardown and a restart, cluster crashy listed=%v, leftovers:\n%s\n%s",
			listed, strings.Join(watch.leftovers(), "\n"), e.serverLogTail())
	}
}
