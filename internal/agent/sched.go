package agent

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

// Scheduling decisions are pure functions over milli-units (1000 = one CPU
// or one whole GPU) so that fractions like 0.25 add up exactly.

const milli = 1000

func toMilli(v float64) int64 { return int64(math.Round(v * milli)) }

// NodeFree is what one node has left.
type NodeFree struct {
	MilliCPU int64
	// GPUName is the node's accelerator ("" when none); GPUs is the free
	// milli-fraction of each device, indexed by device number.
	GPUName string
	GPUs    []int64
}

// Demand is what a job needs on each of NumNodes nodes.
type Demand struct {
	NumNodes int
	MilliCPU int64
	GPUName  string
	// MilliGPU per node: ≥ 1000 means whole devices (rounded up),
	// < 1000 a share of one device.
	MilliGPU int64
}

// Placement says where a job runs: Nodes[r] is the node of rank r and
// Devices[r] the GPU device numbers it gets there.
type Placement struct {
	Nodes   []int
	Devices [][]int
}

// Fit finds the first NumNodes nodes (in node order, so rank 0 is the
// lowest-indexed node) where d fits. It does not modify free.
func Fit(free []NodeFree, d Demand) (Placement, bool) {
	var p Placement
	for i := range free {
		if len(p.Nodes) == d.NumNodes {
			break
		}
		if devs, ok := fitNode(free[i], d); ok {
			p.Nodes = append(p.Nodes, i)
			p.Devices = append(p.Devices, devs)
		}
	}
	return p, len(p.Nodes) == d.NumNodes && d.NumNodes > 0
}

func fitNode(n NodeFree, d Demand) ([]int, bool) {
	if n.MilliCPU < d.MilliCPU {
		return nil, false
	}
	if d.MilliGPU <= 0 {
		return nil, true
	}
	if !strings.EqualFold(n.GPUName, d.GPUName) {
		return nil, false
	}
	if d.MilliGPU < milli {
		for dev, f := range n.GPUs {
			if f >= d.MilliGPU {
				return []int{dev}, true
			}
		}
		return nil, false
	}
	want := int((d.MilliGPU + milli - 1) / milli)
	var devs []int
	for dev, f := range n.GPUs {
		if f == milli {
			devs = append(devs, dev)
			if len(devs) == want {
				return devs, true
			}
		}
	}
	return nil, false
}

// Take subtracts a placed demand from free.
func Take(free []NodeFree, d Demand, p Placement) { apply(free, d, p, -1) }

// Release gives a finished job's resources back.
func Release(free []NodeFree, d Demand, p Placement) { apply(free, d, p, +1) }

func apply(free []NodeFree, d Demand, p Placement, sign int64) {
	share := d.MilliGPU
	if share >= milli {
		share = milli
	}
	for r, node := range p.Nodes {
		free[node].MilliCPU += sign * d.MilliCPU
		for _, dev := range p.Devices[r] {
			free[node].GPUs[dev] += sign * share
		}
	}
}

// Schedule decides which jobs of a FIFO queue start now: it places jobs in
// order and stops at the first one that does not fit, so a big job is never
// starved by smaller ones behind it. It returns placements for a prefix of
// queue and subtracts them from free.
func Schedule(free []NodeFree, queue []Demand) []Placement {
	var out []Placement
	for _, d := range queue {
		p, ok := Fit(free, d)
		if !ok {
			break
		}
		Take(free, d, p)
		out = append(out, p)
	}
	return out
}

// CanEverFit reports why a demand could not run even on an idle cluster
// (nil when it could). Such jobs are refused at submit, because strict
// FIFO would otherwise block the queue behind them forever.
func CanEverFit(capacity []NodeFree, d Demand) error {
	if d.NumNodes > len(capacity) {
		return fmt.Errorf("job needs %d nodes but the cluster has %d", d.NumNodes, len(capacity))
	}
	if _, ok := Fit(capacity, d); !ok {
		return fmt.Errorf("job needs %s per node, more than a node of this cluster has (%s)",
			demandString(d), freeString(capacity[0]))
	}
	return nil
}

// DemandOf turns a spec's per-node request into a Demand.
func DemandOf(spec agentapi.JobSpec) Demand {
	d := Demand{NumNodes: spec.NumNodes, MilliCPU: toMilli(agentapi.DefaultCPUDemand)}
	if d.NumNodes <= 0 {
		d.NumNodes = 1
	}
	if spec.CPUs != nil {
		d.MilliCPU = toMilli(*spec.CPUs)
	}
	names := make([]string, 0, len(spec.GPUs))
	for name, n := range spec.GPUs {
		if n > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) > 0 {
		d.GPUName = names[0]
		d.MilliGPU = toMilli(spec.GPUs[names[0]])
	}
	return d
}

// ResourcesString is the `sky queue` resources column: `1x[CPU:0.5]` or
// `2x[A100:1]`.
func ResourcesString(numNodes int, d Demand) string {
	return fmt.Sprintf("%dx[%s]", numNodes, demandString(d))
}

func demandString(d Demand) string {
	if d.MilliGPU > 0 {
		return d.GPUName + ":" + fmtMilli(d.MilliGPU)
	}
	return "CPU:" + fmtMilli(d.MilliCPU)
}

func freeString(n NodeFree) string {
	s := "CPU:" + fmtMilli(n.MilliCPU)
	if n.GPUName != "" {
		s += fmt.Sprintf(", %s:%d", n.GPUName, len(n.GPUs))
	}
	return s
}

func fmtMilli(v int64) string {
	return strconv.FormatFloat(float64(v)/milli, 'f', -1, 64)
}

// gpusPerNode is SKYPILOT_NUM_GPUS_PER_NODE: the request rounded up.
func gpusPerNode(d Demand) int {
	if d.MilliGPU <= 0 {
		return 0
	}
	return int((d.MilliGPU + milli - 1) / milli)
}
