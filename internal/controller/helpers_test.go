package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skygo/skygo/internal/testutil"
)

// patience bounds every wait in these tests. It is only ever a timeout for
// something that should happen, never a claim about speed, so it is long
// enough for a loaded 2-core machine under -race.
const patience = 20 * time.Second

// tWriter sends log lines to the test's log, so they show up with the
// failing test only.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

// logBuffer collects JSON log records for tests that check what is logged.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (b *logBuffer) records(t testing.TB) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var recs []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// waitFor polls cond until it holds, failing the test after patience.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !testutil.WaitFor(patience, time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// receive waits for one value from ch.
func receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// start runs c until the test ends (or until the returned stop is called),
// and checks that Run then returns.
func start(t testing.TB, c *Controller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(patience):
				t.Errorf("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// idle reports whether c has nothing to do: no key ready, running or
// waiting for a timer. Once idle, a controller stays idle until enqueued
// again, so checking counts then is not racy.
func idle(c *Controller) bool {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	return len(c.q.ready) == 0 && len(c.q.processing) == 0 && len(c.q.timers) == 0
}

func waitIdle(t testing.TB, c *Controller) {
	t.Helper()
	waitFor(t, "controller idle", func() bool { return idle(c) })
}

// step is what one scripted reconcile does.
type step struct {
	res   Result
	err   error
	panic any
}

// scripted reconciles each key by its script, one step per call, and
// succeeds once the script is used up. It records every call.
type scripted struct {
	mu     sync.Mutex
	script map[string][]step
	calls  map[string]int
	starts map[string][]time.Time
}

func newScripted(script map[string][]step) *scripted {
	return &scripted{script: script, calls: map[string]int{}, starts: map[string][]time.Time{}}
}

func (s *scripted) Reconcile(ctx context.Context, key string) (Result, error) {
	s.mu.Lock()
	n := s.calls[key]
	s.calls[key]++
	s.starts[key] = append(s.starts[key], time.Now())
	var st step
	if n < len(s.script[key]) {
		st = s.script[key][n]
	}
	s.mu.Unlock()
	if st.panic != nil {
		panic(st.panic)
	}
	return st.res, st.err
}

func (s *scripted) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

// metric reads one series from reg: a counter's or gauge's value, or a
// histogram's sample count. ok is false if the series does not exist.
func metric(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, want := range labels {
				if got[k] != want {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func newRegistryMetrics(t testing.TB) (*prometheus.Registry, *Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}
