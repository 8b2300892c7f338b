package lb

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRoundRobinRotatesOverEveryReplica(t *testing.T) {
	l := newTestLB(t, Options{Policy: "ROUND_ROBIN"})
	var urls []string
	for i := 1; i <= 3; i++ {
		urls = append(urls, replicaServer(t, named(i)).URL)
	}
	l.push(t, false, urls...)
	got := map[string]int{}
	var order []string
	for i := 0; i < 30; i++ {
		code, body := get(t, http.DefaultClient, l.url+"/x")
		if code != 200 {
			t.Fatalf("status %d: %s", code, body)
		}
		got[body]++
		order = append(order, body)
	}
	for i := 1; i <= 3; i++ {
		if n := got[fmt.Sprintf("replica %d", i)]; n != 10 {
			t.Errorf("replica %d got %d of 30 requests, want 10 (%v)", i, n, got)
		}
	}
	// Rotating, not random: every replica comes once in each three.
	for i := 3; i < len(order); i++ {
		if order[i] != order[i-3] {
			t.Fatalf("order does not rotate: %v", order)
		}
	}
	l.settled(t)
}

// blocking replicas answer /block only when released, so a test can pin
// requests in flight on them.
type blocking struct {
	id      int
	release chan struct{}
	active  atomic.Int64
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/block" {
		b.active.Add(1)
		defer b.active.Add(-1)
		<-b.release
	}
	fmt.Fprintf(w, "replica %d", b.id)
}

func TestLeastLoadSendsToTheIdleReplica(t *testing.T) {
	l := newTestLB(t, Options{Policy: ""}) // the default
	if l.policy != LeastLoad {
		t.Fatalf("default policy %q", l.policy)
	}
	release := make(chan struct{})
	reps := []*blocking{{id: 1, release: release}, {id: 2, release: release}}
	l.push(t, false, replicaServer(t, reps[0]).URL, replicaServer(t, reps[1]).URL)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		get(t, http.DefaultClient, l.url+"/block")
	}()
	waitFor(t, "a blocked request", func() bool { return reps[0].active.Load()+reps[1].active.Load() == 1 })
	busy := 1
	if reps[1].active.Load() == 1 {
		busy = 2
	}
	if st := l.State(); st.InFlight[busy] != 1 || st.InFlight[3-busy] != 0 {
		t.Errorf("in flight %v, want replica %d at 1", st.InFlight, busy)
	}
	for i := 0; i < 5; i++ {
		_, body := get(t, http.DefaultClient, l.url+"/fast")
		if want := fmt.Sprintf("replica %d", 3-busy); body != want {
			t.Errorf("request %d went to %q with replica %d busy, want %q", i, body, busy, want)
		}
	}
	close(release)
	wg.Wait()
	l.settled(t)
}

func TestInstanceAwareLeastLoadWeighsByTargetQPS(t *testing.T) {
	l := newTestLB(t, Options{Policy: InstanceAwareLeastLoad})
	release := make(chan struct{})
	big, small := &blocking{id: 1, release: release}, &blocking{id: 2, release: release}
	l.pushSet(t, ReplicaSet{Generation: 1, Replicas: []Replica{
		{ID: 1, URL: replicaServer(t, big).URL, Accelerator: "A100", TargetQPS: 10},
		{ID: 2, URL: replicaServer(t, small).URL, Accelerator: "T4", TargetQPS: 1},
	}})
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(t, http.DefaultClient, l.url+"/block")
		}()
		// One at a time, so each choice sees the previous one in flight.
		waitFor(t, "request in flight", func() bool { return big.active.Load()+small.active.Load() == int64(i+1) })
	}
	// Load is in-flight / target QPS: the T4 replica is fuller with one
	// request (1/1) than the A100 one with nine (9/10).
	if s := small.active.Load(); s > 1 {
		t.Errorf("T4 replica (target 1 qps) holds %d of 6 requests, A100 (10 qps) %d; want at most 1", s, big.active.Load())
	}
	if st := l.State(); st.InFlight[1]+st.InFlight[2] != 6 {
		t.Errorf("in flight %v, want 6 in all", st.InFlight)
	}
	close(release)
	wg.Wait()
	l.settled(t)
}

// A request arriving before the controller's first push is held: the
// replicas are not known yet. Once a push says there are none (and not
// to hold), it and every later request get 503 "No ready replicas".
func TestNoReadyReplicaIs503(t *testing.T) {
	l := newTestLB(t, Options{})
	if st := l.State(); st.Known {
		t.Fatalf("state before any push: %+v, want known false", st)
	}
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		code, body := get(t, http.DefaultClient, l.url+"/v1/models")
		done <- result{code, body}
	}()
	held := func() bool {
		select {
		case r := <-done:
			t.Fatalf("request before the first push answered %d %q, want it held", r.code, r.body)
		default:
		}
		return l.State().Waiting == 1
	}
	waitFor(t, "the request before the first push to be held", held)
	l.push(t, false)
	if r := <-done; r.code != 503 || strings.TrimSpace(r.body) != NoReadyReplicas {
		t.Fatalf("got %d %q, want 503 %q", r.code, r.body, NoReadyReplicas)
	}
	if !l.State().Known {
		t.Errorf("state after a push: known false")
	}
	// Known and empty: 503 at once.
	if code, _ := get(t, http.DefaultClient, l.url+"/"); code != 503 {
		t.Fatalf("status %d, want 503", code)
	}
	if n := l.State().Answered[503]; n != 2 {
		t.Errorf("answered[503] = %d, want 2", n)
	}
	if n := countRequests(l.State()); n != 2 {
		t.Errorf("counted %d requests, want 2", n)
	}
}

func countRequests(st State) int64 {
	var n int64
	for _, p := range st.Requests {
		n += p[1]
	}
	return n
}

func TestHoldWaitsForAReplica(t *testing.T) {
	l := newTestLB(t, Options{HoldTimeout: 10 * time.Second})
	l.push(t, true)
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		code, body := get(t, http.DefaultClient, l.url+"/generate")
		done <- result{code, body}
	}()
	waitFor(t, "the request to be held", func() bool { return l.State().Waiting == 1 })
	// The held request already counts, so the autoscaler scales from zero.
	if n := countRequests(l.State()); n != 1 {
		t.Errorf("counted %d requests while held, want 1", n)
	}
	select {
	case r := <-done:
		t.Fatalf("held request answered before any replica: %d %s", r.code, r.body)
	case <-time.After(100 * time.Millisecond):
	}
	// Another push that still has no replica keeps it held.
	l.push(t, true)
	time.Sleep(50 * time.Millisecond)
	if w := l.State().Waiting; w != 1 {
		t.Fatalf("waiting %d after an empty push, want 1", w)
	}
	l.push(t, true, replicaServer(t, named(7)).URL)
	select {
	case r := <-done:
		if r.code != 200 || r.body != "replica 7" {
			t.Fatalf("got %d %q", r.code, r.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held request not served after a replica became ready")
	}
	if w := l.State().Waiting; w != 0 {
		t.Errorf("waiting %d, want 0", w)
	}
	l.settled(t)
}

func TestHoldTimeoutIs503(t *testing.T) {
	l := newTestLB(t, Options{HoldTimeout: 300 * time.Millisecond})
	l.push(t, true)
	start := time.Now()
	code, body := get(t, http.DefaultClient, l.url+"/")
	if code != 503 || strings.TrimSpace(body) != NoReadyReplicas {
		t.Fatalf("got %d %q", code, body)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Errorf("answered after %s, want about the 300ms hold timeout", d)
	}
	if w := l.State().Waiting; w != 0 {
		t.Errorf("waiting %d, want 0", w)
	}
}

func TestHeldClientThatLeavesIs499(t *testing.T) {
	l := newTestLB(t, Options{HoldTimeout: 30 * time.Second})
	l.push(t, true)
	c := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := c.Get(l.url + "/"); err == nil {
		t.Fatal("request returned while held")
	}
	waitFor(t, "499 recorded", func() bool { return l.State().Answered[499] == 1 })
	waitFor(t, "no request waiting", func() bool { return l.State().Waiting == 0 })
}

func TestClientDisconnectIs499(t *testing.T) {
	l := newTestLB(t, Options{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	l.push(t, false, replicaServer(t, slow).URL)
	c := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := c.Get(l.url + "/slow"); err == nil {
		t.Fatal("slow request returned")
	}
	waitFor(t, "499 recorded", func() bool { return l.State().Answered[499] == 1 })
	l.settled(t)
	if lg := l.log.String(); !strings.Contains(lg, "499 client closed the connection: GET /slow") || strings.Contains(lg, "goroutine ") {
		t.Errorf("log:\n%s", lg)
	}
}

func TestClientDisconnectMidStreamIs499(t *testing.T) {
	l := newTestLB(t, Options{})
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	l.push(t, false, replicaServer(t, stream).URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", l.url+"/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(res.Body).ReadString('\n')
	if line != "data: 0\n" {
		t.Fatalf("first line %q", line)
	}
	cancel()
	res.Body.Close()
	waitFor(t, "499 recorded", func() bool { return l.State().Answered[499] == 1 })
	l.settled(t)
	if lg := l.log.String(); strings.Contains(lg, "goroutine ") || strings.Contains(lg, "panic") {
		t.Errorf("stack trace in the log:\n%s", lg)
	}
}

func TestSSEEventsArriveAsTheyAreSent(t *testing.T) {
	l := newTestLB(t, Options{StreamTimeout: 10 * time.Second})
	next := make(chan struct{})
	sse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			w.(http.Flusher).Flush()
			// The next event only after the client saw this one: a
			// proxy that buffers never delivers the first.
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})
	l.push(t, false, replicaServer(t, sse).URL)
	res, err := http.Get(l.url + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	for i := 0; i < 3; i++ {
		got := make(chan string, 1)
		go func() {
			line, _ := rd.ReadString('\n')
			_, _ = rd.ReadString('\n')
			got <- line
		}()
		select {
		case line := <-got:
			if want := fmt.Sprintf("data: event %d\n", i); line != want {
				t.Fatalf("event %d: %q, want %q", i, line, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d did not arrive while the stream was open", i)
		}
		next <- struct{}{}
	}
	l.settled(t)
}

func TestStreamTimeoutBoundsAResponse(t *testing.T) {
	l := newTestLB(t, Options{StreamTimeout: 300 * time.Millisecond})
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := io.WriteString(w, "data: more\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	silent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	endlessURL, silentURL := replicaServer(t, endless).URL, replicaServer(t, silent).URL

	l.push(t, false, endlessURL)
	start := time.Now()
	res, err := http.Get(l.url + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if d := time.Since(start); d > 3*time.Second || n == 0 {
		t.Fatalf("stream ran %s (%d bytes); want it cut at about 300ms", d, n)
	}

	l.push(t, false, silentURL)
	code, body := get(t, http.DefaultClient, l.url+"/wait")
	if code != http.StatusGatewayTimeout {
		t.Fatalf("silent replica: %d %q, want 504", code, body)
	}
	waitFor(t, "504s recorded", func() bool { return l.State().Answered[504] == 2 })
	l.settled(t)
}

// A replica killed under steady load costs no request: connections it
// refuses or resets before answering are retried on the other replica,
// which the policy then prefers while the dead one is marked down.
func TestKilledReplicaUnderLoadFailsNoRequest(t *testing.T) {
	for _, policy := range []string{RoundRobin, LeastLoad} {
		t.Run(policy, func(t *testing.T) {
			r1, r2 := startReplicaProc(t, 1), startReplicaProc(t, 2)
			l := newTestLB(t, Options{Policy: policy})
			l.push(t, false, "http://"+r1.addr, "http://"+r2.addr)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var ok, failed atomic.Int64
			var firstErr atomic.Value
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						var res *http.Response
						var err error
						if i%2 == 0 {
							res, err = client.Get(l.url + "/get")
						} else {
							res, err = client.Post(l.url+"/post", "text/plain", strings.NewReader("small body"))
						}
						if err == nil {
							_, _ = io.Copy(io.Discard, res.Body)
							res.Body.Close()
							if res.StatusCode == 200 {
								ok.Add(1)
								continue
							}
							err = fmt.Errorf("status %d", res.StatusCode)
						}
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
				}(g)
			}
			time.Sleep(500 * time.Millisecond)
			before := ok.Load()
			r1.kill()
			time.Sleep(time.Second)
			close(stop)
			wg.Wait()
			if f := failed.Load(); f != 0 {
				t.Fatalf("%d of %d requests failed (first: %v)", f, f+ok.Load(), firstErr.Load())
			}
			if ok.Load()-before < 100 {
				t.Fatalf("only %d requests after the kill", ok.Load()-before)
			}
			t.Logf("%d requests, %d after the kill, 0 failed", ok.Load(), ok.Load()-before)
			if lg := l.log.String(); !strings.Contains(lg, "replica 1 (http://"+r1.addr+")") || !strings.Contains(lg, "passing it over") {
				t.Errorf("the retries left no trace in the log:\n%s", lg)
			}
			l.settled(t)
			// Now the survivor alone, then no survivor: the retries run out.
			r2.kill()
			code, body := get(t, http.DefaultClient, l.url+"/")
			if code != 500 || strings.TrimSpace(body) != "Max retries 3 exceeded" {
				t.Fatalf("all replicas dead: %d %q", code, body)
			}
			l.settled(t)
		})
	}
}

// Pushes of changing ready sets under concurrent load never leak an
// in-flight count nor drive one below zero (skypilot#10444: counters
// kept by replica URL in a map the refresh replaced).
func TestReplicaChurnLeavesNoCounterBehind(t *testing.T) {
	l := newTestLB(t, Options{Policy: LeastLoad, HoldTimeout: 5 * time.Second})
	var urls []string
	for i := 1; i <= 4; i++ {
		d := time.Duration(i) * time.Millisecond
		urls = append(urls, replicaServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(d)
			fmt.Fprint(w, "ok")
		})).URL)
	}
	l.push(t, true, urls...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int64
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for g := 0; g < 24; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := client.Get(l.url + "/")
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					n.Add(1)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		var sub []string
		for _, u := range urls {
			if rng.IntN(2) == 0 {
				sub = append(sub, u)
			}
		}
		// Ids shift with the subset, so the same URL also comes back
		// under another id (a new backend object).
		l.push(t, true, sub...)
		time.Sleep(5 * time.Millisecond)
	}
	l.push(t, true, urls...)
	close(stop)
	wg.Wait()
	if n.Load() < 200 {
		t.Fatalf("only %d requests during the churn", n.Load())
	}
	l.seenMu.Lock()
	objects := len(l.seen)
	l.seenMu.Unlock()
	t.Logf("%d requests over 200 pushes, %d backend objects", n.Load(), objects)
	l.settled(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneRetired()
	if len(l.retired) != 0 {
		t.Errorf("%d retired backends kept after their requests ended", len(l.retired))
	}
}

func TestBodiesAreRetriedAndPassedThrough(t *testing.T) {
	l := newTestLB(t, Options{})
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d %s", r.Method, r.URL.RequestURI(), len(b), r.Header.Get("X-Forwarded-For"))
	})
	// The first replica refuses connections: its port is closed.
	dead := replicaServer(t, echo)
	deadURL := dead.URL
	dead.Close()
	l.pushSet(t, ReplicaSet{Generation: 1, Replicas: []Replica{{ID: 1, URL: deadURL}, {ID: 2, URL: replicaServer(t, echo).URL}}})
	for _, size := range []int{10, 1 << 20, 1<<20 + 1} {
		for i := 0; i < 4; i++ {
			body := bytes.Repeat([]byte("x"), size)
			res, err := http.Post(l.url+"/p/a?q=1", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			want := fmt.Sprintf("POST /p/a?q=1 %d 127.0.0.1", size)
			if size > 1<<20 {
				// Too large to keep for a retry: a request that hit the
				// dead replica fails instead.
				if res.StatusCode != 200 && res.StatusCode != 502 {
					t.Fatalf("large body: %d %s", res.StatusCode, got)
				}
				if res.StatusCode == 200 && string(got) != want {
					t.Fatalf("got %q, want %q", got, want)
				}
				continue
			}
			if res.StatusCode != 200 || string(got) != want {
				t.Fatalf("size %d: %d %q, want %q", size, res.StatusCode, got, want)
			}
		}
	}
	l.settled(t)
}

func TestSetReplicasRejectsABadURL(t *testing.T) {
	l := newTestLB(t, Options{})
	err := l.SetReplicas(ReplicaSet{Replicas: []Replica{{ID: 1, URL: "10.0.0.1:8080"}}})
	if err == nil || !strings.Contains(err.Error(), "replica 1") {
		t.Fatalf("err %v", err)
	}
	if _, err := New(Options{Policy: "fastest"}); err == nil || !strings.Contains(err.Error(), "round_robin") {
		t.Fatalf("bad policy: %v", err)
	}
}

func TestCountsKeepTenMinutesOfSeconds(t *testing.T) {
	var c counts
	const t0 = 1_800_000_000
	for i := 0; i < 5; i++ {
		c.hit(t0)
	}
	c.hit(t0 + 1)
	c.hit(t0 + 3)
	got := c.snapshot(t0 + 3)
	want := [][2]int64{{t0, 5}, {t0 + 1, 1}, {t0 + 3, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("snapshot %v, want %v", got, want)
	}
	// Ten minutes on, the slot of t0 is taken over by the new second and
	// the old seconds have left the window.
	c.hit(t0 + window)
	if got := c.snapshot(t0 + window); fmt.Sprint(got) != fmt.Sprint([][2]int64{{t0 + 1, 1}, {t0 + 3, 1}, {t0 + window, 1}}) {
		t.Fatalf("after wrap %v", got)
	}
	if got := c.snapshot(t0 + window + 4); fmt.Sprint(got) != fmt.Sprint([][2]int64{{t0 + window, 1}}) {
		t.Fatalf("later %v", got)
	}
	// Concurrent hits on one second all count.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				c.hit(t0 + 2*window)
			}
		}()
	}
	wg.Wait()
	if got := c.snapshot(t0 + 2*window); len(got) != 1 || got[0][1] != 8000 {
		t.Fatalf("concurrent: %v", got)
	}
}

func TestConnectionFailedClassifiesErrors(t *testing.T) {
	if connectionFailed(context.Canceled) || connectionFailed(errors.New("tls: bad certificate")) {
		t.Error("non-connection errors classified as connection failures")
	}
	if !connectionFailed(io.EOF) {
		t.Error("EOF before a response is a dropped connection")
	}
}

// The proxy's own upstream client: kept-alive connections the replica
// closed meanwhile are replaced without failing the request or marking
// the replica down, and the HTTP/1.1 corners come through.
func TestUpstreamConnections(t *testing.T) {
	var conns atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
		case "/chunked":
			w.Header().Set("Trailer", "X-Sum")
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "part%d ", i)
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Sum", "3")
			return
		case "/early":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
		}
		w.Header().Set("X-Method", r.Method)
		fmt.Fprintf(w, "%s %d %s", r.Method, len(b), r.Header.Get("X-Client"))
	})
	rep := httptestServer(t, h, &conns)
	l := newTestLB(t, Options{})
	l.push(t, false, rep.URL)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(method, path string, body io.Reader) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, l.url+path, body)
		req.Header.Set("X-Client", "c1")
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	for i := 0; i < 4; i++ {
		// Longer than the replica's idle timeout: the kept-alive
		// connection is closed by the time the next request takes it.
		time.Sleep(150 * time.Millisecond)
		if res, body := do("GET", "/", nil); res.StatusCode != 200 || body != "GET 0 c1" {
			t.Fatalf("after idle %d: %d %q", i, res.StatusCode, body)
		}
		if res, body := do("POST", "/", strings.NewReader("abc")); res.StatusCode != 200 || body != "POST 3 c1" {
			t.Fatalf("POST after idle %d: %d %q", i, res.StatusCode, body)
		}
	}
	if lg := l.log.String(); strings.Contains(lg, "passing it over") {
		t.Errorf("a replica that only closed idle connections was marked down:\n%s", lg)
	}
	if res, body := do("HEAD", "/", nil); res.StatusCode != 200 || body != "" || res.Header.Get("X-Method") != "HEAD" {
		t.Fatalf("HEAD: %d %q %v", res.StatusCode, body, res.Header)
	}
	if res, body := do("GET", "/close", nil); res.StatusCode != 200 || body != "GET 0 c1" {
		t.Fatalf("Connection: close: %d %q", res.StatusCode, body)
	}
	res, body := do("GET", "/chunked", nil)
	if res.StatusCode != 200 || body != "part0 part1 part2 " || res.Trailer.Get("X-Sum") != "3" {
		t.Fatalf("chunked: %d %q trailer %v", res.StatusCode, body, res.Trailer)
	}
	if res, body := do("GET", "/early", nil); res.StatusCode != 200 || body != "GET 0 c1" {
		t.Fatalf("103 then 200: %d %q", res.StatusCode, body)
	}
	// A chunked request body (no length) is buffered and sent with one.
	pr, pw := io.Pipe()
	go func() {
		fmt.Fprint(pw, "streamed ")
		fmt.Fprint(pw, "body")
		pw.Close()
	}()
	if res, body := do("PUT", "/", pr); res.StatusCode != 200 || body != "PUT 13 c1" {
		t.Fatalf("chunked PUT: %d %q", res.StatusCode, body)
	}
	// Expect: 100-continue is answered by the replica, not waited on.
	req, _ := http.NewRequest("POST", l.url+"/", strings.NewReader("0123456789"))
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("X-Client", "c2")
	res2, err := (&http.Client{Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	if res2.StatusCode != 200 || string(b) != "POST 10 c2" {
		t.Fatalf("100-continue: %d %q", res2.StatusCode, b)
	}
	l.settled(t)
	// Keep-alive works: sequential requests reuse the connection.
	before := conns.Load()
	for i := 0; i < 20; i++ {
		do("GET", "/", nil)
	}
	if n := conns.Load() - before; n > 1 {
		t.Errorf("20 sequential requests opened %d connections to the replica, want at most 1", n)
	}
}

// httptestServer is a replica whose idle connections time out after
// 100ms, counting the connections it accepts.
func httptestServer(t *testing.T, h http.Handler, conns *atomic.Int64) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.IdleTimeout = 100 * time.Millisecond
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func TestBrokenRequestBodyIs400(t *testing.T) {
	l := newTestLB(t, Options{})
	l.push(t, false, replicaServer(t, named(1)).URL)
	conn, err := net.Dial("tcp", strings.TrimPrefix(l.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: lb\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 400 || !strings.Contains(string(b), "reading the request body") {
		t.Fatalf("%d %q", res.StatusCode, b)
	}
	l.settled(t)
}
