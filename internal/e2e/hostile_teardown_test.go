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
	"testing"
	"time"

	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/paths"
)

// stormClients is how many `sky jobs queue` clients hammer the server while
// the managed jobs of TestHostileTeardownUnderStorm run: the 200,
// unless SKYGO_HOSTILE_STORM says otherwise (a slower machine).
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
	r := tm.as("admin", "jobs", "queue", "-a", "-u", "-o", "json")
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
	tm := newTeam(t, "SKYGO_JOBS_RETRY_GAP=1s")
	watch := newLocalWatch(tm.home)
	const jobs = 50
	clients := stormClients(t)
	t.Logf("%d managed jobs under a storm of %d `sky jobs queue` clients", jobs, clients)

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

	r := tm.mustAs("alice", "jobs", "launch", "-y", "-d", "-o", "id", "--num-jobs", strconv.Itoa(jobs), "-n", "storm", "--infra", "local", "--", "echo hi")
	ids := strings.Fields(r.stdout)
	if len(ids) != jobs {
		t.Fatalf("--num-jobs %d gave %d job ids:\n%s", jobs, len(ids), r)
	}
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
