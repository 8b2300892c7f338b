package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// svcReplica is a replica of a `sky serve status -o json` record.
type svcReplica struct {
	ID       int    `json:"replica_id"`
	Name     string `json:"name"`
	Version  int    `json:"version"`
	Status   string `json:"status"`
	Endpoint string `json:"endpoint"`
	Reason   string `json:"reason"`
}

// svcRecord is one service of `sky serve status -o json`.
type svcRecord struct {
	Name             string       `json:"name"`
	Status           string       `json:"status"`
	Version          int          `json:"version"`
	ActiveVersions   []int        `json:"active_versions"`
	Endpoint         string       `json:"endpoint"`
	LoadBalancerPort int          `json:"load_balancer_port"`
	Target           int          `json:"target_num_replicas"`
	QPS              float64      `json:"qps"`
	Reason           string       `json:"reason"`
	Replicas         []svcReplica `json:"replica_info"`
}

func (s svcRecord) String() string {
	var rs []string
	for _, r := range s.Replicas {
		x := fmt.Sprintf("%d:%s/v%d", r.ID, r.Status, r.Version)
		if r.Reason != "" {
			x += fmt.Sprintf("(%s)", r.Reason)
		}
		rs = append(rs, x)
	}
	s2 := fmt.Sprintf("service %s %s v%d target=%d qps=%.2f replicas=[%s]", s.Name, s.Status, s.Version, s.Target, s.QPS, strings.Join(rs, " "))
	if s.Reason != "" {
		s2 += " reason=" + s.Reason
	}
	return s2
}

// replicaTerminal says whether a replica status is terminal (the failed
// set, SHUTTING_DOWN, PREEMPTED), restated from service.md so the tests
// check the CLI's words, not the server's code.
func replicaTerminal(status string) bool {
	return slices.Contains([]string{"FAILED", "FAILED_CLEANUP", "FAILED_INITIAL_DELAY", "FAILED_PROBING",
		"FAILED_PROVISION", "UNKNOWN", "SHUTTING_DOWN", "PREEMPTED"}, status)
}

// ready lists the READY replicas, of version v when v > 0.
func (s svcRecord) ready(v int) []svcReplica {
	var out []svcReplica
	for _, r := range s.Replicas {
		if r.Status == "READY" && (v == 0 || r.Version == v) {
			out = append(out, r)
		}
	}
	return out
}

// nonTerminal counts the replicas that are, or are becoming, part of the
// service: what max_replicas caps.
func (s svcRecord) nonTerminal() int {
	n := 0
	for _, r := range s.Replicas {
		if !replicaTerminal(r.Status) {
			n++
		}
	}
	return n
}

// serveEnv is newEnv with the SkyServe timings shortened (the server
// inherits the first client's environment): a decision every second over
// a 10 s QPS window, launches retried after 1 s.
// SKYGO_LOCAL_NETNS of the test's own environment goes to the server, so
// that the tests can be run in either networking mode of local nodes.
func serveEnv(t testing.TB) *skyEnv {
	e := newEnv(t)
	e.env = append(e.env, "SKYGO_SERVE_DECISION_INTERVAL=1s", "SKYGO_SERVE_QPS_WINDOW=10s", "SKYGO_SERVE_RETRY_GAP=1s")
	if v, ok := os.LookupEnv("SKYGO_LOCAL_NETNS"); ok {
		e.env = append(e.env, "SKYGO_LOCAL_NETNS="+v)
	}
	return e
}

// sharedNetwork says whether local nodes share this machine's network
// (no namespace per node), as `sky check -v local` says.
func (e *skyEnv) sharedNetwork() bool {
	e.t.Helper()
	return !strings.Contains(e.must("check", "-v", "local").out(), "each node has its own network namespace")
}

// sharedPorts is the service port of each HOME whose local nodes share
// the machine's network.
var sharedPorts sync.Map

// localYAML is svcYAML on the local infrastructure, port 8080. Where
// nodes share the machine's network, two replicas cannot both bind
// 0.0.0.0:8080, and the node addresses (127.0.0.x) of tests running side
// by side with other HOMEs coincide: there the fixture listens on its
// node's own address, at a port of the test's own.
func (e *skyEnv) localYAML(bin string, version int, service string, extraEnvs ...string) string {
	e.t.Helper()
	port := 8080
	if e.sharedNetwork() {
		p, _ := sharedPorts.LoadOrStore(e.home, testutil.FreePort(e.t))
		port = p.(int)
		e.t.Logf("local nodes share this machine's network: replicas listen on their node's address, port %d", port)
		extraEnvs = append(extraEnvs, `BIND_NODE_ADDR: "1"`)
	}
	return svcYAML("local", bin, port, version, service, extraEnvs...)
}

// requireServe starts the server (with the environment's timings) and
// makes sure every service is down, its replicas and load balancer gone,
// before the environment's own cleanup runs.
func (e *skyEnv) requireServe() {
	e.t.Helper()
	r := e.exec(cmdTimeout, nil, "serve", "status")
	if r.code != 0 {
		e.t.Fatalf("%s\n%s", r, e.serverLogTail())
	}
	e.t.Cleanup(func() {
		if r := e.exec(cmdTimeout, nil, "serve", "down", "-a", "-y"); r.code != 0 && !strings.Contains(r.out(), "No service") {
			e.t.Errorf("cleanup: %s", r)
		}
		if !waitFor(60*time.Second, func() bool {
			s, _, ok := e.tryServeStatus()
			return ok && len(s) == 0
		}) {
			s, _, _ := e.tryServeStatus()
			e.t.Errorf("cleanup: services left 60s after `sky serve down -a`: %v", s)
		}
		// Every replica cluster is gone with its service: no process of
		// any node of this HOME may run (the generic cleanup would kill
		// them after `sky down -a`, hiding that serve down left them).
		var nodes []proc
		if !waitFor(30*time.Second, func() bool {
			nodes = procsWithEnv("SKYGO_LOCAL_NODE=" + e.home + "/")
			return len(nodes) == 0
		}) {
			var lines []string
			for _, p := range nodes {
				lines = append(lines, p.String()+" of node "+nodeOf(p.pid))
			}
			e.t.Errorf("cleanup: node processes run 30s after `sky serve down -a`:\n%s", strings.Join(lines, "\n"))
		}
		var left []proc
		if !waitFor(10*time.Second, func() bool { left = e.lbProcs(""); return len(left) == 0 }) {
			e.t.Errorf("cleanup: load balancers survive `sky serve down -a` (now killed): %v", left)
			for _, p := range left {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
}

// tryServeStatus is `sky serve status -o json [NAMES]` once, by name; ok
// is false when the command failed.
func (e *skyEnv) tryServeStatus(names ...string) (map[string]svcRecord, result, bool) {
	return tryJSONRows(e, func(s svcRecord) string { return s.Name }, append([]string{"serve", "status", "-o", "json"}, names...)...)
}

// tryJSONRows runs a sky command that prints a JSON list once and keys
// its rows; ok is false when the command failed (a server killed under
// it) or printed no such list.
func tryJSONRows[K comparable, T any](e *skyEnv, key func(T) K, args ...string) (map[K]T, result, bool) {
	r := e.exec(cmdTimeout, nil, args...)
	if r.code != 0 {
		return nil, r, false
	}
	var rows []T
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		e.t.Errorf("sky %s: %v:\n%s", strings.Join(args, " "), err, r.stdout)
		return nil, r, false
	}
	out := map[K]T{}
	for _, row := range rows {
		out[key(row)] = row
	}
	return out, r, true
}

// service is the record of one service; the test fails unless it exists.
func (e *skyEnv) service(name string) svcRecord {
	e.t.Helper()
	s, r, ok := e.tryServeStatus(name)
	if !ok {
		e.t.Fatalf("%s\n%s", r, e.serverLogTail())
	}
	rec, found := s[name]
	if !found {
		e.t.Fatalf("service %s not in `sky serve status -o json`:\n%s", name, r.stdout)
	}
	return rec
}

// waitService polls the service's record until ok holds and returns it.
func (e *skyEnv) waitService(name string, timeout time.Duration, what string, ok func(svcRecord) bool) svcRecord {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var last svcRecord
	for {
		if s, _, good := e.tryServeStatus(name); good {
			last = s[name]
			if ok(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("service %s not %s after %s: %v\n%s\n%s", name, what, timeout, last, e.serveLogTail(name), e.serverLogTail())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readyN says a service has n READY replicas of version v (any when 0)
// and nothing else live.
func readyN(n, v int) func(svcRecord) bool {
	return func(s svcRecord) bool {
		return len(s.ready(v)) == n && s.nonTerminal() == n
	}
}

// serveLogTail is the end of the service's controller log, to explain a
// failure.
func (e *skyEnv) serveLogTail(name string) string {
	r := e.exec(cmdTimeout, nil, "serve", "logs", name, "--controller", "--no-follow", "--tail", "40")
	return "--- controller log of " + name + " (tail):\n" + r.out()
}

// serveUp runs `sky serve up -y -n NAME YAML` and returns its result.
func (e *skyEnv) serveUp(name, yaml string, extra ...string) result {
	e.t.Helper()
	r := e.exec(3*time.Minute, nil, append([]string{"serve", "up", "-y", "-n", name, yaml}, extra...)...)
	if r.code != 0 {
		e.t.Fatalf("%s\n%s", r, e.serverLogTail())
	}
	return r
}

// endpoint is what `sky serve status NAME --endpoint` prints.
func (e *skyEnv) endpoint(name string) string {
	e.t.Helper()
	r := e.must("serve", "status", name, "--endpoint")
	ep := strings.TrimSpace(r.stdout)
	if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		e.t.Fatalf("sky serve status %s --endpoint printed %q, not an http(s)://HOST:PORT URL:\n%s", name, ep, r)
	}
	return ep
}

// lbProcs lists the load balancer processes of this HOME's services (of
// service name, unless ""). They carry no HOME (the controller gives
// them only PATH): their control socket under HOME on the command line
// tells them apart.
func (e *skyEnv) lbProcs(name string) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !slices.Contains(args, "serve-lb") || !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, e.home+"/") }) {
			continue
		}
		if i := slices.Index(args, "--service"); name != "" && (i < 0 || i+1 >= len(args) || args[i+1] != name) {
			continue
		}
		out = append(out, proc{pid: pid, cmdline: strings.Join(args, " ")})
	}
	return out
}

// buildReplica builds the replica fixture (testdata/replica) into a
// directory every local node and this test can read, and returns the
// binary's path.
func buildReplica(t testing.TB, dir string) string {
	t.Helper()
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "skyreplica-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "replica")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./internal/e2e/testdata/replica")
	cmd.Dir = testutil.RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the replica fixture: %v\n%s", err, out)
	}
	return bin
}

// reachesReplicas sends up to 50 GETs through the load balancer at ep,
// each to be answered by a replica of version v, and fails unless n
// distinct replicas answered.
func reachesReplicas(t *testing.T, ep string, n, v int) {
	t.Helper()
	seen := map[int]bool{}
	for i := 0; i < 50 && len(seen) < n; i++ {
		code, body := get(t, ep+"/", 10*time.Second)
		id, ver, ok := parseIdent(body)
		if code != http.StatusOK || !ok || ver != v {
			t.Fatalf("GET %s/: %d %q", ep, code, body)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Errorf("50 requests through the load balancer reached replicas %v, want %d distinct", seen, n)
	}
}

// fastProbe is a readiness probe for tests: every second, 1 s timeout.
func fastProbe(initialDelay int) string {
	return fmt.Sprintf(`readiness_probe:
  path: /health
  initial_delay_seconds: %d
  timeout_seconds: 1
  endpoint_probe_interval_seconds: 1
`, initialDelay)
}

// svcYAML is a service task running the replica fixture at bin (an
// absolute path) on infra, on port, as version; service is the body of
// the service: section, extraEnvs more lines of envs:.
func svcYAML(infra, bin string, port, version int, service string, extraEnvs ...string) string {
	var b strings.Builder
	b.WriteString("service:\n")
	for _, l := range strings.Split(strings.TrimRight(service, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	fmt.Fprintf(&b, "resources:\n  infra: %s\n  ports: %d\n", infra, port)
	fmt.Fprintf(&b, "envs:\n  REPLICA_BIN: %s\n  VERSION: \"%d\"\n  PORT: \"%d\"\n", bin, version, port)
	for _, l := range extraEnvs {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("run: exec \"$REPLICA_BIN\"\n")
	return b.String()
}

// answer is one request of a load generator.
type answer struct {
	start, end       time.Time
	replica, version int
}

// loadGen sends GET requests to a URL from N workers over keep-alive
// connections, paced to a total rate or as fast as a gap allows, and
// keeps every answer (who served it) and every failure (why).
type loadGen struct {
	url     string
	client  *http.Client
	stop    chan struct{}
	done    sync.WaitGroup
	once    sync.Once
	mu      sync.Mutex
	answers []answer
	fails   map[string]int
	nFail   int
}

// startLoad starts workers sending GET url; with rate > 0 they share that
// many requests a second, else each waits gap between its requests.
func startLoad(url string, workers int, rate float64, gap time.Duration) *loadGen {
	l := &loadGen{
		url: url,
		client: &http.Client{
			Timeout:   60 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxIdleConns: workers, IdleConnTimeout: time.Minute},
		},
		stop:  make(chan struct{}),
		fails: map[string]int{},
	}
	var tokens chan struct{}
	if rate > 0 {
		tokens = make(chan struct{}, workers)
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
			defer tick.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
					select {
					case tokens <- struct{}{}:
					default: // every worker busy: the rate is what they can do
					}
				}
			}
		}()
	}
	for range workers {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for {
				if tokens != nil {
					select {
					case <-l.stop:
						return
					case <-tokens:
					}
				} else {
					select {
					case <-l.stop:
						return
					case <-time.After(gap):
					}
				}
				l.one()
			}
		}()
	}
	return l
}

// one sends one request and records what came back.
func (l *loadGen) one() {
	a := answer{start: time.Now()}
	resp, err := l.client.Get(l.url)
	var reason string
	if err != nil {
		reason = "error: " + err.Error()
	} else {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case rerr != nil:
			reason = "reading the body: " + rerr.Error()
		case resp.StatusCode != http.StatusOK:
			reason = fmt.Sprintf("HTTP %d: %.100s", resp.StatusCode, strings.TrimSpace(string(body)))
		default:
			var ok bool
			if a.replica, a.version, ok = parseIdent(string(body)); !ok {
				reason = fmt.Sprintf("unexpected body %.100q", body)
			}
		}
	}
	a.end = time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if reason != "" {
		l.fails[reason]++
		l.nFail++
		return
	}
	l.answers = append(l.answers, a)
}

// parseIdent reads the fixture's "replica=ID version=V" line.
func parseIdent(s string) (replica, version int, ok bool) {
	n, err := fmt.Sscanf(strings.TrimSpace(s), "replica=%d version=%d", &replica, &version)
	return replica, version, err == nil && n == 2
}

// Stop ends the load and waits for the workers' last requests.
func (l *loadGen) Stop() {
	l.once.Do(func() { close(l.stop) })
	l.done.Wait()
	l.client.CloseIdleConnections()
}

// snapshot is a copy of the answers so far and the failure count.
func (l *loadGen) snapshot() ([]answer, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.answers), l.nFail
}

// failures describes the failures, most frequent first.
func (l *loadGen) failures() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type rc struct {
		r string
		n int
	}
	var rs []rc
	for r, n := range l.fails {
		rs = append(rs, rc{r, n})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].n > rs[j].n })
	var b strings.Builder
	for i, x := range rs {
		if i == 10 {
			fmt.Fprintf(&b, "  ... and %d more reasons\n", len(rs)-10)
			break
		}
		fmt.Fprintf(&b, "  %d× %s\n", x.n, x.r)
	}
	return b.String()
}

// byReplica counts answers per replica id.
func byReplica(as []answer) map[int]int {
	m := map[int]int{}
	for _, a := range as {
		m[a.replica]++
	}
	return m
}

// byVersion counts answers per version.
func byVersion(as []answer) map[int]int {
	m := map[int]int{}
	for _, a := range as {
		m[a.version]++
	}
	return m
}

// statusSampler reads `sky serve status -o json NAME` over and over in
// the background and keeps the largest number of live replicas seen.
type statusSampler struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	max     int
	atMax   svcRecord
	samples int
	// maxHeld also counts the replicas still SHUTTING_DOWN, whose
	// processes may run yet.
	maxHeld int
}

func (e *skyEnv) sampleStatus(name string) *statusSampler {
	s := &statusSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			if m, _, ok := e.tryServeStatus(name); ok {
				if rec, found := m[name]; found {
					s.mu.Lock()
					s.samples++
					if n := rec.nonTerminal(); n > s.max {
						s.max, s.atMax = n, rec
					}
					held := rec.nonTerminal()
					for _, r := range rec.Replicas {
						if r.Status == "SHUTTING_DOWN" {
							held++
						}
					}
					s.maxHeld = max(s.maxHeld, held)
					s.mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return s
}

// Stop ends the sampling and returns the largest live count, the
// record it was seen in, and the number of samples.
func (s *statusSampler) Stop() (int, svcRecord, int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.atMax, s.samples
}

// held is the largest count of live and SHUTTING_DOWN replicas seen.
func (s *statusSampler) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxHeld
}

// fetch is one GET with a timeout; it returns the status and body.
func fetch(u string, timeout time.Duration) (int, string, error) {
	c := &http.Client{Timeout: timeout}
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, string(b), fmt.Errorf("reading the body: %w", err)
	}
	return resp.StatusCode, string(b), nil
}

// get is fetch failing the test on an error.
func get(t testing.TB, u string, timeout time.Duration) (int, string) {
	t.Helper()
	code, body, err := fetch(u, timeout)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return code, body
}

// sseTimes reads a server-sent event stream and returns when each data
// line arrived, counted from the request.
func sseTimes(t testing.TB, u string) ([]time.Duration, []string) {
	t.Helper()
	start := time.Now()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s (Content-Type %q): %s", u, resp.Status, resp.Header.Get("Content-Type"), b)
	}
	var at []time.Duration
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			at = append(at, time.Since(start))
			lines = append(lines, d)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the event stream of %s: %v", u, err)
	}
	return at, lines
}

// wsEcho opens a WebSocket to the fixture's /ws at base (http://HOST:PORT),
// reads its greeting, sends msg and returns the greeting and the echo.
func wsEcho(base, msg string) (greeting, echo string, err error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", u.Host, key)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", "", fmt.Errorf("reading the upgrade answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		return "", "", fmt.Errorf("upgrade answered %s: %s", resp.Status, b)
	}
	if greeting, err = wsRead(br); err != nil {
		return "", "", fmt.Errorf("reading the greeting: %w", err)
	}
	// A client frame is masked (RFC 6455 §5.3).
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	p := []byte(msg)
	frame := []byte{0x81, 0x80 | byte(len(p))}
	frame = append(frame, mask[:]...)
	for i := range p {
		frame = append(frame, p[i]^mask[i%4])
	}
	if _, err := conn.Write(frame); err != nil {
		return greeting, "", err
	}
	echo, err = wsRead(br)
	return greeting, echo, err
}

// wsRead reads one unmasked server frame of a short message.
func wsRead(br *bufio.Reader) (string, error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return "", err
	}
	n := int(h[1] & 0x7f)
	if n == 126 {
		var b [2]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return "", err
		}
		n = int(binary.BigEndian.Uint16(b[:]))
	} else if n == 127 {
		return "", errors.New("frame too long for the test")
	}
	p := make([]byte, n)
	_, err := io.ReadFull(br, p)
	return string(p), err
}

// lbAnswers says whether anything accepts connections at the endpoint.
func lbAnswers(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	c, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// listenerPids are the processes holding a listening TCP socket on the
// port of endpoint, from /proc/net/tcp{,6} and the processes' fds. Other
// tests running in parallel may bind a port a stopped load balancer freed,
// so whether a port answers says nothing about whose it is.
func listenerPids(endpoint string) []int {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// local_address is addr:PORT in hex; state 0A is LISTEN.
			if len(fs) < 10 || fs[3] != "0A" {
				continue
			}
			if _, hexPort, ok := strings.Cut(fs[1], ":"); ok {
				if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(p) == port {
					inodes["socket:["+fs[9]+"]"] = true
				}
			}
		}
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + ent.Name() + "/fd")
		for _, fd := range fds {
			if target, err := os.Readlink("/proc/" + ent.Name() + "/fd/" + fd.Name()); err == nil && inodes[target] {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// nodeOf is the SKYGO_LOCAL_NODE of a process, the node it belongs to.
func nodeOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, "SKYGO_LOCAL_NODE="); ok {
			return v
		}
	}
	return "?"
}
