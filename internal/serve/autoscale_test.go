package serve

import (
	"slices"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/resources"
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

func withTask(v *state.ServiceVersion, res map[string]any) *state.ServiceVersion {
	spec, err := resources.ParseSpec(res)
	if err != nil {
		panic(err)
	}
	v.Task.Resources = spec
	return v
}

func TestDecideEvery(t *testing.T) {
	for _, c := range []struct {
		configured time.Duration
		target     int
		want       time.Duration
	}{
		{0, 3, 20 * time.Second},            // spec/service.md's interval
		{0, 0, 5 * time.Second},             // scaled to zero: comes back faster
		{time.Second, 3, time.Second},       // configured replaces both
		{time.Second, 0, time.Second},       //
		{time.Minute, 0, time.Minute},       // even a longer one
		{-time.Second, 2, 20 * time.Second}, // nonsense is no configuration
	} {
		if got := decideEvery(c.configured, c.target); got != c.want {
			t.Errorf("decideEvery(%s, target %d) = %s, want %s", c.configured, c.target, got, c.want)
		}
	}
}

func TestTargetQPSAndRawTarget(t *testing.T) {
	perAcc := func(res map[string]any) *state.ServiceVersion {
		v := scaling(1, 10, 0, 0, 0)
		v.Service.ReplicaPolicy.TargetQPS = nil
		v.Service.ReplicaPolicy.TargetQPSPerAccelerator = map[string]float64{"A100": 10, "L4:1": 4, "T4": 2}
		return withTask(v, res)
	}
	for _, c := range []struct {
		name    string
		v       *state.ServiceVersion
		qps     float64
		wantQPS float64
		want    int
	}{
		{"ceil(qps/target)", scaling(1, 10, 2, 0, 0), 7, 2, 4},
		{"an exact multiple is not rounded up", scaling(1, 10, 0.1, 0, 0), 0.3, 0.1, 3},
		{"clipped to min_replicas", scaling(2, 10, 5, 0, 0), 1, 5, 2},
		{"no load keeps min_replicas", scaling(0, 10, 5, 0, 0), 0, 5, 0},
		{"clipped to max_replicas", scaling(1, 3, 1, 0, 0), 50, 1, 3},
		{"a max below min is min", scaling(4, 2, 1, 0, 0), 50, 1, 4},
		{"fixed replicas take no load", fixed(3), 50, 0, 3},
		{"the accelerator the version asks for", perAcc(map[string]any{"accelerators": "A100:1"}), 25, 10, 3},
		{"an accelerator written with its count", perAcc(map[string]any{"accelerators": "L4"}), 9, 4, 3},
		{"an accelerator the mapping lacks: its lowest", perAcc(map[string]any{"accelerators": "H100"}), 5, 2, 3},
		{"no accelerator: the lowest", perAcc(nil), 3, 2, 2},
		{"any_of: the first candidate's", perAcc(map[string]any{"any_of": []any{map[string]any{"accelerators": "A100"}, map[string]any{"accelerators": "T4"}}}), 11, 10, 2},
	} {
		if got := targetQPS(c.v); got != c.wantQPS {
			t.Errorf("%s: targetQPS = %g, want %g", c.name, got, c.wantQPS)
		}
		if got := rawTarget(c.v, c.qps); got != c.want {
			t.Errorf("%s: rawTarget(qps %g) = %d, want %d", c.name, c.qps, got, c.want)
		}
	}
}

func TestDecideDelays(t *testing.T) {
	every := 20 * time.Second
	for _, c := range []struct {
		name               string
		v                  *state.ServiceVersion
		cur, up, down      int
		qps                float64
		target, wUp, wDown int
	}{
		{"no delay: up at once", scaling(1, 5, 1, 0, 0), 1, 0, 0, 3, 3, 0, 0},
		{"no delay: down at once", scaling(1, 5, 1, 0, 0), 4, 0, 0, 1, 1, 0, 0},
		{"a delay shorter than the interval: at once", scaling(1, 5, 1, 10, 10), 1, 0, 0, 3, 3, 0, 0},
		{"upscale_delay 60 s is 3 decisions: the first counts", scaling(1, 5, 1, 60, 60), 1, 0, 0, 3, 1, 1, 0},
		{"the third decision wanting more takes it", scaling(1, 5, 1, 60, 60), 1, 2, 0, 3, 3, 0, 0},
		{"a decision wanting fewer resets the upscale count", scaling(1, 5, 1, 60, 60), 2, 2, 0, 1, 2, 0, 1},
		{"an equal decision resets both", scaling(1, 5, 1, 60, 60), 2, 2, 1, 2, 2, 0, 0},
		{"downscale_delay 1200 s is 60 decisions", scaling(1, 5, 1, 0, 1200), 3, 0, 58, 1, 3, 0, 59},
		{"the 60th takes it", scaling(1, 5, 1, 0, 1200), 3, 0, 59, 1, 1, 0, 0},
		{"down to zero waits its delay too", scaling(0, 5, 1, 0, 60), 1, 0, 0, 0, 1, 0, 1},
		{"from zero at once, whatever the delay", scaling(0, 5, 1, 600, 600), 0, 0, 0, 2, 2, 0, 0},
		{"fixed replicas: the count, whatever the load", fixed(2), 5, 0, 0, 100, 2, 0, 0},
	} {
		target, up, down := decide(c.v, c.cur, c.up, c.down, c.qps, every)
		if target != c.target || up != c.wUp || down != c.wDown {
			t.Errorf("%s: decide = (%d, up %d, down %d), want (%d, up %d, down %d)", c.name, target, up, down, c.target, c.wUp, c.wDown)
		}
	}
}

func TestAutoscaleIsDueEveryInterval(t *testing.T) {
	v := scaling(0, 5, 1, 0, 0)
	const t0 = 1000.0
	at := func(target int, last float64) scaleState {
		return scaleState{Target: target, LastDecisionAt: last, QPS: 0.5}
	}
	for _, c := range []struct {
		name       string
		cur        scaleState
		configured time.Duration
		qps        float64
		held       int
		now        float64
		due        bool
		target     int
	}{
		{"the first look decides", at(0, 0), 0, 3, 0, t0, true, 3},
		{"within the 20 s interval: no decision", at(2, t0), 0, 4, 0, t0 + 19.9, false, 2},
		{"after 20 s: a decision", at(2, t0), 0, 4, 0, t0 + 20, true, 4},
		{"at zero the interval is 5 s", at(0, t0), 0, 2, 0, t0 + 5, true, 2},
		{"at zero, within 5 s: none", at(0, t0), 0, 2, 0, t0 + 4, false, 0},
		{"requests held at zero are decided on at once", at(0, t0), 0, 0.2, 3, t0 + 0.1, true, 1},
		{"held requests above zero wait for the interval", at(1, t0), 0, 2, 3, t0 + 1, false, 1},
		{"a configured interval of 1 s", at(2, t0), time.Second, 4, 0, t0 + 1, true, 4},
		{"a configured interval of 1 s, within it", at(2, t0), time.Second, 4, 0, t0 + 0.5, false, 2},
	} {
		next, due := autoscale(c.cur, v, c.qps, c.held, c.now, c.configured)
		if due != c.due || next.Target != c.target {
			t.Errorf("%s: autoscale = (%+v, due %v), want target %d, due %v", c.name, next, due, c.target, c.due)
			continue
		}
		if due && (next.LastDecisionAt != c.now || next.QPS != c.qps) {
			t.Errorf("%s: a decision must record when and on what rate: %+v", c.name, next)
		}
		if !due && next != c.cur {
			t.Errorf("%s: no decision, and the state changed: %+v, was %+v", c.name, next, c.cur)
		}
	}
}

func TestFallbackOf(t *testing.T) {
	spot := func(base int, dynamic bool) *state.ServiceVersion {
		v := scaling(1, 5, 1, 0, 0)
		v.Service.ReplicaPolicy.BaseOndemandFallbackReplicas = base
		v.Service.ReplicaPolicy.DynamicOndemandFallback = dynamic
		return withTask(v, map[string]any{"use_spot": true})
	}
	onDemand := spot(2, true)
	onDemand = withTask(onDemand, map[string]any{"cpus": 2})
	for _, c := range []struct {
		name        string
		v           *state.ServiceVersion
		wantSpot    bool
		base        int
		dynamic, on bool
	}{
		{"a spot service with a base", spot(2, false), true, 2, false, true},
		{"a spot service with dynamic fallback", spot(0, true), true, 0, true, true},
		{"a spot service without fallback", spot(0, false), true, 0, false, false},
		{"fallback asked of an on-demand service means nothing", onDemand, false, 0, false, false},
		{"fixed replicas", withTask(fixed(2), map[string]any{"use_spot": true}), true, 0, false, false},
	} {
		base, dynamic, on := fallback(c.v)
		if wantsSpot(c.v) != c.wantSpot || base != c.base || dynamic != c.dynamic || on != c.on {
			t.Errorf("%s: spot %v, fallback (%d, %v, %v), want spot %v, (%d, %v, %v)",
				c.name, wantsSpot(c.v), base, dynamic, on, c.wantSpot, c.base, c.dynamic, c.on)
		}
	}
}

func TestPlanFallbackCases(t *testing.T) {
	r := func(id int, spot bool, status string) *state.Replica {
		return &state.Replica{ID: id, Spot: spot, Status: status}
	}
	for _, c := range []struct {
		name       string
		live       []*state.Replica
		final      int
		base       int
		dynamic    bool
		room       int
		broken     bool
		wantAdd    []bool
		wantRetire []int
	}{
		{"empty: base on-demand first, then spot", nil, 3, 1, false, 10, false, []bool{false, true, true}, nil},
		{"the cap leaves room for the on-demand base only", nil, 3, 1, false, 1, false, []bool{false}, nil},
		{"a base above the target is the target", nil, 2, 5, false, 10, false, []bool{false, false}, nil},
		{"a broken version launches nothing", nil, 3, 1, false, 10, true, nil, nil},
		{"dynamic: every spot replica not READY has an on-demand stand-in",
			[]*state.Replica{r(1, true, api.ReplicaStarting), r(2, true, api.ReplicaStarting), r(3, true, api.ReplicaReady)}, 3, 0, true, 10, false,
			[]bool{false, false}, nil},
		{"dynamic: the stand-in goes once the spot replica is READY",
			[]*state.Replica{r(1, true, api.ReplicaReady), r(2, true, api.ReplicaReady), r(3, false, api.ReplicaReady)}, 2, 0, true, 10, false,
			nil, []int{3}},
		{"scaled down: the extra spot replicas retire",
			[]*state.Replica{r(1, false, api.ReplicaReady), r(2, true, api.ReplicaReady), r(3, true, api.ReplicaReady), r(4, true, api.ReplicaReady)}, 2, 1, false, 10, false,
			nil, []int{4, 3}},
	} {
		p := planFallback(c.live, c.final, c.base, c.dynamic, c.room, c.broken)
		if !slices.Equal(p.add, c.wantAdd) || !slices.Equal(p.retire, c.wantRetire) {
			t.Errorf("%s: add %v retire %v, want add %v retire %v", c.name, p.add, p.retire, c.wantAdd, c.wantRetire)
		}
	}
}

func TestMeasuredQPSWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	st := &lb.State{Requests: [][2]int64{{940, 60}, {941, 6}, {995, 4}}}
	for _, c := range []struct {
		st     *lb.State
		window time.Duration
		want   float64
	}{
		{st, 60 * time.Second, 10.0 / 60},              // the second 60 s ago is out
		{st, 10 * time.Second, 4.0 / 10},               // a shorter window (the test knob)
		{st, 0, 0},                                     // no window: nothing measured
		{nil, 60 * time.Second, 0},                     // no load balancer yet
		{&lb.State{Waiting: 3}, 10 * time.Second, 0.3}, // held only
	} {
		if got := measuredQPS(c.st, now, c.window); got != c.want {
			t.Errorf("window %s: qps %g, want %g", c.window, got, c.want)
		}
	}
}
