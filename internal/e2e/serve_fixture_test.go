package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// TestReplicaFixture checks the replica fixture and the load generator
// directly, without SkyGo, so that a serve test failing through the load
// balancer is not the fixture's fault: identity line, health switched by
// a file, a streamed event stream, the WebSocket echo, and answers
// counted per replica.
func TestReplicaFixture(t *testing.T) {
	parallel(t)
	bin := buildReplica(t, "")
	port := testutil.FreePort(t)
	failFile := filepath.Join(t.TempDir(), "unhealthy")
	cmd := exec.Command(bin)
	cmd.Env = []string{fmt.Sprintf("PORT=%d", port), "SKYPILOT_SERVE_REPLICA_ID=7", "VERSION=3", "HEALTH_FAIL_FILE=" + failFile, "STARTUP_DELAY=300ms"}
	outPath := filepath.Join(t.TempDir(), "out")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout = outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if !waitFor(10*time.Second, func() bool { return lbAnswers(base) }) {
		t.Fatalf("the fixture does not listen on %s", base)
	}

	if code, body := get(t, base+"/", 5*time.Second); code != 200 || strings.TrimSpace(body) != "replica=7 version=3" {
		t.Errorf("GET /: %d %q", code, body)
	}
	if code, _ := get(t, base+"/health", 5*time.Second); code != 200 {
		t.Errorf("GET /health: %d, want 200", code)
	}
	if err := os.WriteFile(failFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, base+"/health", 5*time.Second); code != http.StatusServiceUnavailable {
		t.Errorf("GET /health with %s present: %d, want 503", failFile, code)
	}
	began := time.Now()
	if code, body := get(t, base+"/slow?ms=300", 5*time.Second); code != 200 || !strings.HasPrefix(body, "replica=7") || time.Since(began) < 300*time.Millisecond {
		t.Errorf("GET /slow?ms=300: %d %q after %s", code, body, time.Since(began))
	}
	at, lines := sseTimes(t, base+"/sse?n=3&ms=300")
	if len(at) != 3 || at[2]-at[0] < 500*time.Millisecond || lines[2] != "replica=7 version=3 event=2" {
		t.Errorf("SSE: events %q at %v", lines, at)
	}
	if g, echo, err := wsEcho(base, "hi there"); err != nil || g != "replica=7 version=3" || echo != "hi there" {
		t.Errorf("WebSocket: greeting %q echo %q err %v", g, echo, err)
	}

	l := startLoad(base+"/", 3, 50, 0)
	time.Sleep(time.Second)
	l.Stop()
	as, failed := l.snapshot()
	if failed > 0 || len(as) < 30 || len(as) > 60 || byReplica(as)[7] != len(as) || byVersion(as)[3] != len(as) {
		t.Errorf("load at 50/s for 1s: %d answers (by replica %v), %d failed:\n%s", len(as), byReplica(as), failed, l.failures())
	}
	l = startLoad(base+"/nope", 2, 0, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	l.Stop()
	if _, failed := l.snapshot(); failed == 0 || !strings.Contains(l.failures(), "HTTP 404") {
		t.Errorf("load on a 404 path: %d failures:\n%s", failed, l.failures())
	}
	if b, _ := os.ReadFile(outPath); !strings.Contains(string(b), "replica=7 version=3 listening on 0.0.0.0:") {
		t.Errorf("the fixture's first line: %q", b)
	}
}
