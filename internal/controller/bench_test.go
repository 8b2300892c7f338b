package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkRunner reconciles benchKeys keys, each sleeping benchSleep (a
// stand-in for an SSH or cloud round trip), on benchWorkers workers, and
// compares the wall time with a serial loop. The serial baseline sleeps a
// tenth as long per key, so that it takes about a second rather than ten;
// the serial time of the full sleeps is that measurement plus the sleep
// left out. (Multiplying it by ten instead would also multiply each
// sleep's overhead and flatter the runner.) The ratio line is the point.
//
//	go test -run '^$' -bench BenchmarkRunner -benchtime 5x ./internal/controller/
func BenchmarkRunner(b *testing.B) {
	const (
		benchKeys    = 500
		benchSleep   = 20 * time.Millisecond
		benchWorkers = 32
		serialScale  = 10
	)
	t0 := time.Now()
	for range benchKeys {
		time.Sleep(benchSleep / serialScale)
	}
	serial := time.Since(t0)
	serialEquiv := serial + benchKeys*(benchSleep-benchSleep/serialScale)

	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprint("cluster-", i)
	}
	var total time.Duration
	runs := 0
	for b.Loop() {
		var done sync.WaitGroup
		done.Add(benchKeys)
		c := New(ReconcilerFunc(func(ctx context.Context, key string) (Result, error) {
			time.Sleep(benchSleep)
			done.Done()
			return Result{}, nil
		}), Options{Name: "bench", Workers: benchWorkers})
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		start := time.Now()
		go func() { _ = c.Run(ctx); close(ran) }()
		for _, k := range keys {
			c.Enqueue(k)
		}
		done.Wait()
		total += time.Since(start)
		runs++
		cancel()
		<-ran
	}
	runner := total / time.Duration(runs)
	ideal := time.Duration((benchKeys+benchWorkers-1)/benchWorkers) * benchSleep
	b.ReportMetric(float64(runner.Milliseconds()), "runner-ms")
	b.ReportMetric(float64(serialEquiv.Milliseconds()), "serial-ms")
	b.ReportMetric(float64(serialEquiv)/float64(runner), "speedup")
	b.Logf("%d keys × %v: runner with %d workers %v (ideal %v, %.2f× of ideal); serial %d × %v took %v, so %d × %v ≈ %v; speedup %.1f× (ideal %.1f×)",
		benchKeys, benchSleep, benchWorkers, runner.Round(time.Millisecond), ideal, float64(runner)/float64(ideal),
		benchKeys, benchSleep/serialScale, serial.Round(time.Millisecond), benchKeys, benchSleep, serialEquiv.Round(time.Millisecond),
		float64(serialEquiv)/float64(runner), float64(benchKeys*benchSleep)/float64(ideal))
}
