package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeSSHPool: a 2-replica service on an SSH node pool (real sshd
// hosts, each its own network namespace): the replica fixture goes to the
// hosts as the task's workdir, each replica serves on its host's address,
// and both answer through the load balancer on this machine.
func TestServeSSHPool(t *testing.T) {
	// One at a time with the other tests of the sshd hosts (e2eSet): a pool on them is one test's.
	sshHarness.parallel(t)
	h := sshPoolHosts(t)
	e := serveEnv(t)
	h.writePool(t, e)
	e.requireServe()
	t.Cleanup(func() {
		// The hosts go back as they came (TestSSHNodePool, sharing them,
		// expects `sky ssh up` to copy the binary to each).
		e.exec(cmdTimeout, nil, "serve", "down", "-a", "-y")
		e.exec(cmdTimeout, nil, "down", "-a", "-y")
		if r := e.exec(cmdTimeout, nil, "ssh", "down"); r.code != 0 {
			t.Errorf("cleanup: %s", r)
		}
	})
	wd := t.TempDir()
	buildReplica(t, wd)
	yaml := svcYAML("ssh/"+e2ePool, "./replica", 8080, 1, fastProbe(60)+"replicas: 2\n")
	yaml = strings.Replace(yaml, "run:", "workdir: "+wd+"\nrun:", 1)
	p := filepath.Join(t.TempDir(), "svc.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	e.serveUp("sshsvc", p)
	s := e.waitService("sshsvc", 150*time.Second, "2 READY", readyN(2, 1))
	t.Logf("2 replicas READY on the pool %.1fs after serve up: %v", time.Since(began).Seconds(), s)
	for _, r := range s.Replicas {
		onHost := false
		for _, ip := range h.IPs {
			onHost = onHost || strings.Contains(r.Endpoint, ip+":8080")
		}
		if !onHost {
			t.Errorf("replica %d endpoint %q is not a pool host's address (%v) at the service port", r.ID, r.Endpoint, h.IPs)
		}
	}
	ep := e.endpoint("sshsvc")
	reachesReplicas(t, ep, 2, 1)
	l := startLoad(ep+"/", 4, 0, 5*time.Millisecond)
	time.Sleep(3 * time.Second)
	l.Stop()
	as, failed := l.snapshot()
	t.Logf("%d requests in 3s through the load balancer (by replica %v), %d failed", len(as), byReplica(as), failed)
	if failed > 0 {
		t.Errorf("%d requests to the SSH-pool service failed:\n%s", failed, l.failures())
	}
	e.must("serve", "down", "-y", "sshsvc")
	if !waitFor(60*time.Second, func() bool {
		st := e.status(false)
		for _, r := range s.Replicas {
			if _, ok := st[r.Name]; ok {
				return false
			}
		}
		return true
	}) {
		t.Errorf("replica clusters still listed 60s after sky serve down: %v", e.status(false))
	}
}
