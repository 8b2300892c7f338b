package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/replicaset"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

// reconcileReplica takes the next step of one replica (replicaset.Step).
func (e *Env) reconcileReplica(ctx context.Context, key string) (controller.Result, error) {
	return replicaset.Reconcile(ctx, key, func(ctx context.Context, name string, id int) (replicaset.Members, *replicaset.Stepped, error) {
		s, err := e.Store.GetService(ctx, name)
		if errors.Is(err, state.ErrNotFound) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		r := s.Replica(id)
		if r == nil {
			return nil, nil, nil
		}
		return e.replicaSet(s), &replicaset.Stepped{ID: id, Status: r.Status, Cluster: r.Cluster, CleanedUp: r.CleanedUp,
			Force: s.Down != nil && s.Down.Purge}, nil
	})
}

// setReplica applies edit to replica id if it is still in one of the
// from statuses; it returns the service and the replica as written (nil
// when gone or moved on).
func (e *Env) setReplica(ctx context.Context, service string, id int, from []string, edit func(n *state.Service, r *state.Replica)) (*state.Service, *state.Replica, error) {
	moved := false
	s, err := e.Store.UpdateService(ctx, service, func(n *state.Service) error {
		r := n.Replica(id)
		moved = r == nil || !slices.Contains(from, r.Status)
		if moved {
			return state.ErrNoChange
		}
		edit(n, r)
		return nil
	})
	if err != nil || moved {
		return s, nil, err
	}
	return s, s.Replica(id), nil
}

func replicaLog(e *Env, s *state.Service, id int) io.WriteCloser {
	return ux.AppendLog(ReplicaLogPath(e.Home, s.Name, id))
}

// replicas is a service's replicas as the replica-set lifecycle moves
// them (replicaset.Set); row is the service as last read or written.
type replicas struct {
	e   *Env
	row *state.Service
}

func (e *Env) replicaSet(s *state.Service) *replicas { return &replicas{e: e, row: s} }

func (x *replicas) Noun() string { return "Replica" }

func (x *replicas) Move(ctx context.Context, id int, from []string, edit func(*replicaset.Fields)) (bool, error) {
	s, r, err := x.e.setReplica(ctx, x.row.Name, id, from, func(_ *state.Service, r *state.Replica) {
		f := fields(r)
		edit(&f)
		if f.Status == api.ReplicaShuttingDown && r.Status != api.ReplicaShuttingDown {
			r.RetiredAt = x.e.now() // its drain is timed from now (Timings.DrainLimit)
		}
		r.Status, r.Reason, r.Attempt, r.Tries, r.NextTryAt = f.Status, f.Reason, f.Attempt, f.Tries, f.NextTryAt
		r.CleanedUp = f.CleanedUp
	})
	if s != nil {
		x.row = s
	}
	return r != nil, err
}

func (x *replicas) Remove(ctx context.Context, id int, from []string) error {
	if _, err := x.e.Store.UpdateService(ctx, x.row.Name, func(n *state.Service) error {
		for i, r := range n.Replicas {
			if r.ID == id && slices.Contains(from, r.Status) {
				n.Replicas = append(n.Replicas[:i], n.Replicas[i+1:]...)
				return nil
			}
		}
		return state.ErrNoChange
	}); err != nil {
		return err
	}
	_ = os.Remove(ReplicaLogPath(x.e.Home, x.row.Name, id))
	return nil
}

func (x *replicas) Down(ctx context.Context, id int, cluster string) error {
	log := replicaLog(x.e, x.row, id)
	defer log.Close()
	return x.e.downCluster(ctx, x.row, cluster, log)
}

func (x *replicas) Note(format string, args ...any) { x.e.note(x.row.Name, format, args...) }

func (x *replicas) Poke() { x.e.pokeService(x.row.Name) }

func (x *replicas) Launch(ctx context.Context, id int) (controller.Result, error) {
	return x.e.launchReplica(ctx, x.row, x.row.Replica(id))
}

func (x *replicas) Watch(ctx context.Context, id int) (controller.Result, error) {
	return x.e.watchReplica(ctx, x.row, x.row.Replica(id))
}

// Drain holds a retired replica until it is drained (drained), looking
// again every 100 ms; one whose load balancer does not answer goes now.
func (x *replicas) Drain(ctx context.Context, id int) time.Duration {
	s, r := x.row, x.row.Replica(id)
	st, err := x.e.lbState(ctx, s)
	if err != nil {
		return 0
	}
	pushedOut := !slices.Contains(pushedIDs(s.LB.Pushed), r.ID) && st.Generation >= s.LB.Generation
	if drained(pushedOut, st.InFlight[r.ID], r.RetiredAt, x.e.now(), x.e.timings().DrainLimit) {
		return 0
	}
	if !pushedOut {
		x.e.pokeService(s.Name)
	}
	return 100 * time.Millisecond
}

// drained says whether a replica retired at retiredAt may go at now
// (unix seconds): the load balancer took a ready set without it
// (pushedOut) and it serves no request (inFlight), or limit passed
// since it was retired, whatever it still serves.
func drained(pushedOut bool, inFlight int64, retiredAt, now float64, limit time.Duration) bool {
	return (pushedOut && inFlight == 0) || now-retiredAt >= limit.Seconds()
}

// CleanUp keeps a failed replica's job log in its log before its
// cluster goes, so `sky serve logs` still shows why it failed.
func (x *replicas) CleanUp(ctx context.Context, id int) (controller.Result, error) {
	r := x.row.Replica(id)
	log := replicaLog(x.e, x.row, id)
	x.e.keepJobLog(ctx, x.row, r, log)
	log.Close()
	return replicaset.CleanUp(ctx, x, id, r.Status, r.Cluster)
}

// cloud is what the service's replicas are launched and watched through.
func (e *Env) cloud(s *state.Service) replicaset.Cloud {
	return replicaset.Cloud{Store: e.Store, Backend: e.Backend, Plan: e.Plan, Owner: owner(s)}
}

// launchReplica runs one launch attempt of a replica: adopt the job a
// cut-off attempt left, or launch the cluster with the version's task.
func (e *Env) launchReplica(ctx context.Context, s *state.Service, r *state.Replica) (controller.Result, error) {
	set := e.replicaSet(s)
	if res, ok, err := replicaset.Begin(ctx, set, r.ID, fields(r), e.now()); !ok {
		return res, err
	}
	s = set.row
	r = s.Replica(r.ID)
	v := s.Versions[r.Version]
	if v == nil {
		return replicaset.Retire(ctx, set, r.ID, api.ReplicaProvisioning, "its version is gone")
	}
	tag := replicaTag(s.Name, r.ID, r.Attempt)
	log := replicaLog(e, s, r.ID)
	defer log.Close()
	ts := v.Task
	ts.Envs = make(map[string]string, len(v.Task.Envs)+1)
	for k, val := range v.Task.Envs {
		ts.Envs[k] = val
	}
	ts.Envs["SKYPILOT_SERVE_REPLICA_ID"] = strconv.Itoa(r.ID)
	if wantsSpot(v) && !r.Spot {
		ts.Resources = withSpot(ts.Resources, false)
	}
	a := replicaset.Attempt{ID: r.ID, Attempt: r.Attempt, Job: "job", Log: log,
		Body: api.LaunchBody{Task: ts, ClusterName: r.Cluster, Detach: true, Workspace: s.Workspace, PlanShown: true,
			Command: replicaCommand(s.Name),
			Managed: &api.ManagedLaunch{Tag: tag, TaskID: fmt.Sprintf("sky-serve-%s-%d-%d", s.Name, r.ID, r.Attempt)}},
		// Not a replica this service made (a user's cluster, a pool
		// worker): it is neither adopted nor ever torn down.
		Foreign:  fmt.Sprintf("a cluster named %s already exists and is not a replica of service %s; tear it down or give the service another name", r.Cluster, s.Name),
		Announce: fmt.Sprintf("Launching replica %d of service %s (version %d, attempt %d) on cluster %s.", r.ID, s.Name, r.Version, r.Attempt, r.Cluster)}
	return replicaset.Launch(ctx, set, e.cloud(s), a, func(jobID int) (controller.Result, error) {
		return e.launched(ctx, s, r, jobID)
	}, e.retryGap, e.now)
}

// withSpot sets use_spot in resources and in each of
// its any_of / ordered candidates (an on-demand replica of a spot
// service).
func withSpot(res resources.Spec, spot bool) resources.Spec {
	r := res.Copy()
	r.UseSpot = &spot
	for _, alts := range [][]*resources.Resources{r.AnyOf, r.Ordered} {
		for _, c := range alts {
			c.UseSpot = &spot
		}
	}
	return resources.Spec{Resources: *r}
}

// launched records a replica's job and address: STARTING, probed from now.
func (e *Env) launched(ctx context.Context, s *state.Service, r *state.Replica, jobID int) (controller.Result, error) {
	url, infra, res, spot := e.replicaAddress(ctx, s, r)
	var nr *state.Replica
	took, next, err := replicaset.Launched(ctx, e.replicaSet(s), r.ID, r.Cluster, func() (bool, bool, error) {
		n, x, err := e.setReplica(ctx, s.Name, r.ID, []string{api.ReplicaProvisioning}, func(_ *state.Service, r *state.Replica) {
			r.JobID, r.Status, r.Tries, r.NextTryAt, r.Reason = jobID, api.ReplicaStarting, 0, 0, ""
			r.LaunchedAt, r.URL, r.Infra, r.Resources, r.Spot = e.now(), url, infra, res, spot
		})
		nr = x
		return x != nil, n != nil && n.Replica(r.ID) == nil, err
	})
	if !took {
		return next, err
	}
	e.note(s.Name, "Replica %d launched on %s (%s); probing %s.", r.ID, nr.Infra, nr.Resources, nr.URL)
	return controller.Result{RequeueAfter: 200 * time.Millisecond}, nil
}

// replicaAddress is the replica's URL (http://head:port), infra,
// resources string and whether it runs on spot.
func (e *Env) replicaAddress(ctx context.Context, s *state.Service, r *state.Replica) (url, infra, res string, spot bool) {
	c, err := e.Store.GetCluster(ctx, r.Cluster)
	if err != nil {
		return "", "", "", false
	}
	h, err := backend.HandleOf(c)
	if err != nil || h.Info == nil || len(h.Info.Nodes) == 0 {
		return "", "", "", false
	}
	head := h.Info.Nodes[0].ExternalIP
	if head == "" {
		head = h.Info.Nodes[0].InternalIP
	}
	port := 0
	if v := s.Versions[r.Version]; v != nil {
		port = v.Service.Port
	}
	return "http://" + net.JoinHostPort(head, strconv.Itoa(port)), h.Infra, backend.ClusterResources(c.NumNodes, h), h.UseSpot
}

// watchReplica follows a replica's job (replicaset.Watch: a lost
// cluster or job makes it PREEMPTED) and probes its readiness.
func (e *Env) watchReplica(ctx context.Context, s *state.Service, r *state.Replica) (controller.Result, error) {
	v := s.Versions[r.Version]
	if v == nil {
		return controller.Result{}, nil
	}
	pr := v.Service.Probe
	every := time.Duration(max(pr.EndpointProbeIntervalSeconds, 0.1) * float64(time.Second))
	w := replicaset.Watched{ID: r.ID, Status: r.Status, Cluster: r.Cluster, JobID: r.JobID, Every: every}
	return replicaset.Watch(ctx, e.replicaSet(s), e.cloud(s), w, func(seen replicaset.Verdict, job *agentapi.Job) (controller.Result, error) {
		if seen == replicaset.JobEnded {
			return e.replicaFailed(ctx, s, r, api.ReplicaFailed, fmt.Sprintf("its run ended %s; see sky serve logs %s %d", job.Status, s.Name, r.ID))
		}
		return e.probeReplica(ctx, s, r, pr, job, every)
	})
}

// probeReplica probes a replica whose job runs and moves it as
// judgeProbe says: READY when the probe passes, NOT_READY when it fails,
// failed when it fails too long. A failing replica whose cluster is
// gone is lost instead.
func (e *Env) probeReplica(ctx context.Context, s *state.Service, r *state.Replica, pr api.ProbeSpec, job *agentapi.Job, every time.Duration) (controller.Result, error) {
	look := probeLook{Status: r.Status, LaunchedAt: r.LaunchedAt, ReadyAt: r.ReadyAt, FailingSince: r.FailingSince,
		InSetup: job.Status != agentapi.StatusRunning && r.Status == api.ReplicaStarting}
	var perr error
	if !look.InSetup {
		perr = probe(ctx, r.URL, pr)
		look.Passed = perr == nil
	}
	t := e.now()
	if !look.InSetup && !look.Passed {
		if seen, _ := e.cloud(s).Look(ctx, r.Cluster, 0); seen == replicaset.ClusterLost {
			return replicaset.Lost(ctx, e.replicaSet(s), r.ID, r.Status, replicaset.LostCluster)
		}
	}
	step, since := judgeProbe(look, pr, t)
	switch step {
	case probeFailInitialDelay:
		why := fmt.Sprintf("readiness probe did not pass within initial_delay_seconds=%g: %v", pr.InitialDelaySeconds, perr)
		if look.InSetup {
			why = fmt.Sprintf("not ready within initial_delay_seconds=%g (its job is %s)", pr.InitialDelaySeconds, job.Status)
		}
		return e.replicaFailed(ctx, s, r, api.ReplicaFailedInitialDelay, why)
	case probeFailProbing:
		return e.replicaFailed(ctx, s, r, api.ReplicaFailedProbing,
			fmt.Sprintf("readiness probe failing for %.0f s (consecutive_failure_threshold_timeout=%g): %v", t-since, pr.ConsecutiveFailureThresholdTimeout, perr))
	case probeReady:
		first := r.ReadyAt == 0
		_, nr, err := e.setReplica(ctx, s.Name, r.ID, []string{r.Status}, func(n *state.Service, r *state.Replica) {
			r.Status, r.FailingSince, r.Reason = api.ReplicaReady, 0, ""
			if r.ReadyAt == 0 {
				r.ReadyAt = t
			}
			if n.Uptime == 0 {
				n.Uptime = t
			}
			n.ReadyVersion = max(n.ReadyVersion, r.Version)
		})
		if err != nil || nr == nil {
			return controller.Result{RequeueAfter: 10 * time.Millisecond}, err
		}
		if first {
			e.note(s.Name, "Replica %d is READY (%s, version %d).", r.ID, r.URL, r.Version)
		} else {
			e.note(s.Name, "Replica %d is READY again.", r.ID)
		}
		e.pokeService(s.Name)
	case probeNotReady:
		_, nr, err := e.setReplica(ctx, s.Name, r.ID, []string{r.Status}, func(_ *state.Service, r *state.Replica) {
			r.Status, r.FailingSince, r.Reason = api.ReplicaNotReady, since, firstLine(perr.Error())
		})
		if err != nil || nr == nil {
			return controller.Result{RequeueAfter: 10 * time.Millisecond}, err
		}
		e.note(s.Name, "Replica %d is NOT_READY: %v.", r.ID, perr)
		e.pokeService(s.Name)
	case probeKeep:
		if look.InSetup {
			return controller.Result{RequeueAfter: min(every, time.Second)}, nil
		}
	}
	return controller.Result{RequeueAfter: every}, nil
}

// probeLook is what one readiness look at a replica saw.
type probeLook struct {
	Status                            string
	LaunchedAt, ReadyAt, FailingSince float64
	// InSetup says the replica is STARTING and its job does not run yet
	// (setup, or waiting for resources): nothing answers, and it is not
	// probed.
	InSetup bool
	// Passed says the readiness probe passed.
	Passed bool
}

// probeStep is what a readiness look moves a replica to.
type probeStep int

const (
	probeKeep             probeStep = iota // as it is; look again
	probeReady                             // READY (again)
	probeNotReady                          // NOT_READY, failing since the returned time
	probeFailInitialDelay                  // FAILED_INITIAL_DELAY
	probeFailProbing                       // FAILED_PROBING
)

// judgeProbe is the readiness rule (service.md §Readiness probing) of a
// look at now (unix seconds): a replica that was never READY fails once
// initial_delay_seconds passed since its launch without a passing probe
// (the delay runs during its setup too); one that was READY is NOT_READY
// while its probe fails, and fails once the probe has failed for
// consecutive_failure_threshold_timeout. since is when the failing began
// (for probeNotReady and probeFailProbing).
func judgeProbe(l probeLook, pr api.ProbeSpec, now float64) (step probeStep, since float64) {
	switch {
	case l.InSetup || (!l.Passed && l.ReadyAt == 0):
		if now-l.LaunchedAt > pr.InitialDelaySeconds {
			return probeFailInitialDelay, 0
		}
		return probeKeep, 0
	case l.Passed:
		if l.Status == api.ReplicaReady && l.FailingSince == 0 {
			return probeKeep, 0
		}
		return probeReady, 0
	}
	since = l.FailingSince
	if since == 0 {
		since = now
	}
	switch {
	case now-since >= pr.ConsecutiveFailureThresholdTimeout:
		return probeFailProbing, since
	case l.Status != api.ReplicaNotReady || l.FailingSince == 0:
		return probeNotReady, since
	}
	return probeKeep, since
}

// replicaFailed marks a replica failed (status one of the failed set),
// out of the ready set at once; its cluster goes next.
func (e *Env) replicaFailed(ctx context.Context, s *state.Service, r *state.Replica, status, why string) (controller.Result, error) {
	return replicaset.Mark(ctx, e.replicaSet(s), r.ID, r.Status, status, why)
}

// keepJobLog appends the replica's job output to its log, once, before
// its cluster goes, so `sky serve logs` still shows why it failed.
func (e *Env) keepJobLog(ctx context.Context, s *state.Service, r *state.Replica, log io.Writer) {
	if r.JobID == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fmt.Fprintf(log, "--- output of job %d on %s ---\n", r.JobID, r.Cluster)
	_ = e.Backend.CopyJobLog(cctx, r.Cluster, owner(s), r.JobID, 0, false, e.redacted(s, r, log))
}

// fields are a replica's lifecycle fields.
func fields(r *state.Replica) replicaset.Fields {
	return replicaset.Fields{Status: r.Status, Reason: r.Reason, Attempt: r.Attempt, Tries: r.Tries, NextTryAt: r.NextTryAt, CleanedUp: r.CleanedUp}
}

// downCluster tears a replica's cluster down if it exists.
func (e *Env) downCluster(ctx context.Context, s *state.Service, cluster string, log io.Writer) error {
	return e.Backend.DownIfExists(ctx, cluster, owner(s), "replica", log)
}
