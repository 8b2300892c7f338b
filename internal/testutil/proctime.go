package testutil

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sample is one whole-process run: CPU (user+system), wall time and peak
// RSS.
type Sample struct {
	CPU, Wall time.Duration
	RSSKB     int64
}

// TimeBin is GNU time, whose child is forked from a small process.
const TimeBin = "/usr/bin/time"

// Measure runs argv once under GNU time: CPU from the kernel's
// accounting of the child (wait4's rusage, which holds time's own small
// share too, for every command alike), peak RSS as time reports it, wall
// time around the whole run. The peak RSS is time's because Go starts a
// child with vfork: the child's own rusage would count the test
// process's memory, which it shares until it execs.
func Measure(env, argv []string) (Sample, error) {
	cmd := exec.Command(TimeBin, append([]string{"-f", "maxrss=%M"}, argv...)...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return Sample{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	wall := time.Since(start)
	s := Sample{CPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), Wall: wall}
	out := strings.TrimSpace(stderr.String())
	_, kb, ok := strings.Cut(out[strings.LastIndex(out, "\n")+1:], "maxrss=")
	n, err := strconv.ParseInt(kb, 10, 64)
	if !ok || err != nil {
		return Sample{}, fmt.Errorf("no peak RSS in %q", out)
	}
	s.RSSKB = n
	return s, nil
}

// Median is each figure's median over samples (taken separately).
func Median(ss []Sample) Sample {
	pick := func(f func(Sample) int64) int64 {
		v := make([]int64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return Sample{
		CPU:   time.Duration(pick(func(s Sample) int64 { return int64(s.CPU) })),
		Wall:  time.Duration(pick(func(s Sample) int64 { return int64(s.Wall) })),
		RSSKB: pick(func(s Sample) int64 { return s.RSSKB }),
	}
}
