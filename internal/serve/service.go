package serve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/replicaset"
	"github.com/skygo/skygo/internal/serve/lb"
	"github.com/skygo/skygo/internal/state"
)

// reconcileService takes the next step of one service: its load
// balancer up, an autoscaler decision when one is due, replicas added
// and retired by the plan, and the ready set pushed to the load balancer.
func (e *Env) reconcileService(ctx context.Context, name string) (controller.Result, error) {
	s, err := e.Store.GetService(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if s.Down != nil {
		return e.downSteps(ctx, s)
	}
	st, _, err := e.ensureLB(ctx, s)
	if errors.Is(err, errLBWaiting) {
		return controller.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if err != nil {
		e.note(name, "Load balancer: %v.", err)
		return controller.Result{RequeueAfter: 2 * time.Second}, nil
	}
	clk := e.clock()
	qps := measuredQPS(st, clk, e.timings().QPSWindow)
	t0 := unixSeconds(clk)
	var added, retired []int
	dropped := []int{}
	s, err = e.Store.UpdateService(ctx, name, func(n *state.Service) error {
		if n.Down != nil {
			return state.ErrNoChange
		}
		added, retired, dropped = nil, nil, dropped[:0]
		latest := n.Versions[n.Latest]
		if latest == nil {
			return state.ErrNoChange
		}
		held := 0
		if st != nil {
			held = st.Waiting
		}
		next, changed := autoscale(scaleStateOf(n), latest, qps, held, t0, e.Timings.DecisionInterval)
		n.Target, n.UpCount, n.DownCount, n.LastDecisionAt, n.QPS = next.Target, next.UpCount, next.DownCount, next.LastDecisionAt, next.QPS
		pl := planReplicas(n, n.Target+overprovision(latest))
		for _, spot := range pl.add {
			n.NextReplicaID++
			id := n.NextReplicaID
			n.Replicas = append(n.Replicas, &state.Replica{ID: id, Version: n.Latest, Status: api.ReplicaPending,
				Cluster: replicaCluster(n.Name, id), CreatedAt: t0, Spot: spot})
			added = append(added, id)
		}
		for _, id := range pl.retire {
			r := n.Replica(id)
			r.Status, r.RetiredAt = api.ReplicaShuttingDown, t0
			if r.Version < n.Latest {
				r.Reason = fmt.Sprintf("replaced by version %d", n.Latest)
			} else {
				r.Reason = "scaled down"
			}
			retired = append(retired, id)
		}
		active := pl.active
		if !oldLive(n) {
			active = 0
		}
		if active != n.Active {
			n.Active, changed = active, true
		}
		changed = prune(n, &dropped) || changed
		if key := pushKey(n); key != n.LB.Pushed {
			n.LB.Generation++
			n.LB.Pushed = key
			changed = true
		}
		if len(added) == 0 && len(retired) == 0 && !changed {
			return state.ErrNoChange
		}
		return nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	for _, id := range added {
		e.note(name, "Replica %d (cluster %s, version %d) added; the service wants %d.", id, replicaCluster(name, id), s.Latest, s.Target+overprovision(s.Versions[s.Latest]))
	}
	for _, id := range retired {
		e.note(name, "Replica %d is shutting down: %s.", id, s.Replica(id).Reason)
	}
	for _, v := range dropped {
		_ = os.RemoveAll(filesDir(e.Home, name, v))
	}
	if st.Generation != s.LB.Generation {
		if err := e.push(ctx, s); err != nil {
			e.note(name, "Pushing the ready set to the load balancer: %v.", err)
			return controller.Result{RequeueAfter: time.Second}, nil
		}
	}
	for _, r := range s.Replicas {
		if slices.Contains(added, r.ID) || slices.Contains(retired, r.ID) {
			e.pokeReplica(name, r.ID)
		}
	}
	return controller.Result{RequeueAfter: min(decideEvery(e.Timings.DecisionInterval, s.Target), 2*time.Second)}, nil
}

// oldLive says whether a replica of an older version still serves or
// comes up.
func oldLive(s *state.Service) bool {
	for _, r := range s.Replicas {
		if r.Version < s.Latest && live(r.Status) {
			return true
		}
	}
	return false
}

// prune drops what no longer needs listing (replicaset.Prune): failed
// replicas of older versions once their clusters are gone, failed ones
// beyond the last keepFailed, and versions no replica runs (the newest
// kept).
func prune(s *state.Service, dropped *[]int) bool {
	ls := make([]replicaset.Listed, len(s.Replicas))
	for i, r := range s.Replicas {
		ls[i] = replicaset.Listed{ID: r.ID, Version: r.Version, Status: r.Status, CleanedUp: r.CleanedUp}
	}
	gone, versions := replicaset.Prune(ls, s.Latest, slices.Collect(maps.Keys(s.Versions)), keepFailed)
	s.Replicas = slices.DeleteFunc(s.Replicas, func(r *state.Replica) bool { return slices.Contains(gone, r.ID) })
	for _, v := range versions {
		delete(s.Versions, v)
	}
	*dropped = append(*dropped, versions...)
	return len(gone)+len(versions) > 0
}

// hold says whether a request arriving with no ready replica should wait
// for one: replicas are on their way, or the service scales from zero.
func hold(s *state.Service) bool {
	if s.Down != nil {
		return false
	}
	for _, r := range s.Replicas {
		if live(r.Status) {
			return true
		}
	}
	v := s.Versions[s.Latest]
	return v != nil && v.Service.MinReplicas() == 0 && !stuck(s)
}

// stuck says whether the newest version failed before it was ever READY:
// no more of its replicas are launched.
func stuck(s *state.Service) bool {
	if s.ReadyVersion >= s.Latest {
		return false
	}
	for _, r := range s.Replicas {
		if r.Version == s.Latest && api.ReplicaFailedStatus(r.Status) {
			return true
		}
	}
	return false
}

// pushKey names the ready set and hold flag the load balancer should
// have; a change of it is a new generation.
func pushKey(s *state.Service) string {
	var parts []string
	for _, r := range readySet(s) {
		parts = append(parts, strconv.Itoa(r.ID)+"@"+r.URL)
	}
	sort.Strings(parts)
	return fmt.Sprintf("hold=%t;%s", hold(s), strings.Join(parts, ","))
}

// pushedIDs are the replica ids of a push key.
func pushedIDs(key string) []int {
	_, list, _ := strings.Cut(key, ";")
	var out []int
	for _, p := range strings.Split(list, ",") {
		id, _, ok := strings.Cut(p, "@")
		if n, err := strconv.Atoi(id); ok && err == nil {
			out = append(out, n)
		}
	}
	return out
}

// push sends the service's ready set, as of its row, to its load balancer.
func (e *Env) push(ctx context.Context, s *state.Service) error {
	set := lb.ReplicaSet{Generation: s.LB.Generation, Hold: hold(s), Replicas: []lb.Replica{}}
	for _, r := range readySet(s) {
		v := s.Versions[r.Version]
		rep := lb.Replica{ID: r.ID, URL: r.URL, Version: r.Version}
		if v != nil {
			rep.Accelerator = versionAccelerator(v)
			rep.TargetQPS = targetQPS(v)
		}
		set.Replicas = append(set.Replicas, rep)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return e.lbClient(s.Name).SetReplicas(ctx, set)
}

// measuredQPS is the request rate over the window ending at t, from the
// load balancer's per-second counts (0 without a load balancer).
func measuredQPS(st *lb.State, t time.Time, window time.Duration) float64 {
	if st == nil || window <= 0 {
		return 0
	}
	from := t.Add(-window).Unix()
	var n int64
	for _, c := range st.Requests {
		if c[0] > from {
			n += c[1]
		}
	}
	// Held requests are load the replicas will see.
	n += int64(st.Waiting)
	return float64(n) / window.Seconds()
}

// downSteps carries out `serve down`: every replica is drained and torn
// down, then the load balancer goes, then the service's row and files.
func (e *Env) downSteps(ctx context.Context, s *state.Service) (controller.Result, error) {
	t0 := e.now()
	s, err := e.Store.UpdateService(ctx, s.Name, func(n *state.Service) error {
		changed := false
		for _, r := range n.Replicas {
			if replicaset.Retiring(r.Status, r.CleanedUp) {
				r.Status, r.RetiredAt, r.Reason = api.ReplicaShuttingDown, t0, "the service is shutting down"
				changed = true
			}
		}
		if key := pushKey(n); key != n.LB.Pushed {
			n.LB.Generation++
			n.LB.Pushed = key
			changed = true
		}
		if !changed {
			return state.ErrNoChange
		}
		return nil
	})
	if err != nil {
		return controller.Result{}, err
	}
	if st, err := e.lbState(ctx, s); err == nil && st.Generation != s.LB.Generation {
		_ = e.push(ctx, s)
	}
	pending := 0
	for _, r := range s.Replicas {
		if r.Status == api.ReplicaShuttingDown {
			pending++
			e.pokeReplica(s.Name, r.ID)
		}
	}
	if pending > 0 {
		return controller.Result{RequeueAfter: 500 * time.Millisecond}, nil
	}
	e.stopLB(ctx, s)
	if err := e.Store.DeleteService(ctx, s.Name, s.Version); err != nil {
		if errors.Is(err, state.ErrConflict) {
			return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
		return controller.Result{}, err
	}
	_ = os.RemoveAll(ServiceDir(e.Home, s.Name))
	return controller.Result{}, nil
}
