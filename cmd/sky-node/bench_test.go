package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkNodeRuntime compares the node runtime with the full sky binary
// it replaces on nodes, in the same run: file size (each architecture),
// and the peak RSS and CPU time of one agent verb (`agent status --json`
// on a node with no daemon: it reads the node's job table and answers)
// run as `sky-node agent` and as `sky agent`. Medians of
// SKYGO_BENCH_NODE_RUNS runs (default 21).
//
// `make bench-node` runs it (SKYGO_BENCH_NODE=1, SKYGO_TEST_BINARY=bin/sky,
// the node runtimes beside it).
func BenchmarkNodeRuntime(b *testing.B) {
	if os.Getenv("SKYGO_BENCH_NODE") == "" {
		b.Skip("set SKYGO_BENCH_NODE=1 (make bench-node)")
	}
	sky := os.Getenv("SKYGO_TEST_BINARY")
	if sky == "" {
		b.Fatal("SKYGO_TEST_BINARY must name the built sky binary, with the node runtimes beside it (make bench-node builds them)")
	}
	runs := 21
	if v := os.Getenv("SKYGO_BENCH_NODE_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SKYGO_BENCH_NODE_RUNS=%q is not a positive number", v)
		}
		runs = n
	}
	dir := filepath.Dir(sky)
	size := func(p string) float64 {
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatalf("%v (make bench-node builds it)", err)
		}
		return float64(fi.Size()) / 1e6
	}
	skySize := size(sky)
	fmt.Printf("\nNode runtime against the full sky binary (%.1f MB):\n", skySize)
	for _, a := range []string{"amd64", "arm64"} {
		s := size(filepath.Join(dir, "sky-node-linux-"+a))
		fmt.Printf("  sky-node-linux-%s: %5.1f MB (%.3fx sky; goal <= 15 MB)\n", a, s, s/skySize)
		b.ReportMetric(s, "MB-"+a)
	}

	node := filepath.Join(dir, "sky-node-linux-"+runtime.GOARCH)
	home := b.TempDir()
	// rusage of one run: peak RSS (KiB) and user+system CPU.
	verb := func(bin string) (int64, time.Duration) {
		cmd := exec.Command(bin, "agent", "status", "--json")
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		cmd.Dir = home
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s agent status --json: %v\n%s", bin, err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return ru.Maxrss, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var rssNode, rssSky []int64
	var cpuNode, cpuSky []time.Duration
	verb(node) // warm the page cache for both
	verb(sky)
	b.ResetTimer()
	for i := 0; i < runs; i++ {
		r, c := verb(node)
		rssNode, cpuNode = append(rssNode, r), append(cpuNode, c)
		r, c = verb(sky)
		rssSky, cpuSky = append(rssSky, r), append(cpuSky, c)
	}
	b.StopTimer()
	mr := func(v []int64) float64 { slices.Sort(v); return float64(v[len(v)/2]) / 1024 }
	mc := func(v []time.Duration) time.Duration { slices.Sort(v); return v[len(v)/2] }
	rn, rs, cn, cs := mr(rssNode), mr(rssSky), mc(cpuNode), mc(cpuSky)
	fmt.Printf("`agent status --json`, median of %d runs each, alternating:\n", runs)
	fmt.Printf("  sky-node agent: peak RSS %5.1f MiB, CPU %s (goal <= 15 MB)\n", rn, cn.Round(100*time.Microsecond))
	fmt.Printf("  sky agent:      peak RSS %5.1f MiB, CPU %s (baseline)\n", rs, cs.Round(100*time.Microsecond))
	fmt.Printf("  ratio:          RSS %.2fx, CPU %.2fx\n\n", rn/rs, float64(cn)/float64(cs))
	b.ReportMetric(rn, "node-rss-MiB")
	b.ReportMetric(rn/rs, "rss-node/sky")
	b.ReportMetric(float64(cn)/float64(cs), "cpu-node/sky")
}
