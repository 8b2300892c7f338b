package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// BenchmarkCLIStart (make bench-cli) measures what a user waits for
// before sky does anything: `sky --help` and `sky status` against a warm
// local server, each beside `true` in the same run. For each command it
// reports the median CPU time (user+system), peak RSS and wall time over
// SKYGO_BENCH_CLI_RUNS runs (default 21), the sum of the package inits
// (GODEBUG=inittrace=1), and the ratios to `true`. Issue 27's targets:
// <= 15 ms CPU, <= 20 MiB peak RSS and <= 3 ms of package init.
func BenchmarkCLIStart(b *testing.B) {
	if os.Getenv("SKYGO_BENCH_CLI") == "" {
		b.Skip("set SKYGO_BENCH_CLI=1 (make bench-cli) to measure sky's start-up")
	}
	runs := 21
	if n, err := strconv.Atoi(os.Getenv("SKYGO_BENCH_CLI_RUNS")); err == nil && n > 0 {
		runs = n
	}
	if _, err := os.Stat(testutil.TimeBin); err != nil {
		b.Skipf("%s (GNU time) measures peak RSS here: %v", testutil.TimeBin, err)
	}
	sky := testutil.SkyBinary(b)
	home := b.TempDir()
	env := append(os.Environ(), "HOME="+home, fmt.Sprintf("SKYPILOT_API_SERVER_LOCAL_PORT=%d", testutil.FreePort(b)), "NO_COLOR=1")
	b.Cleanup(func() {
		stop := exec.Command(sky, "api", "stop")
		stop.Env = env
		_ = stop.Run()
	})
	// Warm: the first status starts the server; the second finds it up.
	for range 2 {
		if out, err := run(env, sky, "status"); err != nil {
			b.Fatalf("sky status: %v\n%s", err, out)
		}
	}
	cmds := []struct {
		name string
		argv []string
	}{
		{"true", []string{"true"}},
		{"help", []string{sky, "--help"}},
		{"status", []string{sky, "status"}},
	}
	res := map[string]stats{}
	for range b.N {
		for _, c := range cmds {
			var ss []testutil.Sample
			// Interleaved runs would be fairer to load changes, but each
			// command's runs back to back keep its pages warm, as a user's are.
			for range runs {
				s, err := testutil.Measure(env, c.argv)
				if err != nil {
					b.Fatalf("%s: %v", strings.Join(c.argv, " "), err)
				}
				ss = append(ss, s)
			}
			st := stats{Sample: testutil.Median(ss)}
			if c.name != "true" {
				st.initMS = initSum(b, env, c.argv)
			}
			res[c.name] = st
		}
	}
	base := res["true"]
	b.Logf("%-14s %10s %10s %10s %10s", "command", "CPU ms", "RSS MiB", "wall ms", "init ms")
	for _, c := range cmds {
		st := res[c.name]
		b.Logf("%-14s %10.2f %10.1f %10.2f %10.2f", c.name, ms(st.CPU), float64(st.RSSKB)/1024, ms(st.Wall), st.initMS)
	}
	for _, c := range cmds[1:] {
		st := res[c.name]
		b.ReportMetric(ms(st.CPU), c.name+"-cpu-ms")
		b.ReportMetric(float64(st.RSSKB)/1024, c.name+"-rss-MiB")
		b.ReportMetric(ms(st.Wall), c.name+"-wall-ms")
		b.ReportMetric(st.initMS, c.name+"-init-ms")
		b.ReportMetric(ms(st.CPU)/max(ms(base.CPU), 0.01), c.name+"-cpu-x-true")
		b.ReportMetric(float64(st.RSSKB)/float64(max(base.RSSKB, 1)), c.name+"-rss-x-true")
		b.ReportMetric(ms(st.Wall)/max(ms(base.Wall), 0.01), c.name+"-wall-x-true")
	}
	b.ReportMetric(ms(base.CPU), "true-cpu-ms")
	b.ReportMetric(float64(base.RSSKB)/1024, "true-rss-MiB")
	b.ReportMetric(ms(base.Wall), "true-wall-ms")
}

type stats struct {
	testutil.Sample
	initMS float64
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func run(env []string, argv ...string) ([]byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	return cmd.CombinedOutput()
}

// initSum runs argv with GODEBUG=inittrace=1 and sums the clock time of
// its package inits ("init PKG @T ms, D ms clock, ...").
func initSum(b *testing.B, env, argv []string) float64 {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(slices.Clone(env), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s with inittrace: %v", strings.Join(argv, " "), err)
	}
	return sumInits(stderr.String())
}

func sumInits(trace string) float64 {
	total := 0.0
	for _, line := range strings.Split(trace, "\n") {
		f := strings.Fields(line)
		if len(f) >= 7 && f[0] == "init" && f[6] == "clock," {
			if v, err := strconv.ParseFloat(f[4], 64); err == nil {
				total += v
			}
		}
	}
	return total
}

func TestSumInits(t *testing.T) {
	trace := "init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs\n" +
		"init runtime @0.035 ms, 0.047 ms clock, 0 bytes, 0 allocs\n" +
		"some other line\n" +
		"init github.com/spf13/cobra @1.2 ms, 0.210 ms clock, 4096 bytes, 12 allocs\n"
	if got := sumInits(trace); got < 0.2569 || got > 0.2571 {
		t.Fatalf("sumInits = %v, want 0.257", got)
	}
}
