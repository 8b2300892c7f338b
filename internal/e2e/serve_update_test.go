package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// updatePolicy keeps 2 replicas (the target rate is far above the load)
// and allows up to maxReplicas during an update.
func updatePolicy(maxReplicas int) string {
	return fastProbe(30) + fmt.Sprintf(`replica_policy:
  min_replicas: 2
  max_replicas: %d
  target_qps_per_replica: 10000
`, maxReplicas)
}

// updateUnderLoad brings up version 1 of a 2-replica service, runs
// steady traffic through it, updates it to version 2 with `sky serve
// update` in the given mode, waits until only version 2 serves, and
// returns every answer. It fails the test on any failed request and on
// more live replicas than maxReplicas at any sample of the status.
func updateUnderLoad(t *testing.T, name, mode string, maxReplicas int) []answer {
	e := serveEnv(t)
	e.requireServe()
	bin := buildReplica(t, "")
	v1 := writeFile(t, "v1.yaml", e.localYAML(bin, 1, updatePolicy(maxReplicas)))
	// Version 2 takes a while to come up, so the update spends seconds
	// with both versions live, where the cap and the retries matter.
	v2 := writeFile(t, "v2.yaml", e.localYAML(bin, 2, updatePolicy(maxReplicas), "STARTUP_DELAY: 2s"))
	e.serveUp(name, v1)
	e.waitService(name, 60*time.Second, "2 READY of version 1", readyN(2, 1))
	ep := e.endpoint(name)

	sampler := e.sampleStatus(name)
	l := startLoad(ep+"/", 4, 0, 10*time.Millisecond)
	defer l.Stop()
	time.Sleep(time.Second)
	began := time.Now()
	args := []string{"serve", "update", "-y", name, v2}
	if mode != "" {
		args = append(args, "--mode", mode)
	}
	r := e.must(args...)
	t.Logf("%s", r)
	s := e.waitService(name, 90*time.Second, "2 READY of version 2 and nothing of version 1", func(s svcRecord) bool {
		return s.Version == 2 && readyN(2, 2)(s)
	})
	t.Logf("update (%s) done %.1fs after sky serve update: %v", mode, time.Since(began).Seconds(), s)
	if !slices.Equal(s.ActiveVersions, []int{2}) {
		t.Errorf("after the update only version 2 serves, yet active_versions is %v", s.ActiveVersions)
	}
	// Old replicas leave the ready set before they leave the table: give
	// the load balancer's swap a moment, then only version 2 may answer.
	time.Sleep(time.Second)
	as, _ := l.snapshot()
	mark := len(as)
	time.Sleep(2 * time.Second)
	l.Stop()
	most, at, samples := sampler.Stop()
	as, failed := l.snapshot()
	t.Logf("%d requests answered (by version %v, by replica %v), %d failed; at most %d live replicas (%d with those shutting down) in %d status samples",
		len(as), byVersion(as), byReplica(as), failed, most, sampler.held(), samples)
	if failed > 0 {
		t.Errorf("%d requests failed during the %s update:\n%s", failed, mode, l.failures())
	}
	if most > maxReplicas {
		t.Errorf("max_replicas %d exceeded during the %s update: %d live replicas: %v", maxReplicas, mode, most, at)
	}
	if samples < 10 {
		t.Errorf("only %d status samples during the update: the max_replicas check saw too little", samples)
	}
	if v := byVersion(as); v[1] == 0 || v[2] == 0 {
		t.Errorf("answers by version %v: want both 1 (before) and 2 (after)", v)
	}
	if after := byVersion(as[mark:]); after[1] > 0 || after[2] == 0 {
		t.Errorf("once the update was done, answers by version: %v, want only 2", after)
	}
	return as
}

// TestServeRollingUpdate: `sky serve update` (rolling) of a 2-replica
// service allowed 3 replicas, under continuous traffic: no request fails,
// answers switch from version 1 to version 2, and there are never more
// than 3 live replicas.
func TestServeRollingUpdate(t *testing.T) {
	parallel(t)
	updateUnderLoad(t, "roll", "", 3)
}

// TestServeBlueGreenUpdate: `sky serve update --mode blue_green` of a
// 2-replica service allowed 4 replicas, under continuous traffic: no
// request fails, never more than 4 live replicas, and once a version-2
// answer has come back, no request sent after it is answered by version
// 1 (traffic switches at once, never mixed).
func TestServeBlueGreenUpdate(t *testing.T) {
	parallel(t)
	as := updateUnderLoad(t, "bg", "blue_green", 4)
	var first time.Time
	for _, a := range as {
		if a.version == 2 && (first.IsZero() || a.end.Before(first)) {
			first = a.end
		}
	}
	mixed := 0
	var example answer
	for _, a := range as {
		if a.version == 1 && a.start.After(first) {
			if mixed == 0 {
				example = a
			}
			mixed++
		}
	}
	if mixed > 0 {
		t.Errorf("blue-green: %d requests sent after the first version-2 answer (%s) were answered by version 1 (first: replica %d, sent %s)",
			mixed, first.Format("15:04:05.000"), example.replica, example.start.Format("15:04:05.000"))
	}
}
