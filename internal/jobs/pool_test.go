package jobs

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/state"
)

func intp(v int) *int { return &v }

func testPool(target, version int, mode string, ws ...*state.PoolWorker) *state.Pool {
	return &state.Pool{RowMeta: state.RowMeta{Name: "p"}, SpecVersion: version, Target: target, UpdateMode: mode, Workers: ws}
}

func worker(id, version int, status string) *state.PoolWorker {
	return &state.PoolWorker{ID: id, SpecVersion: version, Status: status, Cluster: fmt.Sprintf("p-%d", id)}
}

// TestPlanWorkersSteady: without an update the pool scales to its target;
// down by SkyPilot's order (not READY first, fewer jobs, higher id), and
// never a worker that has jobs.
func TestPlanWorkersSteady(t *testing.T) {
	r := api.WorkerReady
	add, rm := planWorkers(testPool(3, 1, "", worker(1, 1, r)), nil)
	if add != 2 || len(rm) != 0 {
		t.Fatalf("scale up 1 -> 3: add %d remove %v", add, rm)
	}
	p := testPool(1, 1, "", worker(1, 1, r), worker(2, 1, r), worker(3, 1, api.WorkerStarting), worker(4, 1, r))
	add, rm = planWorkers(p, map[int]int{4: 1})
	if add != 0 || !slices.Equal(rm, []int{3, 2, 1}[:3]) {
		// 3 is not READY (first); then among READY idle ones the higher
		// id; 4 has a job and stays.
		t.Fatalf("scale down 4 -> 1: add %d remove %v, want [3 2 1]", add, rm)
	}
	if add, rm = planWorkers(testPool(0, 1, "", worker(1, 1, r)), map[int]int{1: 2}); add != 0 || len(rm) != 0 {
		t.Fatalf("busy worker scaled down: add %d remove %v", add, rm)
	}
	// A setup failure of the newest version stops the scaling.
	if add, _ = planWorkers(testPool(2, 1, "", worker(1, 1, api.WorkerFailed)), nil); add != 0 {
		t.Fatalf("launched more after a failed setup: add %d", add)
	}
}

// simulate runs the plan step after step, bringing every new worker READY
// one step after it was added, and checks the READY count never drops
// below the target during the update.
func simulate(t *testing.T, p *state.Pool, maxInflight int) {
	t.Helper()
	for step := 0; step < 50; step++ {
		for _, w := range p.Workers {
			if w.Status == api.WorkerPending {
				w.Status = api.WorkerReady
			}
		}
		add, rm := planWorkers(p, nil)
		if add > maxInflight {
			t.Fatalf("step %d: %d workers added at once, want at most %d", step, add, maxInflight)
		}
		for _, id := range rm {
			p.Worker(id).Status = api.WorkerShuttingDown
		}
		var kept []*state.PoolWorker
		ready := 0
		for _, w := range p.Workers {
			if w.Status != api.WorkerShuttingDown {
				kept = append(kept, w)
				if w.Status == api.WorkerReady {
					ready++
				}
			}
		}
		p.Workers = kept
		if ready < p.Target {
			t.Fatalf("step %d: %d READY workers, below the target %d", step, ready, p.Target)
		}
		for range add {
			p.NextWorkerID++
			p.Workers = append(p.Workers, worker(p.NextWorkerID, p.SpecVersion, api.WorkerPending))
		}
		done := len(p.Workers) == p.Target
		for _, w := range p.Workers {
			done = done && w.SpecVersion == p.SpecVersion && w.Status == api.WorkerReady
		}
		if done {
			return
		}
	}
	t.Fatalf("update did not finish: %+v", p.Workers)
}

// TestPlanWorkersRolling: a rolling update adds one new worker at a time
// and lets an old one go per new READY one; blue-green adds them all and
// drops the old ones once the new are READY; both keep the READY count
// at the target throughout.
func TestPlanWorkersRolling(t *testing.T) {
	r := api.WorkerReady
	p := testPool(3, 2, "rolling", worker(1, 1, r), worker(2, 1, r), worker(3, 1, r))
	p.NextWorkerID = 3
	add, rm := planWorkers(p, nil)
	if add != 1 || len(rm) != 0 {
		t.Fatalf("rolling start: add %d remove %v, want 1 new and no old gone", add, rm)
	}
	simulate(t, p, 1)

	p = testPool(3, 2, "blue_green", worker(1, 1, r), worker(2, 1, r), worker(3, 1, r))
	p.NextWorkerID = 3
	if add, rm = planWorkers(p, nil); add != 3 || len(rm) != 0 {
		t.Fatalf("blue-green start: add %d remove %v, want 3 new, none gone", add, rm)
	}
	p.Workers = append(p.Workers, worker(4, 2, r), worker(5, 2, r), worker(6, 2, api.WorkerStarting))
	if _, rm = planWorkers(p, nil); len(rm) != 0 {
		t.Fatalf("blue-green removed old workers before all new were READY: %v", rm)
	}
	p.Worker(6).Status = r
	if _, rm = planWorkers(p, map[int]int{2: 1}); !slices.Equal(rm, []int{1, 3}) {
		t.Fatalf("blue-green switch: remove %v, want [1 3] (2 is busy)", rm)
	}
	p = testPool(2, 2, "blue_green", worker(1, 1, r), worker(2, 1, r))
	simulate(t, p, 2)
}

// TestAutoscale: the queue-length autoscaler's decisions (service.md).
func TestAutoscale(t *testing.T) {
	pol := api.PoolPolicy{MinWorkers: intp(1), MaxWorkers: intp(3), QueueLengthThreshold: 2,
		UpscaleDelaySeconds: 40, DownscaleDelaySeconds: 20}
	cases := []struct {
		cur, queued, up, down  int
		want, wantUp, wantDown int
	}{
		{0, 5, 0, 0, 1, 0, 0}, // from 0: at once
		{1, 3, 0, 0, 1, 1, 0}, // above threshold: 1st wanting more (needs > 40/20)
		{1, 3, 1, 0, 1, 2, 0}, // 2nd
		{1, 3, 2, 0, 2, 0, 0}, // 3rd: taken
		{3, 9, 0, 0, 3, 0, 0}, // clipped at max: the same, counters reset
		{2, 2, 1, 0, 2, 0, 0}, // equal: keep, counters reset
		{2, 1, 0, 0, 2, 0, 1}, // below: 1st wanting fewer
		{2, 1, 0, 1, 1, 0, 0}, // 2nd: taken
		{1, 0, 0, 1, 1, 0, 0}, // no queue: min
	}
	for _, c := range cases {
		got, up, down := autoscale(pol, c.cur, c.queued, c.up, c.down, 20*time.Second)
		if got != c.want || up != c.wantUp || down != c.wantDown {
			t.Errorf("autoscale(cur %d, queue %d, up %d, down %d) = %d (%d, %d), want %d (%d, %d)",
				c.cur, c.queued, c.up, c.down, got, up, down, c.want, c.wantUp, c.wantDown)
		}
	}
	zero := api.PoolPolicy{MinWorkers: intp(0), MaxWorkers: intp(2)}
	if got, _, _ := autoscale(zero, 1, 0, 0, 0, 20*time.Second); got != 0 {
		t.Errorf("scale to zero with no downscale delay: got %d, want 0 at once", got)
	}
	if got, _, _ := autoscale(zero, 0, 1, 0, 0, 20*time.Second); got != 1 {
		t.Errorf("a queued job on an empty pool: target %d, want 1", got)
	}
}

// TestPickWorker: assignment is resource-aware when the task asks for
// something and the workers' resources are known (free = launched minus
// the jobs on it), else a worker must be idle; newest version first.
func TestPickWorker(t *testing.T) {
	ws := []workerView{
		{Cluster: "p-1", Version: 1, Known: true, CPUs: 4, Mem: 16, Used: []demand{{CPUs: 3}}, Jobs: 1},
		{Cluster: "p-2", Version: 1, Known: true, CPUs: 4, Mem: 16, GPUs: map[string]float64{"A100": 1}, Used: []demand{{CPUs: 1, GPUs: map[string]float64{"A100": 1}}}, Jobs: 1},
		{Cluster: "p-3", Version: 1, Known: true, CPUs: 4, Mem: 16},
	}
	if i := pickWorker(ws, []demand{{CPUs: 1}}, 1); i != 0 {
		t.Errorf("1 CPU: picked %d, want p-1 (1 of 4 CPUs left)", i)
	}
	if i := pickWorker(ws, []demand{{CPUs: 2}}, 1); i != 1 {
		t.Errorf("2 CPUs: picked %d, want p-2", i)
	}
	if i := pickWorker(ws, []demand{{GPUs: map[string]float64{"a100": 1}}}, 1); i != -1 {
		t.Errorf("A100 on a pool with no free A100: picked %d", i)
	}
	if i := pickWorker(ws, []demand{{GPUs: map[string]float64{"H100": 1}}, {CPUs: 4}}, 1); i != 2 {
		t.Errorf("any_of [H100, 4 CPUs]: picked %d, want p-3 (the second option fits)", i)
	}
	if i := pickWorker(ws, nil, 1); i != 2 {
		t.Errorf("no demands: picked %d, want the idle p-3", i)
	}
	if i := pickWorker(ws[:2], nil, 1); i != -1 {
		t.Errorf("no demands, no idle worker: picked %d", i)
	}
	unknown := []workerView{{Cluster: "p-1", Version: 1, Jobs: 1}, {Cluster: "p-2", Version: 1}}
	if i := pickWorker(unknown, []demand{{CPUs: 1}}, 1); i != 1 {
		t.Errorf("unknown resources: picked %d, want the idle p-2", i)
	}
	mixed := []workerView{{Cluster: "old", Version: 1}, {Cluster: "new", Version: 2}}
	if i := pickWorker(mixed, nil, 2); i != 1 {
		t.Errorf("during an update: picked %d, want the newest version's worker", i)
	}
}

// TestBusyWorkers: the jobs on each worker, and the jobs waiting for one.
func TestBusyWorkers(t *testing.T) {
	jobs := []*state.ManagedJob{
		{JobID: 1, Tasks: []*state.ManagedTask{{Status: api.ManagedRunning, ClusterName: "p-1"}}},
		{JobID: 2, Tasks: []*state.ManagedTask{{Status: api.ManagedPending}}},
		{JobID: 3, Tasks: []*state.ManagedTask{{Status: api.ManagedSucceeded, ClusterName: "p-1"}, {Status: api.ManagedStarting, ClusterName: "p-2"}}},
		{JobID: 4, Tasks: []*state.ManagedTask{{Status: api.ManagedSucceeded, ClusterName: "p-2"}}},
	}
	busy, queued := busyWorkers(jobs)
	if fmt.Sprint(busy) != "map[p-1:[1] p-2:[3]]" || queued != 1 {
		t.Fatalf("busy %v queued %d", busy, queued)
	}
}

// TestTaskDemands: a task's resource options as demands; an option that
// asks for nothing makes the task idle-worker-only.
func TestTaskDemands(t *testing.T) {
	d := taskDemands(api.TaskSpec{Resources: mustSpec(map[string]any{"cpus": "2+", "accelerators": "A100:1"})})
	if len(d) != 1 || d[0].CPUs != 2 || d[0].GPUs["A100"] != 1 {
		t.Fatalf("cpus 2+, A100:1: %+v", d)
	}
	if d := taskDemands(api.TaskSpec{}); d != nil {
		t.Fatalf("no resources: %+v", d)
	}
}

// TestPoolStatus: a pool's status from its workers (service.md): any
// READY -> READY; else a failed worker -> FAILED; else none -> NO_REPLICA;
// else REPLICA_INIT; SHUTTING_DOWN once a down was asked.
func TestPoolStatus(t *testing.T) {
	cases := []struct {
		ws   []*state.PoolWorker
		down bool
		want string
	}{
		{[]*state.PoolWorker{worker(1, 1, api.WorkerFailed), worker(2, 1, api.WorkerReady)}, false, api.PoolReady},
		{[]*state.PoolWorker{worker(1, 1, api.WorkerFailedProvision), worker(2, 1, api.WorkerStarting)}, false, api.PoolFailed},
		{nil, false, api.PoolNoReplica},
		{[]*state.PoolWorker{worker(1, 1, api.WorkerShuttingDown)}, false, api.PoolNoReplica},
		{[]*state.PoolWorker{worker(1, 1, api.WorkerProvisioning)}, false, api.PoolReplicaInit},
		{[]*state.PoolWorker{worker(1, 1, api.WorkerReady)}, true, api.PoolShuttingDown},
	}
	for i, c := range cases {
		p := testPool(1, 1, "", c.ws...)
		if c.down {
			p.Down = &state.PoolDown{}
		}
		if got := poolStatus(p); got != c.want {
			t.Errorf("case %d: %s, want %s", i, got, c.want)
		}
	}
}
