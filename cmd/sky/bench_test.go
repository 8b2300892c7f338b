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
	if _, err := os.Stat(timeBin); err != nil {
		b.Skipf("%s (GNU time) measures peak RSS here: %v", timeBin, err)
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
			var ss []sample
			// Interleaved runs would be fairer to load changes, but each
			// command's runs back to back keep its pages warm, as a user's are.
			for range runs {
				s, err := measure(env, c.argv)
				if err != nil {
					b.Fatalf("%s: %v", strings.Join(c.argv, " "), err)
				}
				ss = append(ss, s)
			}
			st := median(ss)
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
		b.Logf("%-14s %10.2f %10.1f %10.2f %10.2f", c.name, ms(st.cpu), float64(st.rssKB)/1024, ms(st.wall), st.initMS)
	}
	for _, c := range cmds[1:] {
		st := res[c.name]
		b.ReportMetric(ms(st.cpu), c.name+"-cpu-ms")
		b.ReportMetric(float64(st.rssKB)/1024, c.name+"-rss-MiB")
		b.ReportMetric(ms(st.wall), c.name+"-wall-ms")
		b.ReportMetric(st.initMS, c.name+"-init-ms")
		b.ReportMetric(ms(st.cpu)/max(ms(base.cpu), 0.01), c.name+"-cpu-x-true")
		b.ReportMetric(float64(st.rssKB)/float64(max(base.rssKB, 1)), c.name+"-rss-x-true")
		b.ReportMetric(ms(st.wall)/max(ms(base.wall), 0.01), c.name+"-wall-x-true")
	}
	b.ReportMetric(ms(base.cpu), "true-cpu-ms")
	b.ReportMetric(float64(base.rssKB)/1024, "true-rss-MiB")
	b.ReportMetric(ms(base.wall), "true-wall-ms")
}

type sample struct {
	cpu, wall time.Duration
	rssKB     int64
}

type stats struct {
	sample
	initMS float64
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func run(env []string, argv ...string) ([]byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	return cmd.CombinedOutput()
}

// measure runs argv once under /usr/bin/time: CPU from the kernel's
// accounting of the child (wait4's rusage, which holds time's own small
// share too, for every command alike), peak RSS as time reports it, wall
// time around the whole run. The peak RSS is time's because Go starts a
// child with vfork: the child's own rusage would count this test
// process's memory, which it shares until it execs.
func measure(env, argv []string) (sample, error) {
	cmd := exec.Command(timeBin, append([]string{"-f", "maxrss=%M"}, argv...)...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return sample{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	wall := time.Since(start)
	s := sample{cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), wall: wall}
	out := strings.TrimSpace(stderr.String())
	_, kb, ok := strings.Cut(out[strings.LastIndex(out, "\n")+1:], "maxrss=")
	n, err := strconv.ParseInt(kb, 10, 64)
	if !ok || err != nil {
		return sample{}, fmt.Errorf("no peak RSS in %q", out)
	}
	s.rssKB = n
	return s, nil
}

// timeBin is GNU time, whose child is forked from a small process.
const timeBin = "/usr/bin/time"

func median(ss []sample) stats {
	pick := func(f func(sample) int64) int64 {
		v := make([]int64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return stats{sample: sample{
		cpu:   time.Duration(pick(func(s sample) int64 { return int64(s.cpu) })),
		wall:  time.Duration(pick(func(s sample) int64 { return int64(s.wall) })),
		rssKB: pick(func(s sample) int64 { return s.rssKB }),
	}}
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
