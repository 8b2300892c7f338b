package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeAutoscale: with min 1, max 3 and a target of 2 requests/s per
// replica, a load of 6 requests/s (3× the target) scales the service to 3
// READY replicas after the upscale delay, without a failed request and
// without ever exceeding max_replicas; when the load stops, the service
// goes back to 1 replica after the downscale delay. The server decides
// every second over a 10 s QPS window (serveEnv).
func TestServeAutoscale(t *testing.T) {
	parallel(t)
	e := serveEnv(t)
	e.requireServe()
	bin := buildReplica(t, "")
	yaml := writeFile(t, "svc.yaml", e.localYAML(bin, 1, fastProbe(30)+`replica_policy:
  min_replicas: 1
  max_replicas: 3
  target_qps_per_replica: 2
  upscale_delay_seconds: 2
  downscale_delay_seconds: 3
`))
	e.serveUp("auto", yaml)
	e.waitService("auto", 60*time.Second, "1 READY", readyN(1, 1))
	ep := e.endpoint("auto")
	sampler := e.sampleStatus("auto")

	began := time.Now()
	l := startLoad(ep+"/", 4, 6, 0)
	defer l.Stop()
	s := e.waitService("auto", 60*time.Second, "3 READY under 3× the target load", func(s svcRecord) bool { return len(s.ready(1)) == 3 })
	t.Logf("3 READY %.1fs after the load began: %v", time.Since(began).Seconds(), s)
	if s.Target != 3 {
		t.Errorf("under 3× the target load: target_num_replicas %d, want 3", s.Target)
	}
	if s.QPS < 3 {
		t.Errorf("under 6 requests/s the service reports qps %.2f", s.QPS)
	}
	time.Sleep(2 * time.Second)
	l.Stop()
	as, failed := l.snapshot()
	t.Logf("%d requests answered in %.1fs (by replica %v), %d failed", len(as), time.Since(began).Seconds(), byReplica(as), failed)
	if failed > 0 {
		t.Errorf("%d requests failed while the service scaled up:\n%s", failed, l.failures())
	}

	stopped := time.Now()
	s = e.waitService("auto", 60*time.Second, "back to 1 replica after the load stopped", func(s svcRecord) bool {
		return s.nonTerminal() == 1 && len(s.ready(1)) == 1
	})
	t.Logf("back to 1 replica %.1fs after the load stopped: %v", time.Since(stopped).Seconds(), s)
	if most, at, n := sampler.Stop(); most > 3 {
		t.Errorf("max_replicas 3 exceeded: %d live replicas seen (of %d samples): %v", most, n, at)
	}
	if code, body := get(t, ep+"/", 10*time.Second); code != http.StatusOK {
		t.Errorf("after scaling down: GET /: %d %q", code, body)
	}
}

// TestServeFromZero: with min_replicas 0 the service starts with no
// replica; the first request is held by the load balancer (not a 503)
// until a replica is READY and then answered; two requests arriving
// together both are. Once the load is gone the service goes back to
// zero, and the next request is held and answered again.
func TestServeFromZero(t *testing.T) {
	parallel(t)
	e := serveEnv(t)
	e.requireServe()
	bin := buildReplica(t, "")
	yaml := writeFile(t, "svc.yaml", e.localYAML(bin, 1, fastProbe(30)+`replica_policy:
  min_replicas: 0
  max_replicas: 2
  target_qps_per_replica: 5
  upscale_delay_seconds: 1
  downscale_delay_seconds: 2
`))
	e.serveUp("zero", yaml)
	e.waitService("zero", 30*time.Second, "listening with no replica", func(s svcRecord) bool { return s.Endpoint != "" })
	ep := e.endpoint("zero")
	time.Sleep(2 * time.Second)
	if s := e.service("zero"); len(s.Replicas) != 0 || s.Status != "NO_REPLICA" {
		t.Fatalf("min_replicas 0 and no request: %v, want NO_REPLICA with no replica", s)
	}

	held := func(round int) {
		began := time.Now()
		var wg sync.WaitGroup
		codes, bodies := make([]int, 2), make([]string, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if codes[i], bodies[i], err = fetch(ep+"/", 90*time.Second); err != nil {
					bodies[i] = err.Error()
				}
			}()
		}
		wg.Wait()
		took := time.Since(began)
		t.Logf("round %d: held requests answered after %.1fs: %d %q, %d %q", round, took.Seconds(), codes[0], bodies[0], codes[1], bodies[1])
		for i := range 2 {
			if _, _, ok := parseIdent(bodies[i]); codes[i] != http.StatusOK || !ok {
				t.Errorf("round %d: a request at zero replicas: %d %q, want it held and answered", round, codes[i], strings.TrimSpace(bodies[i]))
			}
		}
		if took < 500*time.Millisecond {
			t.Errorf("round %d: requests at zero replicas answered in %s: nothing was held", round, took)
		}
	}
	held(1)
	e.waitService("zero", 30*time.Second, "1 READY after the first request", func(s svcRecord) bool { return len(s.ready(1)) >= 1 })

	stopped := time.Now()
	s := e.waitService("zero", 60*time.Second, "back to zero replicas", func(s svcRecord) bool { return s.nonTerminal() == 0 })
	t.Logf("back to zero %.1fs after the last request: %v", time.Since(stopped).Seconds(), s)
	if s = e.waitService("zero", 10*time.Second, "NO_REPLICA", func(s svcRecord) bool { return len(s.Replicas) == 0 }); s.Status != "NO_REPLICA" {
		t.Errorf("scaled to zero: %v, want NO_REPLICA", s)
	}
	held(2)
}
