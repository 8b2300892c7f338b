package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a child's output, read by the test while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child is a sky command running in the background, in its own process
// group, so the test can signal it the way a user or a supervisor does.
type child struct {
	t              testing.TB
	args           []string
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	code           int
}

// start runs sky in the background; cleanup kills its group by pid if
// it is still running.
func (e *skyEnv) start(args ...string) *child {
	e.t.Helper()
	c := &child{t: e.t, args: args, done: make(chan struct{})}
	c.cmd = exec.Command(e.bin, args...)
	c.cmd.Env = e.env
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	c.cmd.WaitDelay = 5 * time.Second
	if err := c.cmd.Start(); err != nil {
		e.t.Fatalf("start sky %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		err := c.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			c.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				c.code = 128 + int(ws.Signal())
			}
		default:
			c.code = -1
		}
		close(c.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	})
	return c
}

func (c *child) String() string {
	return "sky " + strings.Join(c.args, " ") + "\n--- stdout:\n" + c.stdout.String() + "--- stderr:\n" + c.stderr.String()
}

// waitOutput waits (bounded) until the child printed s.
func (c *child) waitOutput(s string, timeout time.Duration) {
	c.t.Helper()
	if !waitFor(timeout, func() bool { return strings.Contains(c.stdout.String()+c.stderr.String(), s) }) {
		c.t.Fatalf("%q not printed within %s by %s", s, timeout, c)
	}
}

// signal sends sig to the child alone (not its group): a `kill PID`.
func (c *child) signal(sig syscall.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %s: %v", sig, c, err)
	}
}

// wait waits (bounded) for the child to exit and returns its exit code
// (128+N when signal N ended it).
func (c *child) wait(timeout time.Duration) int {
	c.t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(timeout):
		c.t.Fatalf("still running after %s: %s", timeout, c)
		return -1
	}
}

// request is the part of a `sky api status -o json` record the tests read.
type request struct {
	RequestID string `json:"request_id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Error     string `json:"error"`
}

// activeRequest is the one unfinished request named name.
func (e *skyEnv) activeRequest(name string) request {
	e.t.Helper()
	var recs []request
	e.mustJSON(&recs, "api", "status", "-o", "json")
	var found []request
	for _, r := range recs {
		if r.Name == name {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		e.t.Fatalf("want one active %s request, have %+v", name, found)
	}
	return found[0]
}

// waitRequest polls `sky api status` until request id has status want.
func (e *skyEnv) waitRequest(id, want string, timeout time.Duration) request {
	e.t.Helper()
	var last request
	ok := waitFor(timeout, func() bool {
		var recs []request
		e.mustJSON(&recs, "api", "status", "-a", "-o", "json", id)
		if len(recs) == 1 {
			last = recs[0]
		}
		return last.Status == want
	})
	if !ok {
		e.t.Fatalf("request %s is %s after %s, want %s (error %s)\n%s", id, last.Status, timeout, want, last.Error, e.serverLogTail())
	}
	return last
}

// logTails are the node processes that follow a job's log for a request.
func (e *skyEnv) logTails() []proc {
	var out []proc
	for _, p := range procsWithEnv(e.home) {
		if strings.Contains(p.cmdline, "agent logs") && strings.Contains(p.cmdline, "--follow") {
			out = append(out, p)
		}
	}
	return out
}

// TestLogsFollowerStopped: a `sky logs` killed by SIGTERM cancels its
// request itself; one killed by SIGKILL sends nothing, and the server
// notices the closed stream. Either way the request ends CANCELLED, the
// tail on the node is gone, and `sky down` does not wait for it.
func TestLogsFollowerStopped(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-d", "-c", "c", "--", "echo started; sleep 300")
	// SIGTERM: the client cancels as its user; SIGKILL: the server sees
	// the stream close.
	reasons := map[syscall.Signal]string{syscall.SIGTERM: "cancelled by", syscall.SIGKILL: "the client following it went away"}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		f := e.start("logs", "c", "1")
		f.waitOutput("started", 60*time.Second)
		req := e.activeRequest("sky.logs")
		if len(e.logTails()) == 0 {
			t.Fatalf("no log tail runs on the node while %s follows", f)
		}
		f.signal(sig)
		if code := f.wait(30 * time.Second); code != 128+int(sig) {
			t.Errorf("%v: exit code %d, want %d\n%s", sig, code, 128+int(sig), f)
		}
		if got := e.waitRequest(req.RequestID, "CANCELLED", 30*time.Second); !strings.Contains(got.Error, reasons[sig]) {
			t.Errorf("%v: request error %s, want it to say %q", sig, got.Error, reasons[sig])
		}
		var left []proc
		if !waitFor(10*time.Second, func() bool { left = e.logTails(); return len(left) == 0 }) {
			t.Errorf("%v: log tails survive their cancelled request: %v", sig, left)
		}
	}
	if j := e.queue("c")[1]; j.Status != "RUNNING" {
		t.Errorf("the job itself is %s, want it left RUNNING", j.Status)
	}
	e.must("down", "-y", "c")
}

// TestFollowersDoNotBlockLaunch: more clients following logs than there
// are long workers; a new launch, an exec and a down still run, and the
// down ends the followers' job.
func TestFollowersDoNotBlockLaunch(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-d", "-c", "c", "--", "echo started; sleep 300")
	var followers []*child
	for range 10 {
		followers = append(followers, e.start("logs", "c", "1"))
	}
	for _, f := range followers {
		f.waitOutput("started", 60*time.Second)
	}
	if r := e.must("launch", "-y", "-c", "c2", "--", "echo second cluster"); !strings.Contains(r.stdout, "second cluster") {
		t.Errorf("launch beside the followers did not stream its job:\n%s", r)
	}
	e.must("exec", "c", "-d", "--", "true")
	e.must("down", "-y", "c")
	for _, f := range followers {
		f.wait(60 * time.Second)
	}
}

// TestLaunchInterruptKeepsRunning: Ctrl-C while `sky launch` follows its
// job leaves the request running, says how to re-attach or cancel, and
// a `sky down` of the cluster does not wait for the job to end.
func TestLaunchInterruptKeepsRunning(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	l := e.start("launch", "-y", "-c", "c", "--", "echo started; sleep 300")
	l.waitOutput(" started\n", 60*time.Second) // the job's line, not the "Command to run:" echo
	req := e.activeRequest("sky.launch")
	l.signal(syscall.SIGINT)
	if code := l.wait(30 * time.Second); code != 130 {
		t.Errorf("exit code %d after Ctrl-C, want 130\n%s", code, l)
	}
	short := req.RequestID[:8]
	for _, want := range []string{
		"⚙︎ Request will continue running asynchronously.",
		"├── View logs: sky api logs " + short,
		"├── Or, visit: http://127.0.0.1:",
		"/api/stream?request_id=" + short,
		"└── To cancel the request, run: sky api cancel " + short,
	} {
		if !strings.Contains(l.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, l)
		}
	}
	var recs []request
	e.mustJSON(&recs, "api", "status", "-o", "json", req.RequestID)
	if len(recs) != 1 || recs[0].Status != "RUNNING" {
		t.Fatalf("launch request after Ctrl-C: %+v, want RUNNING", recs)
	}
	e.must("down", "-y", "c")
	// Its job gone with the cluster, the launch request ends too.
	var last request
	if !waitFor(30*time.Second, func() bool {
		var recs []request
		e.mustJSON(&recs, "api", "status", "-a", "-o", "json", req.RequestID)
		if len(recs) == 1 {
			last = recs[0]
		}
		return last.Status != "RUNNING" && last.Status != "PENDING"
	}) {
		t.Errorf("launch request still %s after its cluster was torn down", last.Status)
	}
}

// TestFiftyFollowersThenLaunch is the load: 50 clients follow one
// long job, a launch of another cluster still completes in normal time,
// and closing the followers cancels every one of their requests and
// leaves no tail on the node.
func TestFiftyFollowersThenLaunch(t *testing.T) {
	// Sequential: a storm of concurrent clients by design; alone, neither it nor a neighbour's bounded waits absorb the other's load.
	e := newEnv(t)
	e.must("launch", "-y", "-d", "-c", "c", "--", "echo started; sleep 600")
	var followers []*child
	for range 50 {
		followers = append(followers, e.start("logs", "c", "1"))
	}
	for _, f := range followers {
		f.waitOutput("started", 90*time.Second)
	}
	began := time.Now()
	if r := e.exec(60*time.Second, nil, "launch", "-y", "-c", "c2", "--", "echo beside fifty"); r.code != 0 || !strings.Contains(r.stdout, "beside fifty") {
		t.Fatalf("launch beside 50 followers:\n%s\n%s", r, e.serverLogTail())
	}
	t.Logf("launch beside 50 followers took %s", time.Since(began).Round(time.Millisecond))
	// Half go as Ctrl-C does, half vanish without a word.
	for i, f := range followers {
		sig := syscall.SIGINT
		if i%2 == 1 {
			sig = syscall.SIGKILL
		}
		f.signal(sig)
	}
	for _, f := range followers {
		f.wait(30 * time.Second)
	}
	var logsReqs []request
	if !waitFor(30*time.Second, func() bool {
		var recs []request
		e.mustJSON(&recs, "api", "status", "-a", "-l", "all", "-o", "json")
		logsReqs = logsReqs[:0]
		done := true
		for _, r := range recs {
			if r.Name == "sky.logs" {
				logsReqs = append(logsReqs, r)
				done = done && r.Status == "CANCELLED"
			}
		}
		return done && len(logsReqs) == 50
	}) {
		t.Errorf("the followers' requests after they closed (want 50, all CANCELLED): %+v", logsReqs)
	}
	var left []proc
	if !waitFor(10*time.Second, func() bool { left = e.logTails(); return len(left) == 0 }) {
		t.Errorf("%d log tails survive their closed followers", len(left))
	}
	e.must("down", "-y", "c", "c2")
}
