package core

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/state"
)

// The server's long-lived loops, as reconcilers keyed by cluster name (see
// internal/controller): each resync lists every cluster, and each
// reconcile looks at one, so a cluster that hangs or fails holds one
// worker for at most the timeout and never delays the others.
const (
	// autostopEvery is how often clusters whose head cannot call back
	// (SSH node pools) are checked for an autostop that fired.
	autostopEvery = 10 * time.Second
	// refreshEvery is how often every cluster's status is observed.
	refreshEvery = time.Minute
	// refreshTimeout bounds one cluster's refresh (and `status -r`'s wait
	// for a cluster that does not answer).
	refreshTimeout = 30 * time.Second
	// refreshWorkers bounds the refreshes in flight.
	refreshWorkers = 16
	// livenessEvery is how often the head agent of every UP cluster is
	// asked whether its daemon runs: a dead one leaves its jobs RUNNING
	// and their followers waiting, so it must be found within seconds,
	// not at the next full refresh. The look is one agent call (in this
	// process for local nodes, one SSH round trip otherwise).
	livenessEvery = 3 * time.Second
	// livenessTimeout bounds one look, including a restart of the agents
	// (whose daemon start waits up to 15 s for its socket).
	livenessTimeout = 45 * time.Second
	// A cluster whose agent could not be restarted is tried again after
	// livenessBackoff, doubling up to livenessMaxBackoff.
	livenessBackoff, livenessMaxBackoff = 2 * time.Second, time.Minute
	// sweepEvery is how often this machine is searched for what is left
	// of clusters that no record holds (and at start, right after a
	// crash); a search reads /proc and the local infrastructure's
	// directories and leases.
	sweepEvery = time.Minute
	// sweepTimeout bounds the reaping of one cluster's remains.
	sweepTimeout = 2 * time.Minute
)

// Controllers builds the reconcilers the server runs, counting into m
// (nil: nowhere) and logging on log.
func (e *Env) Controllers(m *controller.Metrics, log *slog.Logger) ([]*controller.Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	autostop := controller.New(controller.ReconcilerFunc(e.reconcileAutostop), controller.Options{
		Name: "autostop", Workers: 8, Logger: log, Metrics: m, Timeout: 5 * time.Minute,
		Resync: e.allClusterNames, ResyncEvery: autostopEvery,
	})
	refresh := controller.New(controller.ReconcilerFunc(e.reconcileStatus), controller.Options{
		Name: "status-refresh", Workers: refreshWorkers, Logger: log, Metrics: m, Timeout: refreshTimeout,
		Resync: e.allClusterNames, ResyncEvery: refreshEvery,
	})
	liveness := controller.New(controller.ReconcilerFunc(e.reconcileAgent), controller.Options{
		Name: "agent-liveness", Workers: refreshWorkers, Logger: log, Metrics: m, Timeout: livenessTimeout,
		BaseBackoff: livenessBackoff, MaxBackoff: livenessMaxBackoff,
		Resync: e.upClusterNames, ResyncEvery: livenessEvery,
	})
	// The sweeper: keyed by cluster name like the others, so that one
	// cluster whose remains cannot be removed backs off on its own.
	sweeper := controller.New(controller.ReconcilerFunc(e.reconcileOrphan), controller.Options{
		Name: "sweeper", Workers: 2, Logger: log, Metrics: m, Timeout: sweepTimeout,
		Resync: e.Backend.SweepNames, ResyncEvery: sweepEvery,
	})
	out := append([]*controller.Controller{autostop, refresh, liveness, sweeper}, e.Jobs.Controllers(m, log)...)
	return append(out, e.Serve.Controllers(m, log)...), nil
}

// upClusterNames lists only UP clusters: one whose agent could not be
// restarted is INIT and comes back through its own retries, on their
// backoff, which a listing every few seconds would bypass.
func (e *Env) upClusterNames(ctx context.Context) ([]string, error) {
	cs, err := e.Store.ListClusters(ctx, state.ClusterFilter{Statuses: []state.ClusterStatus{state.ClusterUp}})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names, nil
}

func (e *Env) allClusterNames(ctx context.Context) ([]string, error) {
	cs, err := e.Store.ListClusters(ctx, state.ClusterFilter{})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names, nil
}

// reconcileAutostop carries out a fired autostop on a cluster whose head
// cannot call the server back.
func (e *Env) reconcileAutostop(ctx context.Context, name string) (controller.Result, error) {
	w := logWriter{controller.Logger(ctx)}
	err := e.Backend.CheckAutostop(ctx, name, w)
	if errors.Is(err, backend.ErrNotWatched) {
		return controller.Result{}, nil // the next resync looks again
	}
	return controller.Result{}, err
}

// reconcileStatus observes one cluster and records what it finds.
func (e *Env) reconcileStatus(ctx context.Context, name string) (controller.Result, error) {
	return e.reconcileCluster(ctx, name, e.Backend.Refresh)
}

// reconcileAgent checks that the head agent of one cluster runs, and
// restarts the agents when it does not (backend.CheckAgent).
func (e *Env) reconcileAgent(ctx context.Context, name string) (controller.Result, error) {
	return e.reconcileCluster(ctx, name, e.Backend.CheckAgent)
}

// reconcileOrphan reaps what is left on this machine of cluster name if
// no record holds it (backend.ReapOrphan says why that is safe even while
// launches run); a cluster an operation holds is looked at again later.
func (e *Env) reconcileOrphan(ctx context.Context, name string) (controller.Result, error) {
	_, err := e.Backend.ReapOrphan(ctx, name, logWriter{controller.Logger(ctx)})
	if errors.Is(err, backend.ErrBusy) {
		return controller.Result{RequeueAfter: sweepEvery}, nil
	}
	return controller.Result{}, err
}

// reconcileCluster runs look on the current row of cluster name (a
// cluster gone meanwhile is nothing to do). "Another operation holds the
// cluster" becomes a look again later: that is no failure (no error
// logged, no growing backoff), and the operation itself leaves the
// cluster in a state worth a new look.
func (e *Env) reconcileCluster(ctx context.Context, name string, look func(context.Context, *state.Cluster) (*state.Cluster, error)) (controller.Result, error) {
	c, err := e.Store.GetCluster(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if _, err := look(ctx, c); errors.Is(err, backend.ErrBusy) {
		return controller.Result{RequeueAfter: livenessBackoff}, nil
	} else if err != nil {
		return controller.Result{}, err
	}
	return controller.Result{}, nil
}

// logWriter turns the backend's progress lines into log records.
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(string(bytes.TrimRight(p, "\r\n")))
	return len(p), nil
}
