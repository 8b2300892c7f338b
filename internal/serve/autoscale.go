package serve

import (
	"math"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/replicaset"
	"github.com/skygo/skygo/internal/state"
)

// The autoscaler and the replica planner: pure functions of a service's
// row and the measured load, so that every rule of spec/service.md
// §Autoscaler facts is tested without a cluster.

// targetQPS is the request rate one replica of the version is meant to
// serve (0: the service does not scale on load). With a mapping per
// accelerator (instance_aware_least_load), it is the rate of the
// accelerator the version asks for first, else the lowest of the mapping
// (the conservative choice: more replicas, not fewer).
func targetQPS(v *state.ServiceVersion) float64 {
	p := v.Service.ReplicaPolicy
	if p == nil {
		return 0
	}
	if p.TargetQPS != nil {
		return *p.TargetQPS
	}
	if len(p.TargetQPSPerAccelerator) == 0 {
		return 0
	}
	if acc := versionAccelerator(v); acc != "" {
		for k, q := range p.TargetQPSPerAccelerator {
			if k == acc || k == acc+":1" {
				return q
			}
		}
	}
	low := math.Inf(1)
	for _, q := range p.TargetQPSPerAccelerator {
		low = min(low, q)
	}
	return low
}

// versionAccelerator is the accelerator the version's first candidate asks for.
func versionAccelerator(v *state.ServiceVersion) string {
	r := &v.Task.Resources.Resources
	if list, _ := r.Candidates(); len(list) > 0 {
		r = list[0]
	}
	return r.AcceleratorName()
}

// rawTarget is the replica count the load asks for, clipped to the
// version's [min, max].
func rawTarget(v *state.ServiceVersion, qps float64) int {
	lo, hi := v.Service.MinReplicas(), v.Service.MaxReplicas()
	t := targetQPS(v)
	if t <= 0 {
		return lo
	}
	n := int(math.Ceil(qps/t - 1e-9))
	return min(max(n, lo), hi)
}

// decide is one decision of the request-rate autoscaler: the raw target
// is taken after int(delay / interval) consecutive decisions wanting
// more (or fewer), at once from a target of 0; a decision the other way
// or equal resets the counts.
func decide(v *state.ServiceVersion, cur, up, down int, qps float64, every time.Duration) (target, upCount, downCount int) {
	raw := rawTarget(v, qps)
	if cur == 0 || v.Service.ReplicaPolicy == nil {
		return raw, 0, 0
	}
	p := v.Service.ReplicaPolicy
	switch {
	case raw > cur:
		up++
		if up >= int(p.UpscaleDelaySeconds/every.Seconds()) {
			return raw, 0, 0
		}
		return cur, up, 0
	case raw < cur:
		down++
		if down >= int(p.DownscaleDelaySeconds/every.Seconds()) {
			return raw, 0, 0
		}
		return cur, 0, down
	}
	return cur, 0, 0
}

// scaleState is the autoscaler's part of a service's row.
type scaleState struct {
	Target, UpCount, DownCount int
	// LastDecisionAt is when the last decision was taken (unix seconds;
	// 0: never), on QPS.
	LastDecisionAt, QPS float64
}

func scaleStateOf(s *state.Service) scaleState {
	return scaleState{Target: s.Target, UpCount: s.UpCount, DownCount: s.DownCount, LastDecisionAt: s.LastDecisionAt, QPS: s.QPS}
}

// autoscale is one look of the autoscaler at a service of version v at
// now: a decision (decide) is taken the first time, once the decision
// interval (decideEvery of the configured one and the current target)
// has passed since the last, and at once when requests are held (held)
// at a target of zero; otherwise the state stays (due false).
func autoscale(cur scaleState, v *state.ServiceVersion, qps float64, held int, now float64, configured time.Duration) (next scaleState, due bool) {
	every := decideEvery(configured, cur.Target)
	fromZero := cur.Target == 0 && held > 0
	if cur.LastDecisionAt != 0 && now-cur.LastDecisionAt < every.Seconds() && !fromZero {
		return cur, false
	}
	next.Target, next.UpCount, next.DownCount = decide(v, cur.Target, cur.UpCount, cur.DownCount, qps, every)
	next.LastDecisionAt, next.QPS = now, qps
	return next, true
}

// overprovision is replica_policy.num_overprovision.
func overprovision(v *state.ServiceVersion) int {
	if p := v.Service.ReplicaPolicy; p != nil {
		return p.NumOverprovision
	}
	return 0
}

// replicaCap is the most replicas the service may hold at once, of every
// version and those still being torn down: max_replicas, plus the
// overprovision the user asked for on top of the autoscaler's target.
func replicaCap(v *state.ServiceVersion) int {
	return v.Service.MaxReplicas() + overprovision(v)
}

// plan is what the service controller does to its replicas in one step.
type plan struct {
	// add are the replicas to launch, of the newest version: true for a
	// spot replica.
	add []bool
	// retire are the replicas to drain and tear down.
	retire []int
	// active is the version blue-green traffic goes to (0: all).
	active int
}

// wantsSpot says whether the version's replicas are spot by default.
func wantsSpot(v *state.ServiceVersion) bool {
	r := &v.Task.Resources.Resources
	if list, _ := r.Candidates(); len(list) > 0 {
		r = list[0]
	}
	return r.UseSpot != nil && *r.UseSpot
}

// fallback says whether the version mixes on-demand replicas into a spot
// service (base_ondemand_fallback_replicas, dynamic_ondemand_fallback).
func fallback(v *state.ServiceVersion) (base int, dynamic, on bool) {
	p := v.Service.ReplicaPolicy
	if p == nil || !wantsSpot(v) {
		return 0, false, false
	}
	return p.BaseOndemandFallbackReplicas, p.DynamicOndemandFallback, p.BaseOndemandFallbackReplicas > 0 || p.DynamicOndemandFallback
}

// planReplicas decides which replicas to add and retire so the service
// reaches final replicas of its newest version, never holding more than
// replicaCap at once: the replica set's plan (replicaset.Decide). With
// spot fallback and no older version, the spot and on-demand replicas
// are scaled to their own counts.
//
// If a replica of the newest version failed and that version was never
// READY, nothing more is launched (the update is broken; `sky serve
// update` with a fixed YAML mends it).
func planReplicas(s *state.Service, final int) plan {
	latest := s.Versions[s.Latest]
	if latest == nil {
		return plan{}
	}
	in := replicaset.Input{Latest: s.Latest, Target: final, Mode: replicaset.ModeOf(s.UpdateMode),
		Cap: replicaCap(latest), Broken: stuck(s), Active: s.Active}
	var newLive []*state.Replica
	oldLive := false
	for _, r := range s.Replicas {
		in.Members = append(in.Members, member(r))
		if live(r.Status) {
			if r.Version == s.Latest {
				newLive = append(newLive, r)
			} else {
				oldLive = true
			}
		}
	}
	if base, dynamic, on := fallback(latest); on && !oldLive {
		room := in.Cap
		for _, m := range in.Members {
			if m.Phase.Live() || m.Phase == replicaset.Draining {
				room--
			}
		}
		return planFallback(newLive, final, base, dynamic, room, in.Broken)
	}
	pl := replicaset.Decide(in)
	p := plan{retire: pl.Remove, active: pl.Active}
	spot := wantsSpot(latest)
	for range pl.Launch {
		p.add = append(p.add, spot)
	}
	return p
}

func member(r *state.Replica) replicaset.Member {
	return replicaset.Member{ID: r.ID, Version: r.Version, Phase: replicaset.PhaseOf(r.Status)}
}

// planFallback scales the spot and the on-demand replicas of a spot
// service separately: spot to final - base; on-demand to base, plus
// (dynamic) one for every wanted spot replica not READY, at most final.
func planFallback(newLive []*state.Replica, final, base int, dynamic bool, room int, broken bool) plan {
	var spot, od []*state.Replica
	spotReady := 0
	for _, r := range newLive {
		if r.Spot {
			spot = append(spot, r)
			if r.Status == api.ReplicaReady {
				spotReady++
			}
		} else {
			od = append(od, r)
		}
	}
	wantSpot := max(final-base, 0)
	wantOD := min(base, final)
	if dynamic {
		wantOD = min(wantOD+max(0, wantSpot-spotReady), final)
	}
	var p plan
	for _, k := range []struct {
		have []*state.Replica
		want int
		spot bool
	}{{od, wantOD, false}, {spot, wantSpot, true}} {
		if n := min(k.want-len(k.have), room); n > 0 && !broken {
			for range n {
				p.add = append(p.add, k.spot)
			}
			room -= n
		}
		if n := len(k.have) - k.want; n > 0 {
			p.retire = append(p.retire, scaleDown(k.have, n)...)
		}
	}
	return p
}

// scaleDown picks n replicas to retire in the replica set's order
// (replicaset.ScaleDown).
func scaleDown(rs []*state.Replica, n int) []int {
	ms := make([]replicaset.Member, len(rs))
	for i, r := range rs {
		ms[i] = member(r)
	}
	return replicaset.ScaleDown(ms, n)
}

// readySet is the replicas the load balancer sends traffic to: READY
// (a retired one is SHUTTING_DOWN), and (during a blue-green update, before the switch) of
// the versions still serving. Should that leave none while some other
// replica is READY, those serve: a mixed answer beats a failed one.
func readySet(s *state.Service) []*state.Replica {
	var all, out []*state.Replica
	for _, r := range s.Replicas {
		if r.Status != api.ReplicaReady || r.URL == "" {
			continue
		}
		all = append(all, r)
		if s.Active == 0 || r.Version <= s.Active {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}
