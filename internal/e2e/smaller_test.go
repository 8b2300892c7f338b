package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecRacingDown: an exec following its job when a down takes the
// cluster says so and fails; an exec sent while a down runs either lands
// before it or finds the cluster gone, never a half-removed node.
func TestExecRacingDown(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-d", "-c", "c", "--", "sleep 300")
	x := e.start("exec", "c", "--", "echo following; sleep 120")
	x.waitOutput(" following\n", 60*time.Second)
	e.must("down", "-y", "c")
	if code := x.wait(60 * time.Second); code != 1 || !strings.Contains(x.stderr.String(), `Cluster "c" was torn down while job 2 was running`) {
		t.Errorf("exec whose cluster went down: exit %d, want 1 and the reason\n%s", code, x)
	}
	for i := range 6 {
		name := fmt.Sprintf("r%d", i)
		e.must("launch", "-y", "-d", "-c", name, "--", "sleep 300")
		d := e.start("down", "-y", name)
		time.Sleep(time.Duration(i) * 60 * time.Millisecond)
		r := e.exec(cmdTimeout, nil, "exec", name, "--", "echo raced")
		ok := (r.code == 0 && strings.Contains(r.stdout, "raced")) ||
			(r.code == 1 && (strings.Contains(r.stderr, `Cluster "`+name+`" does not exist`) || strings.Contains(r.stderr, "was torn down")))
		if !ok {
			t.Errorf("exec racing down (after %d ms): want its job run or the cluster named gone\n%s", i*60, r)
		}
		if code := d.wait(60 * time.Second); code != 0 {
			t.Errorf("down of %s: exit %d\n%s", name, code, d)
		}
	}
}

// TestServerDiesMidStream: a follower whose server is killed says the
// server stopped and how to re-attach, not just "unexpected EOF".
func TestServerDiesMidStream(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-d", "-c", "c", "--", "echo streaming; sleep 300")
	f := e.start("logs", "c", "1")
	f.waitOutput("streaming", 60*time.Second)
	if err := syscall.Kill(e.serverPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := f.wait(30 * time.Second); code != 1 {
		t.Errorf("follower of a killed server: exit %d, want 1\n%s", code, f)
	}
	for _, want := range []string{"the API server stopped", "sky api start", "re-attach with `sky api logs "} {
		if !strings.Contains(f.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, f)
		}
	}
	e.must("down", "-y", "c")
}

// TestAPIStopThroughLoginEndpoint: `sky api login -e http://user:pw@127.0.0.1:PORT`
// names this machine's server; `sky api stop` stops it.
func TestAPIStopThroughLoginEndpoint(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("status")
	pid := e.serverPID()
	e.must("api", "login", "-e", fmt.Sprintf("http://someone:pw@127.0.0.1:%d", e.port))
	if r := e.exec(cmdTimeout, nil, "api", "stop"); r.code != 0 || !strings.Contains(r.stdout, "SkyPilot API server stopped.") {
		t.Errorf("api stop through a loopback login endpoint:\n%s", r)
	}
	if !waitFor(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
		t.Errorf("server pid %d still runs after `sky api stop`", pid)
	}
	e.must("api", "logout")
}

// TestRefusePublicOnce: the refusal to serve 0.0.0.0 without auth is said
// once per start, also when an earlier refused start left it in the log.
func TestRefusePublicOnce(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	const line = "refusing to serve on 0.0.0.0 without authentication"
	for i := range 2 {
		r := e.exec(cmdTimeout, nil, "api", "start", "--host", "0.0.0.0")
		if r.code != 1 || strings.Count(r.out(), line) != 1 {
			t.Errorf("start %d: want exit 1 and the refusal once\n%s", i+1, r)
		}
	}
}
