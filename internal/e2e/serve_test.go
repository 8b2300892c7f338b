package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServeReplicaKill: a 2-replica service answers through the endpoint
// `sky serve status --endpoint` prints, from both replicas, for plain
// requests, any method, server-sent events (streamed, not buffered) and a
// WebSocket. Then, under steady traffic, every process of one replica's
// node dies by SIGKILL and its cluster directory disappears, as a
// preempted VM would: no request fails (the load balancer retries on the
// other replica and drops the dead one), and the controller replaces it
// with a new replica, READY, so the service has 2 again.
func TestServeReplicaKill(t *testing.T) {
	parallel(t)
	e := serveEnv(t)
	e.requireServe()
	bin := buildReplica(t, "")
	yaml := writeFile(t, "svc.yaml", e.localYAML(bin, 1, fastProbe(30)+"replicas: 2\n"))
	began := time.Now()
	r := e.serveUp("kill", yaml)
	if !strings.Contains(r.out(), "Endpoint URL:") {
		t.Errorf("sky serve up: no Endpoint URL line:\n%s", r)
	}
	s := e.waitService("kill", 60*time.Second, "2 READY", readyN(2, 1))
	t.Logf("2 replicas READY %.1fs after serve up: %v", time.Since(began).Seconds(), s)
	if s.Status != "READY" {
		t.Errorf("service with 2 READY replicas: status %s, want READY", s.Status)
	}
	ep := e.endpoint("kill")

	// Both replicas answer; every path and method goes through.
	reachesReplicas(t, ep, 2, 1)
	resp, err := http.Post(ep+"/echo", "text/plain", strings.NewReader("ping-body"))
	if err != nil {
		t.Fatalf("POST /echo: %v", err)
	}
	b := make([]byte, 200)
	n, _ := resp.Body.Read(b)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b[:n]), "POST replica=") || !strings.Contains(string(b[:n]), "ping-body") {
		t.Errorf("POST /echo through the load balancer: %d %q", resp.StatusCode, b[:n])
	}
	if code, _ := get(t, ep+"/nope", 10*time.Second); code != http.StatusNotFound {
		t.Errorf("GET /nope through the load balancer: %d, want the replica's 404", code)
	}
	at, lines := sseTimes(t, ep+"/sse?n=3&ms=400")
	if len(at) != 3 {
		t.Errorf("SSE through the load balancer: %d events %q, want 3", len(at), lines)
	} else if at[2]-at[0] < 600*time.Millisecond {
		t.Errorf("SSE through the load balancer: events arrived at %v: buffered, not streamed", at)
	}
	if g, echo, err := wsEcho(ep, "hello-ws"); err != nil || !strings.HasPrefix(g, "replica=") || echo != "hello-ws" {
		t.Errorf("WebSocket through the load balancer: greeting %q echo %q err %v", g, echo, err)
	}

	// Steady traffic; one replica's node dies under it.
	l := startLoad(ep+"/", 4, 0, 10*time.Millisecond)
	defer l.Stop()
	time.Sleep(2 * time.Second)
	victim := s.Replicas[0]
	orig := []int{s.Replicas[0].ID, s.Replicas[1].ID}
	killed := e.preemptNode(victim.Name)
	killedAt := time.Now()
	t.Logf("killed %d processes of replica %d (%s)", killed, victim.ID, victim.Name)
	if killed == 0 {
		t.Fatalf("no process of replica %d's node %s found to kill", victim.ID, victim.Name)
	}
	var statuses []string
	s = e.waitService("kill", 60*time.Second, "2 READY with a replacement", func(s svcRecord) bool {
		for _, r := range s.Replicas {
			if r.ID == victim.ID && (len(statuses) == 0 || statuses[len(statuses)-1] != r.Status) {
				statuses = append(statuses, r.Status)
			}
		}
		rd := s.ready(1)
		return len(rd) == 2 && !slices.ContainsFunc(rd, func(r svcReplica) bool { return r.ID == victim.ID })
	})
	t.Logf("replaced %.1fs after the kill (the killed replica went %v): %v", time.Since(killedAt).Seconds(), statuses, s)
	var fresh int
	for _, r := range s.ready(1) {
		if !slices.Contains(orig, r.ID) {
			fresh = r.ID
		}
	}
	// The new replica takes traffic too.
	if !waitFor(10*time.Second, func() bool { as, _ := l.snapshot(); return byReplica(as)[fresh] > 0 }) {
		as, _ := l.snapshot()
		t.Errorf("the replacement replica %d got no request within 10s of being READY (answers by replica: %v)", fresh, byReplica(as))
	}
	l.Stop()
	as, failed := l.snapshot()
	t.Logf("%d requests answered (by replica %v), %d failed", len(as), byReplica(as), failed)
	if failed > 0 {
		t.Errorf("%d requests failed while a replica was killed and replaced:\n%s", failed, l.failures())
	}
	if len(as) < 100 {
		t.Errorf("only %d requests answered: the load was not steady", len(as))
	}
	// The replacement has a new id and so a new cluster name; the killed
	// replica's cluster goes.
	if !waitFor(30*time.Second, func() bool { _, ok := e.status(false)[victim.Name]; return !ok }) {
		t.Errorf("cluster %s of the killed replica still listed by sky status 30s after its replacement was READY", victim.Name)
	}
}

// TestServeNeverReady: a replica whose readiness probe never passes is
// FAILED_INITIAL_DELAY once the initial delay is over, its cluster is torn
// down, and `sky serve status` says why.
func TestServeNeverReady(t *testing.T) {
	parallel(t)
	e := serveEnv(t)
	e.requireServe()
	bin := buildReplica(t, "")
	yaml := writeFile(t, "svc.yaml", e.localYAML(bin, 1, fastProbe(8)+"replicas: 1\n", "HEALTH_FAIL: \"1\""))
	e.serveUp("never", yaml)
	began := time.Now()
	var rep svcReplica
	s := e.waitService("never", 60*time.Second, "with replica 1 FAILED_INITIAL_DELAY", func(s svcRecord) bool {
		for _, r := range s.Replicas {
			if r.ID == 1 {
				rep = r
				return r.Status == "FAILED_INITIAL_DELAY"
			}
		}
		return false
	})
	t.Logf("replica 1 FAILED_INITIAL_DELAY %.1fs after serve up: %v", time.Since(began).Seconds(), s)
	if s.Status != "FAILED" {
		t.Errorf("service whose only replica failed: status %s, want FAILED", s.Status)
	}
	// The fixture answers 503 on /health: the reason is the probe's
	// answer, not a replica that never came up.
	if !strings.Contains(rep.Reason, "503") {
		t.Errorf("replica 1 FAILED_INITIAL_DELAY: reason %q, want the probe's 503", rep.Reason)
	}
	if !waitFor(30*time.Second, func() bool { _, ok := e.status(false)[rep.Name]; return !ok }) {
		t.Errorf("cluster %s of the failed replica still listed by sky status 30s after the failure: %v", rep.Name, e.status(false))
	}
	if slices.Contains(e.localClusters(), rep.Name) {
		t.Errorf("the local infrastructure still has the failed replica's cluster %s", rep.Name)
	}
	out := e.must("serve", "status", "never").out()
	if !strings.Contains(out, "FAILED_INITIAL_DELAY") {
		t.Errorf("sky serve status never: no FAILED_INITIAL_DELAY:\n%s", out)
	}
	if v := e.must("serve", "status", "-v", "never").out(); rep.Reason != "" && !strings.Contains(out+v, rep.Reason) {
		t.Errorf("sky serve status [-v] never does not say why the replica failed (%q):\n%s\n%s", rep.Reason, out, v)
	}
	// The controller does not keep launching replicas that cannot pass
	// their probe (service.md: a failed newest version stops scaling).
	time.Sleep(3 * time.Second)
	if s = e.service("never"); s.nonTerminal() > 0 {
		t.Logf("note: after the failure the controller runs replicas again: %v", s)
	}
	e.must("serve", "down", "-y", "never")
}

// TestServeLogsAndDown: `sky serve logs` shows a replica's output, the
// controller's log and the load balancer's; `sky serve down` removes the
// service, its replica clusters and its load balancer, whose port then
// stops answering.
func TestServeLogsAndDown(t *testing.T) {
	parallel(t)
	e := serveEnv(t)
	e.requireServe()
	bin := buildReplica(t, "")
	yaml := writeFile(t, "svc.yaml", e.localYAML(bin, 1, fastProbe(30)+"replicas: 1\n"))
	e.serveUp("logs", yaml)
	s := e.waitService("logs", 60*time.Second, "1 READY", readyN(1, 1))
	ep := e.endpoint("logs")
	if code, body := get(t, ep+"/", 10*time.Second); code != 200 || !strings.HasPrefix(body, "replica=1 version=1") {
		t.Fatalf("GET %s/: %d %q", ep, code, body)
	}

	rl := e.must("serve", "logs", "logs", "1", "--no-follow")
	if !strings.Contains(rl.out(), "replica=1 version=1 listening on ") {
		t.Errorf("sky serve logs logs 1 --no-follow: no line of the replica's run:\n%s", rl.out())
	}
	cl := e.must("serve", "logs", "logs", "--controller", "--no-follow")
	if !strings.Contains(strings.ToLower(cl.out()), "replica") {
		t.Errorf("sky serve logs logs --controller --no-follow says nothing of replicas:\n%s", cl.out())
	}
	ll := e.must("serve", "logs", "logs", "--load-balancer", "--no-follow")
	if strings.TrimSpace(ll.out()) == "" {
		t.Errorf("sky serve logs logs --load-balancer --no-follow: empty")
	}
	t.Logf("controller log:\n%s\nload balancer log:\n%s", cl.out(), ll.out())
	if tl := e.must("serve", "logs", "logs", "1", "--no-follow", "--tail", "1"); !strings.Contains(tl.out(), "listening on") {
		t.Errorf("sky serve logs logs 1 --no-follow --tail 1: not the replica's last line:\n%s", tl.out())
	}

	lbs := e.lbProcs("logs")
	if len(lbs) != 1 {
		t.Errorf("load balancer processes of service logs: %v, want one", lbs)
	}
	e.must("serve", "down", "-y", "logs")
	if !waitFor(30*time.Second, func() bool { m, _, ok := e.tryServeStatus(); _, has := m["logs"]; return ok && !has }) {
		t.Errorf("service logs still listed 30s after sky serve down: %v", e.service("logs"))
	}
	for _, r := range s.Replicas {
		if _, ok := e.status(false)[r.Name]; ok {
			t.Errorf("replica cluster %s still listed by sky status after sky serve down", r.Name)
		}
		if slices.Contains(e.localClusters(), r.Name) {
			t.Errorf("replica cluster %s still on the local infrastructure after sky serve down", r.Name)
		}
	}
	if lbAnswers(ep) {
		// Answered: by this service's load balancer, or by another test's
		// that took the freed port.
		for _, pid := range listenerPids(ep) {
			if slices.ContainsFunc(lbs, func(p proc) bool { return p.pid == pid }) {
				t.Errorf("the load balancer's port (%s) still answers after sky serve down (pid %d)", ep, pid)
			}
		}
	}
	if left := e.lbProcs("logs"); len(left) > 0 {
		t.Errorf("load balancer processes survive sky serve down: %v", left)
	}
	t.Logf("after down: %s", e.exec(cmdTimeout, nil, "serve", "status", "logs"))
}

// TestServeServerKilled: the API server, which runs the service and
// replica controllers, is killed -9 while a service's replicas launch
// and are probed, and again while the service goes down. The next
// server's controllers take every step again or find it taken: the
// service ends with its two replicas READY and answering, no other
// cluster made, and after the down no replica cluster is left.
func TestServeServerKilled(t *testing.T) {
	parallel(t)
	e := serveEnv(t)
	e.requireServe()
	bin := buildReplica(t, "")
	yaml := writeFile(t, "svc.yaml", e.localYAML(bin, 1, fastProbe(30)+"replicas: 2\n"))
	e.serveUp("sk", yaml)
	for _, after := range []time.Duration{200 * time.Millisecond, 700 * time.Millisecond} {
		time.Sleep(after)
		if !e.killServer(t) {
			t.Logf("no server to kill after %s", after)
		}
		e.service("sk") // starts a new server
	}
	s := e.waitService("sk", 60*time.Second, "2 READY", readyN(2, 1))
	reachesReplicas(t, e.endpoint("sk"), 2, 1)
	clusters := e.status(false)
	for name := range clusters {
		if !slices.ContainsFunc(s.Replicas, func(r svcReplica) bool { return r.Name == name }) {
			t.Errorf("cluster %s made beside the replicas %v", name, s)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.exec(cmdTimeout, nil, "serve", "down", "-y", "sk")
	}()
	if !waitFor(30*time.Second, func() bool {
		m, _, ok := e.tryServeStatus()
		rec, has := m["sk"]
		return ok && (!has || rec.Status == "SHUTTING_DOWN")
	}) {
		t.Fatalf("service sk not going down: %v", e.service("sk"))
	}
	e.killServer(t)
	<-done
	if !waitFor(60*time.Second, func() bool {
		m, _, ok := e.tryServeStatus()
		_, has := m["sk"]
		return ok && !has && len(e.status(false)) == 0
	}) {
		t.Fatalf("service sk or its clusters still there after down: %v %+v\n%s", e.service("sk"), e.status(false), e.serverLogTail())
	}
}
