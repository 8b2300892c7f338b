package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// BenchmarkNodeRuntime measures the node runtime against what nodes got
// before it, in the same run: file size (each architecture) against the
// server program (the binary that used to be copied to nodes), and the
// peak RSS and CPU time of one agent verb (`sky-node agent status --json`
// on a node with no daemon: it reads the node's job table and answers)
// beside `true` and the server program's `version` (its start-up alone,
// the floor of any verb it ran). Medians of SKYGO_BENCH_NODE_RUNS runs
// (default 21), under GNU time.
//
// `make bench-node` runs it (SKYGO_BENCH_NODE=1, SKYGO_TEST_BINARY=bin/sky,
// the runtime beside it).
func BenchmarkNodeRuntime(b *testing.B) {
	if os.Getenv("SKYGO_BENCH_NODE") == "" {
		b.Skip("set SKYGO_BENCH_NODE=1 (make bench-node)")
	}
	sky := os.Getenv("SKYGO_TEST_BINARY")
	if sky == "" {
		b.Fatal("SKYGO_TEST_BINARY must name the built sky binary, with the runtime beside it (make bench-node builds them)")
	}
	if _, err := os.Stat(testutil.TimeBin); err != nil {
		b.Skipf("%s (GNU time) measures peak RSS here: %v", testutil.TimeBin, err)
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
	server := filepath.Join(dir, "sky-server")
	serverSize := size(server)
	fmt.Printf("\nNode runtime against the server program (%.1f MB, what nodes got before):\n", serverSize)
	for _, a := range []string{"amd64", "arm64"} {
		s := size(filepath.Join(dir, "sky-node-linux-"+a))
		fmt.Printf("  sky-node-linux-%s: %5.1f MB (%.3fx sky-server; goal <= 15 MB)\n", a, s, s/serverSize)
		b.ReportMetric(s, "MB-"+a)
	}

	node := filepath.Join(dir, "sky-node-linux-"+runtime.GOARCH)
	home := b.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmds := []struct {
		name string
		argv []string
	}{
		{"true", []string{"true"}},
		{"sky-server version", []string{server, "version"}},
		{"sky-node agent status", []string{node, "agent", "status", "--json"}},
	}
	samples := make([][]testutil.Sample, len(cmds))
	for _, c := range cmds { // warm the page cache
		if _, err := testutil.Measure(env, c.argv); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
	}
	b.ResetTimer()
	for range runs {
		for i, c := range cmds {
			s, err := testutil.Measure(env, c.argv)
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			samples[i] = append(samples[i], s)
		}
	}
	b.StopTimer()
	fmt.Printf("median of %d runs each, alternating:\n", runs)
	med := make([]testutil.Sample, len(cmds))
	for i, c := range cmds {
		med[i] = testutil.Median(samples[i])
		fmt.Printf("  %-22s peak RSS %5.1f MiB, CPU %s\n", c.name+":", float64(med[i].RSSKB)/1024, med[i].CPU.Round(100*time.Microsecond))
	}
	rn := float64(med[2].RSSKB) / 1024
	fmt.Printf("  agent verb: %.1f MiB (goal <= 15 MB), %.2fx sky-server's start-up alone, %.2fx true\n\n",
		rn, float64(med[2].RSSKB)/float64(med[1].RSSKB), float64(med[2].RSSKB)/float64(max(med[0].RSSKB, 1)))
	b.ReportMetric(rn, "node-rss-MiB")
	b.ReportMetric(float64(med[2].RSSKB)/float64(med[1].RSSKB), "rss-node/server")
	b.ReportMetric(float64(med[2].CPU)/float64(max(med[1].CPU, 1)), "cpu-node/server")
}
