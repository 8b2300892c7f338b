package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/testutil"
)

// BenchmarkStatusRefresh refreshes every cluster of a server holding 500
// real local clusters (a running agent each), one of which is hung (its
// agent is SIGSTOPped, so it accepts connections and never answers; the
// node-side status call gives up after its own 2 s bound and the cluster
// goes INIT), with the status-refresh controller. The figure is the time until every
// healthy cluster is refreshed; the baseline, measured in the same run, is
// refreshing the healthy ones one after another. SKYGO_BENCH_CLUSTERS
// changes the count.
func BenchmarkStatusRefresh(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("SKYGO_BENCH_CLUSTERS")); err == nil && v > 1 {
		n = v
	}
	e := newBenchEnv(b)
	names := launchMany(b, e, n)
	hung := names[0]
	pid := agentPID(b, e, hung)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	healthy := names[1:]
	ctx := context.Background()

	// Baseline: the healthy clusters, one after another.
	start := time.Now()
	for _, name := range healthy {
		c, err := e.Store.GetCluster(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Backend.Refresh(ctx, c); err != nil {
			b.Fatalf("refresh %s: %v", name, err)
		}
	}
	serial := time.Since(start)

	var parallel time.Duration
	b.ResetTimer()
	for range b.N {
		var left atomic.Int64
		left.Store(int64(len(healthy)))
		allDone := make(chan struct{})
		var hungTook atomic.Int64
		hungDone := make(chan struct{})
		c := controller.New(controller.ReconcilerFunc(func(ctx context.Context, key string) (controller.Result, error) {
			t0 := time.Now()
			res, err := e.reconcileStatus(ctx, key)
			if key == hung {
				hungTook.Store(int64(time.Since(t0)))
				close(hungDone)
				return res, controller.Terminal(err)
			}
			if err != nil {
				b.Errorf("refresh %s: %v", key, err)
			}
			if left.Add(-1) == 0 {
				close(allDone)
			}
			return res, err
		}), controller.Options{Name: "status-refresh", Workers: refreshWorkers, Timeout: refreshTimeout})
		for _, name := range names {
			c.Enqueue(name)
		}
		rctx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		start := time.Now()
		go func() { ran <- c.Run(rctx) }()
		<-allDone
		parallel = time.Since(start)
		<-hungDone // not part of the figure: it only has to end, bounded
		cancel()
		<-ran
		took := time.Duration(hungTook.Load())
		if took < time.Second {
			b.Fatalf("the hung cluster's refresh took %s: it is not hung, the benchmark is not measuring what it says", took)
		}
		if got, err := e.Store.GetCluster(ctx, hung); err != nil || got.Status != state.ClusterInit {
			b.Fatalf("the hung cluster after refresh: %+v, %v; want INIT", got, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(parallel.Seconds(), "s/refresh-all")
	b.ReportMetric(serial.Seconds(), "s/serial-baseline")
	b.Logf("%d clusters, 1 hung: every healthy cluster refreshed in %s by the controller (%d workers) vs %s one after another (%.1fx faster); goal <= 2 s",
		n, parallel.Round(time.Millisecond), refreshWorkers, serial.Round(time.Millisecond), serial.Seconds()/parallel.Seconds())
}

// newBenchEnv is a server environment in a private, short HOME (agent
// sockets live under node homes), with the built sky binary as the agent.
func newBenchEnv(b testing.TB) *Env {
	sky := testutil.SkyBinary(b)
	home, err := os.MkdirTemp("", "skybench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("HOME", home)
	st, err := state.OpenSQLite(context.Background(), filepath.Join(home, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Home: home, Store: st, Sky: sky})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		downAll(e)
		st.Close()
		os.RemoveAll(home)
	})
	return e
}

func localPlan(context.Context, *resources.Resources, int, []optimizer.Blocked) (*optimizer.Plan, error) {
	return &optimizer.Plan{Tasks: []optimizer.TaskPlan{{Chosen: optimizer.Candidate{Cloud: local.Kind, NumNodes: 1}}}}, nil
}

// launchMany launches n one-node clusters with no run command, a few at a
// time.
func launchMany(b testing.TB, e *Env, n int) []string {
	names := make([]string, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := range n {
		names[i] = fmt.Sprintf("r%03d", i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			body := api.LaunchBody{ClusterName: names[i], Task: api.TaskSpec{NumNodes: 1, Resources: mustSpec(map[string]any{"cpus": "1"})}}
			if _, err := e.Backend.Launch(context.Background(), body, backend.User{Name: "bench", Hash: "bench"}, localPlan, io.Discard); err != nil {
				failed.Store(fmt.Errorf("launch %s: %w", names[i], err))
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return names
}

func agentPID(b testing.TB, e *Env, cluster string) int {
	in, err := e.Backend.Infras.Get(infra.ID{Kind: local.Kind})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(in.(*local.Infra).P.NodeDir(cluster, 0), ".sky", "agent", "daemon.pid"))
	if err != nil {
		b.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		b.Fatal(err)
	}
	return pid
}

func downAll(e *Env) {
	cs, _ := e.Store.ListClusters(context.Background(), state.ClusterFilter{})
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := e.Backend.Down(context.Background(), c.Name, backend.User{}, true, true, io.Discard)
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				fmt.Fprintf(os.Stderr, "down %s: %v\n", c.Name, err)
			}
		}()
	}
	wg.Wait()
}

// mustSpec is resources m, which the test wrote valid.
func mustSpec(m map[string]any) resources.Spec {
	s, err := resources.ParseSpec(m)
	if err != nil {
		panic(err)
	}
	return s
}
