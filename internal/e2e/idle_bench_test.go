package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skygo/skygo/internal/bundle"
	"github.com/skygo/skygo/internal/server"
	"github.com/skygo/skygo/internal/testutil"
)

// BenchmarkServerIdle measures the API server's idle memory as
// bench-queued does, over several starts: each in a fresh HOME with the
// built-in catalog, `sky check`, two seconds, then /debug/memstats (a GC
// that returns free memory) and the server's smaps_rollup. It prints the
// medians of RSS, its anonymous part and the heap in use.
//
// Before each start the server binary leaves the page cache, so every
// start reads it the same way: the kernel maps a whole large folio of the
// page cache where one page of it is touched, and the folios a file has
// depend on how it was last written or read (a build just written by `go
// build` or cp has other folios than one read back), which moved the
// binary's resident pages by 1.5 MiB between otherwise equal runs.
//
// With SKYGO_BENCH_IDLE_BASELINE naming a directory that holds another
// build's sky-server (the build before a change), the two alternate
// start by start and the ratio is printed: the baseline of the same run.
// `make bench-idle` runs it (SKYGO_BENCH_IDLE=1, SKYGO_TEST_BINARY=bin/sky;
// SKYGO_BENCH_IDLE_RUNS starts of each, default 5).
func BenchmarkServerIdle(b *testing.B) {
	if os.Getenv("SKYGO_BENCH_IDLE") == "" {
		b.Skip("set SKYGO_BENCH_IDLE=1 (make bench-idle) to measure the idle API server")
	}
	runs := envInt("SKYGO_BENCH_IDLE_RUNS", 5)
	base := os.Getenv("SKYGO_BENCH_IDLE_BASELINE")
	if base != "" {
		if _, err := os.Stat(filepath.Join(base, "sky-server")); err != nil {
			b.Fatalf("SKYGO_BENCH_IDLE_BASELINE=%s: want a directory holding a sky-server build: %v", base, err)
		}
	}
	type figure struct{ rss, anon, heap float64 } // MiB
	measure := func(runtimeDir string) figure {
		e := newEnv(b)
		dir := runtimeDir
		if dir == "" {
			dir = filepath.Dir(e.bin)
		}
		evict(b, filepath.Join(dir, "sky-server"))
		e.env = slices.DeleteFunc(e.env, func(kv string) bool { return strings.HasPrefix(kv, "SKYPILOT_CATALOG_DIR=") })
		e.env = append(e.env, "SKYGO_CATALOG_URL=http://127.0.0.1:1")
		debugPort := testutil.FreePort(b)
		e.env = append(e.env, fmt.Sprintf("%s=127.0.0.1:%d", server.EnvDebugAddr, debugPort))
		if runtimeDir != "" {
			e.env = append(e.env, bundle.EnvDir+"="+runtimeDir)
		}
		e.must("check")
		pid := e.serverPID()
		time.Sleep(2 * time.Second)
		heap := debugMemStats(b, debugPort)
		m := procKB(pid, "smaps_rollup", "Rss", "Anonymous")
		return figure{float64(m["Rss"]) / 1024, float64(m["Anonymous"]) / 1024, float64(heap.HeapInuse) / (1 << 20)}
	}
	var now, before []figure
	b.ResetTimer()
	for range runs {
		now = append(now, measure(""))
		if base != "" {
			before = append(before, measure(base))
		}
	}
	b.StopTimer()
	median := func(fs []figure) figure {
		pick := func(get func(figure) float64) float64 {
			v := make([]float64, len(fs))
			for i, f := range fs {
				v[i] = get(f)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		return figure{pick(func(f figure) float64 { return f.rss }), pick(func(f figure) float64 { return f.anon }),
			pick(func(f figure) float64 { return f.heap })}
	}
	m := median(now)
	b.ReportMetric(m.rss, "idle-RSS-MiB")
	b.ReportMetric(m.heap, "idle-heap-MiB")
	b.Logf("idle server, median of %d starts: RSS %.1f MiB (anonymous %.1f, the binary's pages %.1f), heap in use %.1f MiB (goal: RSS <= 30 MiB)",
		runs, m.rss, m.anon, m.rss-m.anon, m.heap)
	if base != "" {
		o := median(before)
		b.ReportMetric(m.rss/o.rss, "ratio")
		b.Logf("baseline %s, same run: RSS %.1f MiB (anonymous %.1f, the binary's pages %.1f), heap in use %.1f MiB: %.2fx",
			base, o.rss, o.anon, o.rss-o.anon, o.heap, m.rss/o.rss)
	}
}

// evict drops a file's pages from the page cache (it is written back
// first; pages a process maps stay).
func evict(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatalf("fdatasync %s: %v", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatalf("fadvise %s: %v", path, err)
	}
}
