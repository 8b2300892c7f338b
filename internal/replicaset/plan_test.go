package replicaset

import (
	"slices"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

func m(id, version int, ph Phase) Member { return Member{ID: id, Version: version, Phase: ph} }

func busy(id, version int, ph Phase, jobs int) Member {
	return Member{ID: id, Version: version, Phase: ph, Busy: jobs}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want Plan
	}{
		{"empty set grows to the target", Input{Latest: 1, Target: 3, Cap: NoCap}, Plan{Launch: 3}},
		{"growth stops at the cap", Input{Latest: 1, Target: 5, Cap: 3, Members: []Member{m(1, 1, Ready)}}, Plan{Launch: 2}},
		{"draining members hold their place under the cap",
			Input{Latest: 1, Target: 3, Cap: 3, Members: []Member{m(1, 1, Ready), m(2, 1, Draining), m(3, 1, Draining)}}, Plan{}},
		{"failed members count toward nothing",
			Input{Latest: 1, Target: 2, Cap: 2, Members: []Member{m(1, 1, Ready), m(2, 1, Out)}}, Plan{Launch: 1}},
		{"scale down: not READY first, then the higher id",
			Input{Latest: 1, Target: 1, Cap: NoCap, Members: []Member{m(1, 1, Ready), m(2, 1, Starting), m(3, 1, Ready)}},
			Plan{Remove: []int{2, 3}}},
		{"scale down keeps busy members",
			Input{Latest: 1, Target: 1, Cap: NoCap, Members: []Member{m(1, 1, Ready), m(2, 1, Ready), m(3, 1, Starting), busy(4, 1, Ready, 1)}},
			Plan{Remove: []int{3, 2, 1}}},
		{"a broken version launches nothing", Input{Latest: 1, Target: 2, Cap: NoCap, Broken: true, Members: []Member{m(1, 1, Out)}}, Plan{}},
		{"a broken version still scales down",
			Input{Latest: 1, Target: 1, Cap: NoCap, Broken: true, Members: []Member{m(1, 1, Ready), m(2, 1, Ready)}}, Plan{Remove: []int{2}}},

		{"rolling: old members not READY go at once",
			Input{Latest: 2, Target: 2, Cap: NoCap, Members: []Member{m(1, 1, Ready), m(2, 1, Starting), busy(3, 1, NotReady, 1)}},
			Plan{Launch: 2, Remove: []int{2}}},
		{"rolling: one new member at a time with MaxStarting 1",
			Input{Latest: 2, Target: 3, Cap: NoCap, MaxStarting: 1, Members: []Member{m(1, 1, Ready), m(2, 1, Ready), m(3, 1, Ready)}},
			Plan{Launch: 1}},
		{"rolling: nothing more while one starts",
			Input{Latest: 2, Target: 3, Cap: NoCap, MaxStarting: 1, Members: []Member{m(1, 1, Ready), m(2, 1, Ready), m(3, 1, Ready), m(4, 2, NotReady)}},
			Plan{}},
		{"rolling: each READY new member lets one old go",
			Input{Latest: 2, Target: 3, Cap: NoCap, MaxStarting: 1, Members: []Member{m(1, 1, Ready), m(2, 1, Ready), m(3, 1, Ready), m(4, 2, Ready)}},
			Plan{Launch: 1, Remove: []int{3}}},
		{"rolling: a busy old member stays past the target",
			Input{Latest: 2, Target: 1, Cap: NoCap, Members: []Member{busy(1, 1, Ready, 2), m(2, 2, Ready)}}, Plan{}},
		{"rolling: the older version goes first",
			Input{Latest: 3, Target: 1, Cap: NoCap, Members: []Member{m(1, 2, Ready), m(2, 1, Ready), m(3, 3, Ready)}},
			Plan{Remove: []int{2, 1}}},
		{"rolling: with no room an old member makes some",
			Input{Latest: 2, Target: 2, Cap: 2, Members: []Member{m(1, 1, Ready), m(2, 1, Ready)}}, Plan{Remove: []int{2}}},
		{"rolling: with no room and a new member starting, wait",
			Input{Latest: 2, Target: 2, Cap: 2, Members: []Member{m(1, 1, Ready), m(2, 2, Provisioning), m(3, 1, Draining)}}, Plan{}},
		{"rolling: launches into the room the cap leaves",
			Input{Latest: 2, Target: 2, Cap: 3, Members: []Member{m(1, 1, Ready), m(2, 1, Ready)}}, Plan{Launch: 1}},

		{"blue-green: all new members at once, traffic stays",
			Input{Latest: 2, Target: 2, Mode: BlueGreen, Cap: NoCap, Active: 1, Members: []Member{m(1, 1, Ready), m(2, 1, Ready)}},
			Plan{Launch: 2, Active: 1}},
		{"blue-green: no switch before the target is READY",
			Input{Latest: 2, Target: 2, Mode: BlueGreen, Cap: NoCap, Active: 1, Members: []Member{m(1, 1, Ready), m(2, 1, Ready), m(3, 2, Ready), m(4, 2, Starting)}},
			Plan{Active: 1}},
		{"blue-green: the switch lets the idle old members go",
			Input{Latest: 2, Target: 2, Mode: BlueGreen, Cap: NoCap, Active: 1, Members: []Member{m(1, 1, Ready), busy(2, 1, Ready, 1), m(3, 2, Ready), m(4, 2, Ready)}},
			Plan{Active: 2, Remove: []int{1}}},
		{"blue-green: no old member READY switches at once",
			Input{Latest: 2, Target: 2, Mode: BlueGreen, Cap: NoCap, Active: 1, Members: []Member{m(1, 1, Starting)}},
			Plan{Launch: 2, Active: 2, Remove: []int{1}}},
		{"blue-green: at the cap, one READY new member and one old switch",
			Input{Latest: 2, Target: 2, Mode: BlueGreen, Cap: 2, Active: 1, Members: []Member{m(1, 1, Ready), m(2, 2, Ready)}},
			Plan{Active: 2, Remove: []int{1}}},
		{"blue-green: at the cap with two old members, one makes room",
			Input{Latest: 2, Target: 2, Mode: BlueGreen, Cap: 2, Active: 1, Members: []Member{m(1, 1, Ready), m(2, 1, Ready)}},
			Plan{Active: 1, Remove: []int{2}}},
		{"blue-green: a cap of one, the old member goes first",
			Input{Latest: 2, Target: 1, Mode: BlueGreen, Cap: 1, Active: 1, Members: []Member{m(1, 1, Ready)}},
			Plan{Active: 1, Remove: []int{1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.in)
			if got.Launch != tc.want.Launch || !slices.Equal(got.Remove, tc.want.Remove) || got.Active != tc.want.Active {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRollingWalk carries a rolling update out step by step (each new
// member READY one step after its launch, removed members gone): the
// READY count never drops below the target, the cap is never passed,
// and the update ends with only new members.
func TestRollingWalk(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		target, cap, starting int
	}{
		{"pool: no cap, one at a time", 3, NoCap, 1},
		{"service: cap at the target", 2, 2, 0},
		{"service: room for one more", 2, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ms []Member
			for id := 1; id <= tc.target; id++ {
				ms = append(ms, m(id, 1, Ready))
			}
			next := tc.target
			for step := 0; step < 30; step++ {
				p := Decide(Input{Members: ms, Latest: 2, Target: tc.target, Cap: tc.cap, MaxStarting: tc.starting})
				ms = slices.DeleteFunc(ms, func(x Member) bool { return slices.Contains(p.Remove, x.ID) })
				for range p.Launch {
					next++
					ms = append(ms, m(next, 2, Pending))
				}
				if tc.cap != NoCap && len(ms) > tc.cap {
					t.Fatalf("step %d: %d members, cap %d", step, len(ms), tc.cap)
				}
				ready, done := 0, len(ms) == tc.target
				for _, x := range ms {
					if x.Phase == Ready {
						ready++
					}
					done = done && x.Version == 2 && x.Phase == Ready
				}
				if done {
					return
				}
				if tc.cap == NoCap && ready < tc.target {
					t.Fatalf("step %d: %d READY, below the target %d", step, ready, tc.target)
				}
				for i := range ms {
					if ms[i].Phase == Pending {
						ms[i].Phase = Ready
						if tc.cap != NoCap {
							break // one at a time, as slow clusters come up
						}
					}
				}
			}
			t.Fatalf("the update did not finish: %+v", ms)
		})
	}
}

func TestScaleDownOrder(t *testing.T) {
	ms := []Member{m(1, 2, Ready), m(2, 1, Ready), m(3, 2, NotReady), m(4, 2, Pending), busy(5, 1, Pending, 1), m(6, 2, Ready)}
	if got, want := ScaleDown(ms, 10), []int{4, 3, 2, 6, 1}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v (phase, older version, higher id; busy never)", got, want)
	}
	if got := ScaleDown(ms, 2); !slices.Equal(got, []int{4, 3}) {
		t.Fatalf("first two: %v", got)
	}
}

// Pool workers and replicas share SkyServe's statuses, so PhaseOf reads
// both; this guards that they stay one vocabulary.
func TestPhaseOfWorkerStatuses(t *testing.T) {
	for _, tc := range []struct {
		worker, replica string
		want            Phase
	}{
		{api.WorkerPending, api.ReplicaPending, Pending},
		{api.WorkerProvisioning, api.ReplicaProvisioning, Provisioning},
		{api.WorkerStarting, api.ReplicaStarting, Starting},
		{api.WorkerNotReady, api.ReplicaNotReady, NotReady},
		{api.WorkerReady, api.ReplicaReady, Ready},
		{api.WorkerShuttingDown, api.ReplicaShuttingDown, Draining},
		{api.WorkerFailed, api.ReplicaFailed, Out},
		{api.WorkerFailedProvision, api.ReplicaFailedProvision, Out},
		{api.WorkerPreempted, api.ReplicaPreempted, Out},
	} {
		if got, got2 := PhaseOf(tc.worker), PhaseOf(tc.replica); got != tc.want || got2 != tc.want {
			t.Errorf("%s: worker %v, replica %v, want %v", tc.worker, got, got2, tc.want)
		}
	}
	if PhaseOf(api.ReplicaFailedProbing).Live() || !PhaseOf(api.ReplicaNotReady).Live() {
		t.Error("live phases: PENDING through READY only")
	}
}
