package lb

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// A test binary started with SKYGO_LB_TEST_REPLICA=ID is a replica: a
// small HTTP server on a free loopback port that prints its address on
// stdout and answers every request with "replica ID" (the retry test
// SIGKILLs one, the benchmark loads two).
func TestMain(m *testing.M) {
	if id := os.Getenv("SKYGO_LB_TEST_REPLICA"); id != "" {
		os.Exit(replicaMain(id))
	}
	os.Exit(m.Run())
}

func replicaMain(id string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	body := []byte("replica " + id)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
	})
	_ = (&http.Server{Handler: h}).Serve(ln)
	return 0
}

// replicaProc is a replica running as its own process.
type replicaProc struct {
	cmd  *exec.Cmd
	addr string
}

func startReplicaProc(t testing.TB, id int) *replicaProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("SKYGO_LB_TEST_REPLICA=%d", id))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &replicaProc{cmd: cmd}
	t.Cleanup(p.kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("replica %d did not start: %v", id, err)
	}
	p.addr = strings.TrimSpace(line)
	return p
}

func (p *replicaProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// replicaServer is an in-process replica with its own handler.
func replicaServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// named answers "replica ID".
func named(id int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "replica %d", id)
	})
}

// testLB is a Balancer serving on a free loopback port.
type testLB struct {
	*Balancer
	url string
	log *syncBuf
	gen int64
	// seen keeps every backend object a push produced, so a test can
	// check all their counters, retired ones included.
	seenMu sync.Mutex
	seen   map[*backend]bool
}

func newTestLB(t *testing.T, o Options) *testLB {
	t.Helper()
	lg := &syncBuf{}
	if o.Log == nil {
		o.Log = lg
	}
	if o.HoldTimeout == 0 {
		o.HoldTimeout = 10 * time.Second
	}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(b)
	t.Cleanup(func() {
		b.Close()
		s.Close()
	})
	return &testLB{Balancer: b, url: s.URL, log: lg, seen: map[*backend]bool{}}
}

func (l *testLB) push(t testing.TB, hold bool, urls ...string) {
	t.Helper()
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	l.gen++
	rs := ReplicaSet{Generation: l.gen, Hold: hold}
	for i, u := range urls {
		rs.Replicas = append(rs.Replicas, Replica{ID: i + 1, URL: u})
	}
	if err := l.SetReplicas(rs); err != nil {
		t.Fatal(err)
	}
	for _, b := range l.cur.Load().backends {
		l.seen[b] = true
	}
}

func (l *testLB) pushSet(t testing.TB, rs ReplicaSet) {
	t.Helper()
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	if err := l.SetReplicas(rs); err != nil {
		t.Fatal(err)
	}
	for _, b := range l.cur.Load().backends {
		l.seen[b] = true
	}
}

// settled waits until no request is in flight on any backend ever pushed
// and fails the test if one stays, or if one went below zero.
func (l *testLB) settled(t *testing.T) {
	t.Helper()
	busy := ""
	if !testutil.WaitFor(5*time.Second, 20*time.Millisecond, func() bool {
		busy = ""
		l.seenMu.Lock()
		for b := range l.seen {
			if n := b.inflight.Load(); n != 0 {
				busy += fmt.Sprintf(" replica %d (%s): %d", b.info.ID, b.info.URL, n)
			}
		}
		l.seenMu.Unlock()
		for id, n := range l.State().InFlight {
			if n != 0 {
				busy += fmt.Sprintf(" state in_flight[%d]=%d", id, n)
			}
		}
		return busy == ""
	}) {
		t.Fatalf("in-flight counters did not return to 0:%s", busy)
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testutil.WaitFor(5*time.Second, 5*time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
