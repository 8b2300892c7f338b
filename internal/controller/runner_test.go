package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRunnerStartsAndStopsTogether(t *testing.T) {
	reg, m := newRegistryMetrics(t)
	a, b := newScripted(nil), newScripted(nil)
	ca := New(a, Options{Name: "autostop", Metrics: m, Logger: testLogger(t)})
	cb := New(b, Options{Name: "status-refresh", Metrics: m, Logger: testLogger(t)})
	r := NewRunner(ca, cb)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ca.Enqueue("c1")
	cb.Enqueue("c1")
	waitFor(t, "both controllers to reconcile", func() bool { return a.count("c1") == 1 && b.count("c1") == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, name := range []string{"autostop", "status-refresh"} {
		if v, _ := metric(t, reg, "skygo_controller_reconciles_total", map[string]string{"controller": name, "result": resultSuccess}); v != 1 {
			t.Errorf("%s: %v successes counted, want 1", name, v)
		}
	}
	if err := r.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
	if err := r.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestRunnerStartRefuses(t *testing.T) {
	if err := NewRunner().Stop(context.Background()); err != nil {
		t.Errorf("Stop without Start: %v", err)
	}
	rec := newScripted(nil)
	c1 := New(rec, Options{Name: "autostop"})
	c2 := New(rec, Options{Name: "autostop"})
	if err := NewRunner(c1, c2).Start(context.Background()); err == nil || !strings.Contains(err.Error(), "autostop") {
		t.Errorf("duplicate names: Start = %v, want an error naming autostop", err)
	}
	if c1.started.Load() || c2.started.Load() {
		t.Error("a refused Start started a controller")
	}
	running := New(rec, Options{Name: "running"})
	start(t, running)
	waitFor(t, "the controller to start", running.started.Load)
	if err := NewRunner(running).Start(context.Background()); err == nil {
		t.Error("Start of a running controller succeeded")
	}
}

// Stop is bounded by its context: a reconcile that ignores cancellation
// makes Stop fail with the controller's name instead of hanging the
// server's shutdown.
func TestRunnerStopBounded(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	stubborn := New(ReconcilerFunc(func(ctx context.Context, key string) (Result, error) {
		close(started)
		<-release // ignores ctx
		return Result{}, nil
	}), Options{Name: "stubborn", Logger: testLogger(t)})
	polite := New(newScripted(nil), Options{Name: "polite", Logger: testLogger(t)})
	r := NewRunner(polite, stubborn)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stubborn.Enqueue("k")
	receive(t, "the stubborn reconcile", started)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := r.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "stubborn") || strings.Contains(err.Error(), "polite") {
		t.Errorf("Stop = %v, want a deadline error naming only stubborn", err)
	}
	close(release)
	ctx2, cancel2 := context.WithTimeout(context.Background(), patience)
	defer cancel2()
	if err := r.Stop(ctx2); err != nil {
		t.Errorf("Stop after release: %v", err)
	}
}

// Cancelling the context given to Start stops the controllers as Stop does.
func TestRunnerParentContext(t *testing.T) {
	rec := newScripted(nil)
	c := New(rec, Options{Name: "t", Logger: testLogger(t)})
	r := NewRunner(c)
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	r.mu.Lock()
	done := r.done[0]
	r.mu.Unlock()
	receive(t, "Run to return after the parent context ended", done)
}
