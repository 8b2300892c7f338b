package lb

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkServeLB measures `sky-lb serve-lb` (the built load balancer
// beside SKYGO_TEST_BINARY, as the service controller runs it) in front of two replica processes against one
// replica served directly, with a keep-alive load generator at 32
// connections and at one, and reports throughput and median latency of
// both, their ratios, and the load balancer's memory. Client, load
// balancer and replicas share the machine's cores, so the ratio also
// prices the CPU the proxy takes from the others.
//
// `make bench-serve` runs it (SKYGO_BENCH_SERVE=1, SKYGO_TEST_BINARY=bin/sky);
// SKYGO_BENCH_SERVE_SECONDS sets each measurement's length (default 5);
// SKYGO_BENCH_LB_ENV adds environment to the load balancer only (e.g.
// "GOMAXPROCS=1 GOGC=200"), to try runtime settings.
func BenchmarkServeLB(b *testing.B) {
	if os.Getenv("SKYGO_BENCH_SERVE") == "" {
		b.Skip("set SKYGO_BENCH_SERVE=1 (make bench-serve)")
	}
	bin := os.Getenv("SKYGO_TEST_BINARY")
	if bin == "" {
		b.Fatal("SKYGO_TEST_BINARY must name the built sky binary (make bench-serve builds it and sky-lb beside it)")
	}
	bin = filepath.Join(filepath.Dir(bin), "sky-lb")
	what := "sky-lb serve-lb"
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("the load balancer is not beside SKYGO_TEST_BINARY (%v); make bench-serve builds it", err)
	}
	secs := 5.0
	if v := os.Getenv("SKYGO_BENCH_SERVE_SECONDS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			b.Fatalf("SKYGO_BENCH_SERVE_SECONDS=%q is not a positive number", v)
		}
		secs = f
	}
	dur := time.Duration(secs * float64(time.Second))

	r1, r2 := startReplicaProc(b, 1), startReplicaProc(b, 2)
	dir, err := os.MkdirTemp("", "lbbench")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "lb.sock")
	var lbAddr string
	var cmd *exec.Cmd
	var exited chan struct{}
	// A free port may be taken between the probe and the child's listen:
	// exit code 2 says so, and another port is tried.
	for try := 0; ; try++ {
		lbAddr = freeAddr(b)
		cmd = exec.Command(bin, "serve-lb", "--service", "bench", "--listen", lbAddr, "--control", sock)
		if e := os.Getenv("SKYGO_BENCH_LB_ENV"); e != "" {
			cmd.Env = append(os.Environ(), strings.Fields(e)...)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		exited = make(chan struct{})
		go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(cmd, exited)
		if waitSocket(sock, exited) {
			break
		}
		<-exited
		if cmd.ProcessState.ExitCode() != 2 || try == 4 {
			b.Fatalf("%s did not start: %s", what, stderr.String())
		}
	}
	defer func() {
		_ = Dial(sock).Shutdown(context.Background())
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	ctl := Dial(sock)
	if err := ctl.SetReplicas(context.Background(), ReplicaSet{Generation: 1, Replicas: []Replica{
		{ID: 1, URL: "http://" + r1.addr}, {ID: 2, URL: "http://" + r2.addr},
	}}); err != nil {
		b.Fatal(err)
	}
	// Warm both paths (connections, pools, the load balancer's heap).
	load(b, r1.addr, 32, time.Second)
	load(b, lbAddr, 32, time.Second)

	type row struct {
		conns       int
		direct, via result
	}
	var rows []row
	// Direct and proxied runs alternate in short slices, so a neighbour's
	// burst on the shared cores weighs on both alike.
	const slices = 5
	for _, c := range []int{32, 1} {
		var direct, via samples
		for i := 0; i < slices; i++ {
			direct.add(load(b, r1.addr, c, dur/slices))
			via.add(load(b, lbAddr, c, dur/slices))
		}
		rows = append(rows, row{c, direct.result(), via.result()})
	}
	user, sys := procCPU(b, cmd.Process.Pid)
	mem := procMem(b, cmd.Process.Pid)
	st, err := ctl.State(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()

	fmt.Printf("\nSkyServe load balancer: 2 replica processes behind `%s` (%s), %.0fs per run, %d cores shared by client, load balancer and replicas\n", what, bin, secs, runtime.NumCPU())
	fmt.Printf("%-5s %14s %14s %10s %12s %12s %12s\n", "conns", "direct req/s", "LB req/s", "LB/direct", "direct p50", "LB p50", "p50 added")
	for _, r := range rows {
		fmt.Printf("%-5d %14.0f %14.0f %10.2f %12s %12s %12s\n", r.conns, r.direct.rps, r.via.rps, r.via.rps/r.direct.rps,
			r.direct.p50.Round(time.Microsecond), r.via.p50.Round(time.Microsecond), (r.via.p50 - r.direct.p50).Round(time.Microsecond))
		if r.direct.errors+r.via.errors > 0 {
			fmt.Printf("      errors: direct %d, LB %d\n", r.direct.errors, r.via.errors)
		}
	}
	// RssFile is the binary's pages (shared with every other process of
	// the same file on the machine); RssAnon is the load balancer's own.
	fmt.Printf("LB RSS %.1f MiB (peak %.1f MiB): %.1f MiB its own (RssAnon), %.1f MiB pages of the binary (RssFile)\n",
		mem["VmRSS"], mem["VmHWM"], mem["RssAnon"], mem["RssFile"])
	fmt.Printf("goals: LB/direct >= 0.8 at 32 connections, p50 added <= 0.1ms at 1, RSS <= 15 MiB\n")
	var counted int64
	for _, p := range st.Requests {
		counted += p[1]
	}
	fmt.Printf("LB counted %d requests; in flight now %v; LB CPU per request %.1fµs user + %.1fµs system\n\n",
		counted, st.InFlight, user.Seconds()*1e6/float64(counted), sys.Seconds()*1e6/float64(counted))
	b.ReportMetric(rows[0].via.rps/rows[0].direct.rps, "lb/direct-rps@32")
	b.ReportMetric(float64(rows[1].via.p50-rows[1].direct.p50)/float64(time.Microsecond), "p50-added-us@1")
	b.ReportMetric(mem["VmRSS"], "lb-rss-MiB")
}

type result struct {
	rps    float64
	p50    time.Duration
	errors int
}

// samples are the latencies of the requests of one or more runs.
type samples struct {
	lat    []time.Duration
	d      time.Duration
	errors int
}

func (s *samples) add(o samples) {
	s.lat = append(s.lat, o.lat...)
	s.d += o.d
	s.errors += o.errors
}

func (s *samples) result() result {
	slices.Sort(s.lat)
	return result{rps: float64(len(s.lat)) / s.d.Seconds(), p50: s.lat[len(s.lat)/2], errors: s.errors}
}

// load runs conns keep-alive connections against addr for d, each sending
// GET / and reading the answer before the next. It speaks just enough
// HTTP/1.1 (a Content-Length body) to stay cheap beside what it measures.
func load(b *testing.B, addr string, conns int, d time.Duration) samples {
	b.Helper()
	var wg sync.WaitGroup
	lat := make([][]time.Duration, conns)
	errs := make([]int, conns)
	deadline := time.Now().Add(d)
	req := []byte("GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: lbbench\r\n\r\n")
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lat[i] = make([]time.Duration, 0, 1<<16)
			var conn net.Conn
			var br *bufio.Reader
			for time.Now().Before(deadline) {
				if conn == nil {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						errs[i]++
						time.Sleep(10 * time.Millisecond)
						continue
					}
					conn, br = c, bufio.NewReaderSize(c, 4096)
				}
				t0 := time.Now()
				if _, err := conn.Write(req); err != nil || readResponse(br) != nil {
					errs[i]++
					conn.Close()
					conn = nil
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
			if conn != nil {
				conn.Close()
			}
		}(i)
	}
	wg.Wait()
	s := samples{d: d}
	for i := range lat {
		s.lat = append(s.lat, lat[i]...)
		s.errors += errs[i]
	}
	if len(s.lat) == 0 {
		b.Fatalf("no request to %s succeeded", addr)
	}
	return s
}

// readResponse reads one 200 response with a Content-Length body.
func readResponse(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200")) {
		return fmt.Errorf("status %q", bytes.TrimSpace(line))
	}
	n := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && strings.EqualFold(string(line[:15]), "content-length:") {
			n, err = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			if err != nil {
				return err
			}
		}
	}
	if n < 0 {
		return fmt.Errorf("no Content-Length")
	}
	_, err = br.Discard(n)
	return err
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitSocket waits for the child's control socket, false if it exited.
func waitSocket(sock string, exited chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := Dial(sock).State(context.Background()); err == nil {
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// procCPU reads the user and system CPU time pid used so far.
func procCPU(b *testing.B, pid int) (user, sys time.Duration) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// the 14th and 15th of the line, in clock ticks (100 a second).
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut) * 10 * time.Millisecond, time.Duration(st) * 10 * time.Millisecond
}

// procMem reads the memory lines of /proc/PID/status, in MiB.
func procMem(b *testing.B, pid int) map[string]float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			out[strings.TrimSuffix(f[0], ":")] = kb / 1024
		}
	}
	return out
}
