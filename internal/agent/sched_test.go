package agent

import (
	"reflect"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

func cpuNodes(cpus ...float64) []NodeFree {
	out := make([]NodeFree, len(cpus))
	for i, c := range cpus {
		out[i] = NodeFree{MilliCPU: toMilli(c)}
	}
	return out
}

func gpuNode(cpus float64, name string, devices int) NodeFree {
	n := NodeFree{MilliCPU: toMilli(cpus), GPUName: name}
	for i := 0; i < devices; i++ {
		n.GPUs = append(n.GPUs, milli)
	}
	return n
}

func f64(v float64) *float64 { return &v }

func TestFit(t *testing.T) {
	tests := []struct {
		name    string
		free    []NodeFree
		demand  Demand
		ok      bool
		nodes   []int
		devices [][]int
	}{
		{"default demand on one node", cpuNodes(2), DemandOf(agentapi.JobSpec{}), true, []int{0}, [][]int{nil}},
		{"gang needs both nodes", cpuNodes(1, 1), Demand{NumNodes: 2, MilliCPU: 1000}, true, []int{0, 1}, [][]int{nil, nil}},
		{"gang does not fit when one node is full", cpuNodes(1, 0.5), Demand{NumNodes: 2, MilliCPU: 1000}, false, nil, nil},
		{"skips a full head, rank 0 on next node", cpuNodes(0, 2, 2), Demand{NumNodes: 2, MilliCPU: 1000}, true, []int{1, 2}, [][]int{nil, nil}},
		{"whole GPUs are lowest free devices", []NodeFree{{MilliCPU: 4000, GPUName: "A100", GPUs: []int64{0, 1000, 1000, 1000}}},
			Demand{NumNodes: 1, MilliCPU: 500, GPUName: "A100", MilliGPU: 2000}, true, []int{0}, [][]int{{1, 2}}},
		{"fraction shares a partly used device", []NodeFree{{MilliCPU: 4000, GPUName: "A100", GPUs: []int64{250, 1000}}},
			Demand{NumNodes: 1, MilliCPU: 500, GPUName: "A100", MilliGPU: 250}, true, []int{0}, [][]int{{0}}},
		{"fraction too big for the shared device moves on", []NodeFree{{MilliCPU: 4000, GPUName: "A100", GPUs: []int64{250, 1000}}},
			Demand{NumNodes: 1, MilliCPU: 500, GPUName: "A100", MilliGPU: 500}, true, []int{0}, [][]int{{1}}},
		{"whole GPU refuses a shared device", []NodeFree{{MilliCPU: 4000, GPUName: "A100", GPUs: []int64{750}}},
			Demand{NumNodes: 1, MilliCPU: 500, GPUName: "A100", MilliGPU: 1000}, false, nil, nil},
		{"wrong accelerator type", []NodeFree{gpuNode(4, "V100", 1)},
			Demand{NumNodes: 1, MilliCPU: 500, GPUName: "A100", MilliGPU: 1000}, false, nil, nil},
		{"accelerator name is case-insensitive", []NodeFree{gpuNode(4, "a100", 1)},
			Demand{NumNodes: 1, MilliCPU: 500, GPUName: "A100", MilliGPU: 1000}, true, []int{0}, [][]int{{0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := Fit(tt.free, tt.demand)
			if ok != tt.ok {
				t.Fatalf("Fit ok = %v, want %v (placement %+v)", ok, tt.ok, p)
			}
			if !ok {
				return
			}
			if !reflect.DeepEqual(p.Nodes, tt.nodes) || !reflect.DeepEqual(p.Devices, tt.devices) {
				t.Fatalf("placement = %+v, want nodes %v devices %v", p, tt.nodes, tt.devices)
			}
		})
	}
}

func TestScheduleIsStrictFIFO(t *testing.T) {
	free := cpuNodes(2, 2)
	queue := []Demand{
		{NumNodes: 1, MilliCPU: 1000},
		{NumNodes: 2, MilliCPU: 2000}, // cannot fit while job 0 runs
		{NumNodes: 1, MilliCPU: 500},  // would fit, but must not overtake
	}
	got := Schedule(free, queue)
	if len(got) != 1 || !reflect.DeepEqual(got[0].Nodes, []int{0}) {
		t.Fatalf("Schedule = %+v, want only the first job on node 0", got)
	}
	if free[0].MilliCPU != 1000 || free[1].MilliCPU != 2000 {
		t.Fatalf("free after Schedule = %+v", free)
	}
	Release(free, queue[0], got[0])
	got = Schedule(free, queue[1:])
	if len(got) != 1 || !reflect.DeepEqual(got[0].Nodes, []int{0, 1}) {
		t.Fatalf("after release: %+v, want the 2-node job on nodes 0,1", got)
	}
	if free[0].MilliCPU != 0 || free[1].MilliCPU != 0 {
		t.Fatalf("free = %+v, want both nodes full", free)
	}
}

func TestScheduleCountsFractionsExactly(t *testing.T) {
	free := cpuNodes(1)
	queue := make([]Demand, 5)
	for i := range queue {
		queue[i] = DemandOf(agentapi.JobSpec{CPUs: f64(0.2)})
	}
	if got := Schedule(free, queue); len(got) != 5 {
		t.Fatalf("five 0.2-CPU jobs on 1 CPU: %d placed, want 5", len(got))
	}
	if free[0].MilliCPU != 0 {
		t.Fatalf("free = %d milli-CPU, want 0", free[0].MilliCPU)
	}
	gfree := []NodeFree{gpuNode(8, "A100", 1)}
	half := Demand{NumNodes: 1, GPUName: "A100", MilliGPU: 500}
	placed := Schedule(gfree, []Demand{half, half, half})
	if len(placed) != 2 {
		t.Fatalf("three half-GPU jobs on one GPU: %d placed, want 2", len(placed))
	}
	Release(gfree, half, placed[0])
	if gfree[0].GPUs[0] != 500 {
		t.Fatalf("after releasing one half: device free = %d, want 500", gfree[0].GPUs[0])
	}
}

func TestCanEverFit(t *testing.T) {
	capa := []NodeFree{gpuNode(2, "A100", 2), gpuNode(2, "A100", 2)}
	tests := []struct {
		d    Demand
		want string
	}{
		{Demand{NumNodes: 2, MilliCPU: 2000, GPUName: "A100", MilliGPU: 2000}, ""},
		{Demand{NumNodes: 3, MilliCPU: 500}, "needs 3 nodes but the cluster has 2"},
		{Demand{NumNodes: 1, MilliCPU: 4000}, "CPU:4 per node"},
		{Demand{NumNodes: 1, MilliCPU: 500, GPUName: "H100", MilliGPU: 1000}, "H100:1 per node"},
	}
	for _, tt := range tests {
		err := CanEverFit(capa, tt.d)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", tt.d, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want it to mention %q", tt.d, err, tt.want)
		}
	}
}

func TestDemandAndResourcesString(t *testing.T) {
	tests := []struct {
		spec agentapi.JobSpec
		want string
		gpus int
	}{
		{agentapi.JobSpec{}, "1x[CPU:0.5]", 0},
		{agentapi.JobSpec{NumNodes: 2, CPUs: f64(4)}, "2x[CPU:4]", 0},
		{agentapi.JobSpec{GPUs: map[string]float64{"A100": 2}}, "1x[A100:2]", 2},
		{agentapi.JobSpec{GPUs: map[string]float64{"T4": 0.5}}, "1x[T4:0.5]", 1},
	}
	for _, tt := range tests {
		d := DemandOf(tt.spec)
		if got := ResourcesString(d.NumNodes, d); got != tt.want {
			t.Errorf("ResourcesString(%+v) = %q, want %q", tt.spec, got, tt.want)
		}
		if got := gpusPerNode(d); got != tt.gpus {
			t.Errorf("gpusPerNode(%+v) = %d, want %d", tt.spec, got, tt.gpus)
		}
	}
}
