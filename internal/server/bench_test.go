package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Benchmarks print ratios against a baseline measured in the same run, so
// they mean something on any machine.

func vmRSSMB(tb testing.TB, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

func fastHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 400, MaxIdleConnsPerHost: 400}, Timeout: 30 * time.Second}
}

func get(tb testing.TB, c *http.Client, url string) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-SkyPilot-API-Version", "1")
	resp, err := c.Do(req)
	if err != nil {
		tb.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Errorf("GET %s: %d", url, resp.StatusCode)
	}
}

// BenchmarkAPIInfo: wall time of a whole `sky api info` process against
// one direct GET /api/health (the floor any CLI call pays).
func BenchmarkAPIInfo(b *testing.B) {
	e := newEnv(b)
	e.startServer()
	hc := fastHTTP()
	get(b, hc, e.url()+"/api/health")
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		e.mustSky("api", "info")
	}
	cli := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for i := 0; i < b.N; i++ {
		get(b, hc, e.url()+"/api/health")
	}
	direct := time.Since(start)
	b.ReportMetric(float64(cli.Microseconds())/float64(b.N)/1000, "cli_ms/op")
	b.ReportMetric(float64(direct.Microseconds())/float64(b.N)/1000, "http_ms/op")
	b.ReportMetric(float64(cli)/float64(direct), "cli/http_ratio")
}

var rssOnce struct {
	sync.Once
	idle, after float64
	dur         time.Duration
}

// BenchmarkServerRSS: resident memory of an idle server and after 10,000
// requests (one in ten a real submitted request, the rest status reads).
func BenchmarkServerRSS(b *testing.B) {
	rssOnce.Do(func() {
		e := newEnv(b)
		srv := e.startServer()
		hc := fastHTTP()
		get(b, hc, e.url()+"/api/health")
		time.Sleep(500 * time.Millisecond)
		rssOnce.idle = vmRSSMB(b, srv.Process.Pid)
		start := time.Now()
		var wg sync.WaitGroup
		work := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					if i%10 == 0 {
						req, _ := http.NewRequest("POST", e.url()+"/debug/sleep", strings.NewReader(`{"seconds":0}`))
						resp, err := hc.Do(req)
						if err != nil {
							b.Error(err)
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						continue
					}
					get(b, hc, e.url()+"/api/status?limit=20")
				}
			}()
		}
		for i := 0; i < 10000; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		rssOnce.dur = time.Since(start)
		rssOnce.after = vmRSSMB(b, srv.Process.Pid)
	})
	b.ReportMetric(rssOnce.idle, "idle_rss_MB")
	b.ReportMetric(rssOnce.after, "after10k_rss_MB")
	b.ReportMetric(rssOnce.after/rssOnce.idle, "after/idle_ratio")
	b.ReportMetric(10000/rssOnce.dur.Seconds(), "req/s")
	if rssOnce.idle > 40 {
		b.Errorf("idle RSS %.1f MB exceeds the 40 MB budget", rssOnce.idle)
	}
}

var loadOnce struct {
	sync.Once
	statusP99, healthP99, rps float64
}

func p99(ds []time.Duration) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if len(ds) == 0 {
		return 0
	}
	return float64(ds[len(ds)*99/100].Microseconds()) / 1000
}

// BenchmarkConcurrentStatus: 200 clients x 50 GET /api/status while the
// long pool is full of running work; meanwhile /api/health is sampled, and
// its p99 must stay within 50 ms.
func BenchmarkConcurrentStatus(b *testing.B) {
	loadOnce.Do(func() {
		e := newEnv(b)
		e.startServer()
		hc := fastHTTP()
		for i := 0; i < 8; i++ { // more than the local long pool holds
			resp, err := hc.Post(e.url()+"/debug/sleep", "application/json", strings.NewReader(`{"seconds":30}`))
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
		var mu sync.Mutex
		var status, health []time.Duration
		stop := make(chan struct{})
		var hw sync.WaitGroup
		hw.Add(1)
		go func() {
			defer hw.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				get(b, hc, e.url()+"/api/health")
				mu.Lock()
				health = append(health, time.Since(t0))
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
		start := time.Now()
		var wg sync.WaitGroup
		for c := 0; c < 200; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := make([]time.Duration, 0, 50)
				for i := 0; i < 50; i++ {
					t0 := time.Now()
					get(b, hc, e.url()+"/api/status")
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				status = append(status, local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(stop)
		hw.Wait()
		loadOnce.statusP99, loadOnce.healthP99 = p99(status), p99(health)
		loadOnce.rps = float64(len(status)) / elapsed.Seconds()
		// Leave nothing running.
		req, _ := http.NewRequest("POST", e.url()+"/api/cancel", strings.NewReader(`{"all_users":true}`))
		if resp, err := hc.Do(req); err == nil {
			var ids []string
			json.NewDecoder(resp.Body).Decode(&ids)
			resp.Body.Close()
		}
	})
	b.ReportMetric(loadOnce.rps, "status_req/s")
	b.ReportMetric(loadOnce.statusP99, "status_p99_ms")
	b.ReportMetric(loadOnce.healthP99, "health_p99_ms")
	b.ReportMetric(loadOnce.healthP99/50, "health_p99/budget_ratio")
	if loadOnce.healthP99 > 50 {
		b.Errorf("health p99 %.1f ms under load exceeds 50 ms", loadOnce.healthP99)
	}
}
