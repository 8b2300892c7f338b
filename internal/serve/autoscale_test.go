package serve

import (
	"slices"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/serve/lb"
	"github.com/skygo/skygo/internal/state"
)

func fixed(n int) *state.ServiceVersion {
	return &state.ServiceVersion{Service: api.ServiceSpec{Replicas: &n, Port: 8080}}
}

func scaling(lo, hi int, qps float64, up, down float64) *state.ServiceVersion {
	return &state.ServiceVersion{Service: api.ServiceSpec{Port: 8080, ReplicaPolicy: &api.ReplicaPolicySpec{
		MinReplicas: lo, MaxReplicas: hi, TargetQPS: &qps, UpscaleDelaySeconds: up, DownscaleDelaySeconds: down}}}
}

func svc(latest int, versions map[int]*state.ServiceVersion, rs ...*state.Replica) *state.Service {
	return &state.Service{Latest: latest, Versions: versions, Replicas: rs}
}

func rep(id, version int, status string) *state.Replica {
	return &state.Replica{ID: id, Version: version, Status: status, URL: "http://10.0.0.1:8080"}
}

// TestDecideHysteresis: the raw target is ceil(qps/target) clipped to
// [min, max], taken after int(delay/interval) decisions in a row wanting
// it, at once from 0; a decision the other way resets the count.
func TestDecideHysteresis(t *testing.T) {
	v := scaling(1, 3, 2, 3, 2)
	every := time.Second
	cur, up, down := 1, 0, 0
	steps := []struct {
		qps          float64
		want, wantUp int
		wantDown     int
	}{
		{6, 1, 1, 0}, {6, 1, 2, 0}, {6, 3, 0, 0}, // 3 decisions wanting 3
		{100, 3, 0, 0}, // clipped to max
		{1, 3, 0, 1}, {6, 3, 0, 0}, {1, 3, 0, 1}, {1, 1, 0, 0},
	}
	for i, s := range steps {
		cur, up, down = decide(v, cur, up, down, s.qps, every)
		if cur != s.want || up != s.wantUp || down != s.wantDown {
			t.Fatalf("step %d (qps %g): got target %d up %d down %d, want %d %d %d", i, s.qps, cur, up, down, s.want, s.wantUp, s.wantDown)
		}
	}
	z := scaling(0, 3, 2, 300, 300)
	if got, _, _ := decide(z, 0, 0, 0, 0.1, every); got != 1 {
		t.Fatalf("from zero with load: target %d, want 1 at once", got)
	}
	if got, _, _ := decide(z, 0, 0, 0, 0, every); got != 0 {
		t.Fatalf("from zero without load: target %d, want 0", got)
	}
	if got, _, _ := decide(fixed(2), 2, 0, 0, 1000, every); got != 2 {
		t.Fatalf("fixed replicas follow no load: target %d", got)
	}
}

// TestPlanScalesWithinCap: a service with no older version grows to the
// target within max_replicas and shrinks by SkyPilot's order.
func TestPlanScalesWithinCap(t *testing.T) {
	v := scaling(1, 3, 1, 0, 0)
	s := svc(1, map[int]*state.ServiceVersion{1: v}, rep(1, 1, api.ReplicaReady))
	if p := planReplicas(s, 5); len(p.add) != 2 {
		t.Fatalf("want 2 added (cap 3), got %+v", p)
	}
	s = svc(1, map[int]*state.ServiceVersion{1: v}, rep(1, 1, api.ReplicaReady), rep(2, 1, api.ReplicaStarting), rep(3, 1, api.ReplicaReady))
	if p := planReplicas(s, 1); !slices.Equal(p.retire, []int{2, 3}) {
		t.Fatalf("scale down: want [2 3] (STARTING first, then higher id), got %v", p.retire)
	}
	// A replica still shutting down holds its place under the cap.
	s = svc(1, map[int]*state.ServiceVersion{1: v}, rep(1, 1, api.ReplicaReady), rep(2, 1, api.ReplicaShuttingDown), rep(3, 1, api.ReplicaShuttingDown))
	if p := planReplicas(s, 3); len(p.add) != 0 {
		t.Fatalf("cap counts replicas shutting down: got %+v", p)
	}
}

// TestPlanStopsOnBrokenVersion: a newest version whose replica failed
// before any was READY launches nothing more.
func TestPlanStopsOnBrokenVersion(t *testing.T) {
	s := svc(1, map[int]*state.ServiceVersion{1: fixed(2)}, rep(1, 1, api.ReplicaFailedInitialDelay))
	if p := planReplicas(s, 2); len(p.add) != 0 {
		t.Fatalf("broken version still launches: %+v", p)
	}
	s.ReadyVersion = 1
	if p := planReplicas(s, 2); len(p.add) != 2 {
		t.Fatalf("a version that was READY replaces failed replicas: %+v", p)
	}
}

// TestRollingUpdateNeverExceedsCap walks a rolling update of a 2-replica
// service whose max is 2: every step keeps at least one READY replica and
// never holds more than 2.
func TestRollingUpdateNeverExceedsCap(t *testing.T) {
	walkUpdate(t, api.UpdateRolling, fixed(2), fixed(2), 2)
	walkUpdate(t, api.UpdateRolling, fixed(1), fixed(1), 1)
	walkUpdate(t, api.UpdateRolling, scaling(2, 3, 10, 0, 0), scaling(2, 3, 10, 0, 0), 2)
}

// TestBlueGreenSwitchesOnce: traffic stays on version 1 until version 2
// is READY, then only version 2 serves.
func TestBlueGreenSwitchesOnce(t *testing.T) {
	walkUpdate(t, api.UpdateBlueGreen, fixed(2), fixed(2), 2)
	walkUpdate(t, api.UpdateBlueGreen, fixed(1), fixed(1), 1)
	walkUpdate(t, api.UpdateBlueGreen, scaling(2, 4, 10, 0, 0), scaling(2, 4, 10, 0, 0), 2)
}

// walkUpdate simulates the controllers: each step applies the plan,
// brings one launching replica READY and removes the retired ones.
func walkUpdate(t *testing.T, mode string, v1, v2 *state.ServiceVersion, final int) {
	t.Helper()
	s := svc(2, map[int]*state.ServiceVersion{1: v1, 2: v2})
	for id := 1; id <= final; id++ {
		s.Replicas = append(s.Replicas, rep(id, 1, api.ReplicaReady))
	}
	s.UpdateMode, s.ReadyVersion, s.NextReplicaID = mode, 1, final
	if mode == api.UpdateBlueGreen {
		s.Active = 1
	}
	limit := replicaCap(v2)
	switched := false
	for step := 0; step < 40; step++ {
		p := planReplicas(s, final)
		for range p.add {
			s.NextReplicaID++
			s.Replicas = append(s.Replicas, rep(s.NextReplicaID, 2, api.ReplicaProvisioning))
		}
		for _, id := range p.retire {
			s.Replica(id).Status = api.ReplicaShuttingDown
		}
		s.Active = p.active
		if !oldLive(s) {
			s.Active = 0
		}
		held, ready := 0, 0
		versions := map[int]bool{}
		for _, r := range s.Replicas {
			if live(r.Status) || r.Status == api.ReplicaShuttingDown {
				held++
			}
		}
		for _, r := range readySet(s) {
			ready++
			versions[r.Version] = true
		}
		if held > limit {
			t.Fatalf("%s step %d: %d replicas held, cap %d: %+v", mode, step, held, limit, s.Replicas)
		}
		if mode == api.UpdateBlueGreen {
			if versions[2] {
				switched = true
			}
			if switched && versions[1] {
				t.Fatalf("blue-green step %d: version 1 serves after the switch", step)
			}
			if len(versions) > 1 {
				t.Fatalf("blue-green step %d: mixed versions serve", step)
			}
		}
		// The world moves: shut-down replicas go, one launching one is READY.
		s.Replicas = slices.DeleteFunc(s.Replicas, func(r *state.Replica) bool { return r.Status == api.ReplicaShuttingDown })
		for _, r := range s.Replicas {
			if r.Status == api.ReplicaProvisioning {
				r.Status = api.ReplicaReady
				s.ReadyVersion = 2
				break
			}
		}
		done := !oldLive(s)
		n := 0
		for _, r := range s.Replicas {
			if r.Version == 2 && r.Status == api.ReplicaReady {
				n++
			}
		}
		if done && n == final {
			return
		}
		if ready == 0 && step > 0 && held == 0 {
			t.Fatalf("%s step %d: nothing left", mode, step)
		}
	}
	t.Fatalf("%s: update did not finish: %+v", mode, s.Replicas)
}

// TestFallbackKeepsOnDemandBase: a spot service with base on-demand
// replicas launches them apart from the spot ones, and with dynamic
// fallback one on-demand replica for every spot replica not READY.
func TestFallbackKeepsOnDemandBase(t *testing.T) {
	newLive := []*state.Replica{{ID: 1, Spot: true, Status: api.ReplicaReady}, {ID: 2, Spot: true, Status: api.ReplicaProvisioning}}
	p := planFallback(newLive, 3, 1, false, 10, false)
	if !slices.Equal(p.add, []bool{false}) {
		t.Fatalf("base 1 of 3 with 2 spot replicas: want one on-demand, got %v", p.add)
	}
	if p = planFallback(newLive, 4, 1, false, 10, false); !slices.Equal(p.add, []bool{false, true}) {
		t.Fatalf("base 1 of 4: want one on-demand and one more spot, got %v", p.add)
	}
	p = planFallback(newLive, 2, 0, true, 10, false)
	if !slices.Equal(p.add, []bool{false}) || len(p.retire) != 0 {
		t.Fatalf("dynamic: a spot replica not READY wants one on-demand: %+v", p)
	}
}

// TestMeasuredQPS counts the window's requests and the held ones.
func TestMeasuredQPS(t *testing.T) {
	now := time.Unix(1000, 0)
	st := &lb.State{Requests: [][2]int64{{930, 50}, {950, 10}, {999, 20}}, Waiting: 2}
	if got, want := measuredQPS(st, now, 60*time.Second), 32.0/60; got != want {
		t.Fatalf("qps %g, want (10+20 in the window + 2 held)/60 = %g", got, want)
	}
}
