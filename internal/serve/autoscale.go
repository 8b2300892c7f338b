package serve

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/resources"
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
	r, err := resources.Parse(v.Task.Resources)
	if err != nil || r == nil {
		return ""
	}
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
	r, err := resources.Parse(v.Task.Resources)
	if err != nil || r == nil {
		return false
	}
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
// replicaCap at once.
//
//   - No older version: scale to final, down by SkyPilot's order (not
//     READY first, older version, higher id). With spot fallback the spot
//     and on-demand replicas are scaled to their own counts.
//   - rolling: new replicas are launched into the room the cap leaves;
//     each READY new replica lets one READY old one go. With no room, one
//     old replica goes first to make some.
//   - blue_green: traffic stays on the old version while new replicas
//     come up; it switches once enough are READY (all of final, or as
//     many as the cap allows while one old replica still serves), and
//     the old replicas go at once. With a cap of one the old replica
//     goes first and requests are held meanwhile.
//
// If a replica of the newest version failed and that version was never
// READY, nothing more is launched (the update is broken; `sky serve
// update` with a fixed YAML mends it).
func planReplicas(s *state.Service, final int) plan {
	latest := s.Versions[s.Latest]
	if latest == nil {
		return plan{}
	}
	limit := replicaCap(latest)
	occupied := 0
	var newLive, old []*state.Replica
	newReady, newInFlight := 0, 0
	for _, r := range s.Replicas {
		switch {
		case live(r.Status) && r.Version == s.Latest:
			newLive = append(newLive, r)
			occupied++
			if r.Status == api.ReplicaReady {
				newReady++
			} else if r.Status != api.ReplicaNotReady {
				newInFlight++
			}
		case live(r.Status):
			old = append(old, r)
			occupied++
		case r.Status == api.ReplicaShuttingDown:
			occupied++
		}
	}
	broken := stuck(s)
	room := limit - occupied
	var p plan
	if len(old) == 0 {
		if base, dynamic, on := fallback(latest); on {
			return planFallback(newLive, final, base, dynamic, room, broken)
		}
		spot := wantsSpot(latest)
		if n := min(final-len(newLive), room); n > 0 && !broken {
			for range n {
				p.add = append(p.add, spot)
			}
		}
		if n := len(newLive) - final; n > 0 {
			p.retire = scaleDown(newLive, n)
		}
		return p
	}
	// An old replica that is not READY serves nobody: it goes at once.
	var oldReady []*state.Replica
	for _, r := range old {
		if r.Status == api.ReplicaReady {
			oldReady = append(oldReady, r)
		} else {
			p.retire = append(p.retire, r.ID)
			room++
		}
	}
	spot := wantsSpot(latest)
	grow := len(newLive) < final && !broken
	if grow {
		if n := min(final-len(newLive), room); n > 0 {
			for range n {
				p.add = append(p.add, spot)
			}
			grow = false
		}
	}
	if s.UpdateMode == api.UpdateBlueGreen {
		p.active = s.Active
		switchNow := newReady >= final ||
			(newReady >= 1 && newInFlight == 0 && len(p.add) == 0 && room <= 0 && len(oldReady) <= 1)
		if switchNow || len(oldReady) == 0 {
			p.active = s.Latest
			for _, r := range oldReady {
				p.retire = append(p.retire, r.ID)
			}
			return p
		}
		switch {
		case grow && newInFlight == 0 && len(oldReady) > 1:
			p.retire = append(p.retire, scaleDown(oldReady, 1)...)
		case grow && newInFlight == 0 && len(newLive) == 0:
			// A cap of one: the old replica makes room, and requests are
			// held until the new one is READY.
			p.retire = append(p.retire, scaleDown(oldReady, 1)...)
		}
		return p
	}
	retired := 0
	if grow && newInFlight == 0 && len(oldReady) > 0 {
		// No room for a new replica: an old one makes some.
		p.retire = append(p.retire, scaleDown(oldReady, 1)...)
		retired = 1
	}
	if excess := len(oldReady) - retired + newReady - final; excess > 0 {
		rest := slices.DeleteFunc(slices.Clone(oldReady), func(r *state.Replica) bool { return slices.Contains(p.retire, r.ID) })
		p.retire = append(p.retire, scaleDown(rest, excess)...)
	}
	return p
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

// scaleDown picks n replicas to retire in SkyPilot's order: by status
// (PENDING, PROVISIONING, STARTING, NOT_READY, READY), then the older
// version, then the higher id.
func scaleDown(rs []*state.Replica, n int) []int {
	rank := map[string]int{api.ReplicaPending: 0, api.ReplicaProvisioning: 1, api.ReplicaStarting: 2, api.ReplicaNotReady: 3, api.ReplicaReady: 4}
	c := slices.Clone(rs)
	sort.SliceStable(c, func(i, j int) bool {
		a, b := c[i], c[j]
		if rank[a.Status] != rank[b.Status] {
			return rank[a.Status] < rank[b.Status]
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.ID > b.ID
	})
	var out []int
	for i := 0; i < n && i < len(c); i++ {
		out = append(out, c[i].ID)
	}
	return out
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
