package kubernetes

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/resources"
)

// podSize is the CPUs and memory of one pod when the task leaves them
// unset: resources' defaults for Kubernetes (2 CPUs, 1 GB per CPU; with
// accelerators 4 GB per CPU), except that with accelerators the CPUs are
// resources' figure per accelerator, times accCount, as SkyPilot sizes it.
// A per-CPU memory bound ("4x") is resolved against the CPUs.
// defaultsCloud is the name internal/resources knows Kubernetes by.
const defaultsCloud = "kubernetes"

func podSize(cpus, memory catalog.Bound, accCount float64) (cpuN, memGB float64) {
	withAcc := accCount > 0
	cpuN = cpus.Value
	if !cpus.IsSet() {
		cpuN = resources.DefaultCPUs(defaultsCloud, withAcc).Value
		if withAcc {
			cpuN *= accCount
		}
	}
	switch {
	case memory.IsSet() && memory.PerCPU:
		memGB = memory.Value * cpuN
	case memory.IsSet():
		memGB = memory.Value
	default:
		memGB = resources.DefaultMemory(defaultsCloud, withAcc).Value * cpuN
	}
	return cpuN, memGB
}

// nodeFree is one node as far as placing pods goes: what it has
// (capacity), what pods may use (allocatable) and what is free now
// (allocatable minus the requests of the pods running on it).
type nodeFree struct {
	Name        string
	Ready       bool // the kubelet reports Ready
	Schedulable bool // not cordoned
	// CPUs and MemoryGB are capacity; Alloc* are allocatable.
	CPUs, MemoryGB           float64
	AllocCPUs, AllocMemoryGB float64
	FreeCPUs, FreeMemoryGB   float64
	// Acc is the accelerator under the detected scheme ("" when the node
	// has no label of it); GPUs is its capacity, AllocGPUs allocatable.
	Acc                       string
	GPUs, AllocGPUs, FreeGPUs int64
	GPUKey                    string
	Labels                    map[string]string
	Taints                    []corev1.Taint
	IPs                       []string
}

const bytesPerGB = 1 << 30

// nodesFree describes each node, charging it with the requests of the
// pods bound to it that still hold resources: pods that have finished
// (Succeeded, Failed) or are being deleted are left out, as the
// scheduler's view of a soon-free node.
func nodesFree(nodes []corev1.Node, pods []corev1.Pod, s *gpuLabelScheme) []nodeFree {
	used := map[string]corev1.ResourceList{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		total := used[p.Spec.NodeName]
		if total == nil {
			total = corev1.ResourceList{}
			used[p.Spec.NodeName] = total
		}
		for name, q := range podRequests(p) {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	out := make([]nodeFree, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		acc, gpus, allocGPUs, key := nodeAccelerator(n, s)
		u := used[n.Name]
		allocCPUs := cpusOf(n.Status.Allocatable)
		allocMem := memGBOf(n.Status.Allocatable)
		usedGPUs := u[corev1.ResourceName(key)]
		out = append(out, nodeFree{
			Name:          n.Name,
			Ready:         nodeReady(n),
			Schedulable:   !n.Spec.Unschedulable,
			CPUs:          cpusOf(n.Status.Capacity),
			MemoryGB:      memGBOf(n.Status.Capacity),
			AllocCPUs:     allocCPUs,
			AllocMemoryGB: allocMem,
			FreeCPUs:      math.Max(allocCPUs-cpusOf(u), 0),
			FreeMemoryGB:  math.Max(allocMem-memGBOf(u), 0),
			Acc:           acc,
			GPUs:          gpus,
			AllocGPUs:     allocGPUs,
			FreeGPUs:      max(allocGPUs-usedGPUs.Value(), 0),
			GPUKey:        key,
			Labels:        n.Labels,
			Taints:        n.Spec.Taints,
			IPs:           nodeIPs(n),
		})
	}
	return out
}

func cpusOf(l corev1.ResourceList) float64 {
	q, ok := l[corev1.ResourceCPU]
	if !ok {
		return 0
	}
	return float64(q.MilliValue()) / 1000
}

func memGBOf(l corev1.ResourceList) float64 {
	q, ok := l[corev1.ResourceMemory]
	if !ok {
		return 0
	}
	return float64(q.Value()) / bytesPerGB
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podRequests is what the scheduler reserves for a pod: the larger of its
// containers' sum and its biggest init container (init containers run one
// at a time before the others), with sidecars (restartable init
// containers) counted in both, plus the pod overhead. A container that
// sets only a limit is charged its limit, as the API server defaults it.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	add := func(into corev1.ResourceList, c *corev1.Container) {
		for name, q := range containerRequests(c) {
			v := into[name]
			v.Add(q)
			into[name] = v
		}
	}
	for i := range p.Spec.Containers {
		add(sum, &p.Spec.Containers[i])
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sidecars, c)
			continue
		}
		// A regular init container runs beside the sidecars started before it.
		during := sidecars.DeepCopy()
		add(during, c)
		for name, q := range during {
			if cur, ok := initMax[name]; !ok || q.Cmp(cur) > 0 {
				initMax[name] = q
			}
		}
	}
	for name, q := range sidecars {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
	for name, q := range initMax {
		if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
			sum[name] = q
		}
	}
	for name, q := range p.Spec.Overhead {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
	return sum
}

func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range c.Resources.Limits {
		out[name] = q.DeepCopy()
	}
	for name, q := range c.Resources.Requests {
		out[name] = q.DeepCopy()
	}
	return out
}

// knownAutoscalers can add a node when none fits. SkyPilot asks GKE's
// node pools whether one of them could hold the pod; that needs the GKE
// API, which SkyGo does not call, so gke is taken as able like the rest
// and a pod no pool can hold fails at the provision timeout instead.
var knownAutoscalers = []string{"gke", "karpenter", "coreweave", "nebius", "generic"}

// feasible reports whether one pod of cpus, memGB and count x acc fits
// some node's capacity (SkyPilot's rule: whether it fits in what is free
// now is the scheduler's question, answered by waiting). It returns the
// request to send: a request equal to a node's capacity is lowered to that
// node's allocatable, since capacity includes what the kubelet reserves
// and would never schedule. When nothing fits, reason says why in one
// line; with an autoscaler configured the pod is taken to fit anyway
// (ok, with reason saying what the autoscaler must add).
func feasible(nodes []nodeFree, cpus, memGB float64, acc string, count int64, autoscaler string) (fitCPUs, fitMemGB float64, ok bool, reason string) {
	fitting, reason := fittingNodes(nodes, cpus, memGB, acc, count)
	if reason != "" {
		if autoscaler == "" {
			return cpus, memGB, false, reason
		}
		for _, a := range knownAutoscalers {
			if a == autoscaler {
				return cpus, memGB, true, fmt.Sprintf("%s; the %s autoscaler is expected to add such a node", reason, autoscaler)
			}
		}
		return cpus, memGB, false, fmt.Sprintf("%s; kubernetes.autoscaler %q is none of %s, so no node is expected to be added", reason, autoscaler, strings.Join(knownAutoscalers, ", "))
	}
	fitCPUs, fitMemGB = cpus, memGB
	for _, n := range fitting {
		if sameSize(n.CPUs, cpus) && n.AllocCPUs < fitCPUs {
			fitCPUs = n.AllocCPUs
		}
		if sameSize(n.MemoryGB, memGB) && n.AllocMemoryGB < fitMemGB {
			fitMemGB = n.AllocMemoryGB
		}
	}
	return fitCPUs, fitMemGB, true, ""
}

// sameSize compares figures that went through GB conversions.
func sameSize(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// fittingNodes narrows the nodes step by step (accelerator, its count,
// CPUs, memory) so that the reason names the first requirement no node
// meets, with the largest figure among the nodes still in the running.
func fittingNodes(nodes []nodeFree, cpus, memGB float64, acc string, count int64) ([]nodeFree, string) {
	cand := nodes
	what := ""
	if acc != "" && count > 0 {
		var withAcc []nodeFree
		others := map[string]bool{}
		for _, n := range nodes {
			switch {
			case strings.EqualFold(n.Acc, acc):
				withAcc = append(withAcc, n)
			case n.Acc != "":
				others[n.Acc] = true
			}
		}
		if len(withAcc) == 0 {
			if len(others) == 0 {
				return nil, fmt.Sprintf("no node with %s GPUs (no node has a GPU label; see `sky gpus label`)", acc)
			}
			return nil, fmt.Sprintf("no node with %s GPUs (GPUs found: %s)", acc, strings.Join(sortedKeys(others), ", "))
		}
		var enough []nodeFree
		var largest int64
		for _, n := range withAcc {
			largest = max(largest, n.GPUs)
			if n.GPUs >= count {
				enough = append(enough, n)
			}
		}
		if len(enough) == 0 {
			return nil, fmt.Sprintf("no node with %dx %s (largest: %d)", count, acc, largest)
		}
		cand = enough
		what = fmt.Sprintf("%dx %s and ", count, acc)
	}
	if len(cand) == 0 {
		return nil, "the Kubernetes cluster has no nodes"
	}
	var withCPUs []nodeFree
	var largestCPUs float64
	for _, n := range cand {
		largestCPUs = math.Max(largestCPUs, n.CPUs)
		if n.CPUs >= cpus-1e-9 {
			withCPUs = append(withCPUs, n)
		}
	}
	if len(withCPUs) == 0 {
		return nil, fmt.Sprintf("no node with %s%s CPUs (largest: %s)", what, figure(cpus), figure(largestCPUs))
	}
	var fit []nodeFree
	var largestMem float64
	for _, n := range withCPUs {
		largestMem = math.Max(largestMem, n.MemoryGB)
		if n.MemoryGB >= memGB-1e-6 {
			fit = append(fit, n)
		}
	}
	if len(fit) == 0 {
		return nil, fmt.Sprintf("no node with %s%s CPUs and %s GB memory (largest memory: %s GB)", what, figure(cpus), figure(memGB), figure(largestMem))
	}
	return fit, ""
}

// figure prints a count of CPUs or GB without trailing zeros (2, 0.5, 7.45).
func figure(f float64) string {
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// gpuUsage is `sky gpus list --infra k8s` for one context: a row per
// accelerator (Region = context) with the totals and the per-node
// quantities one pod can ask for, then a row per node and accelerator
// (Node set), as infra.GPUUsage says. Total counts every node's capacity;
// a node that is not Ready or is cordoned has nothing free. Nodes
// without an accelerator label are left out: no pod can select them.
func gpuUsage(context string, nodes []nodeFree) []infra.GPUUsage {
	type agg struct {
		total, free, largest int
	}
	byAcc := map[string]*agg{}
	var perNode []infra.GPUUsage
	for _, n := range nodes {
		if n.Acc == "" || n.GPUs <= 0 {
			continue
		}
		free := int(n.FreeGPUs)
		if !n.Ready || !n.Schedulable {
			free = 0
		}
		total := int(n.GPUs)
		a := byAcc[n.Acc]
		if a == nil {
			a = &agg{}
			byAcc[n.Acc] = a
		}
		a.total += total
		a.free += free
		a.largest = max(a.largest, total)
		status := "Ready"
		switch {
		case !n.Ready:
			status = "NotReady"
		case !n.Schedulable:
			status = "SchedulingDisabled"
		}
		perNode = append(perNode, infra.GPUUsage{Region: context, Node: n.Name, GPU: n.Acc, Total: total, Free: free, Requestable: []int{total},
			CPUs: n.CPUs, MemoryGB: n.MemoryGB, Status: status})
	}
	accs := make([]string, 0, len(byAcc))
	for acc := range byAcc {
		accs = append(accs, acc)
	}
	sort.Strings(accs)
	out := make([]infra.GPUUsage, 0, len(accs)+len(perNode))
	for _, acc := range accs {
		a := byAcc[acc]
		out = append(out, infra.GPUUsage{Region: context, GPU: acc, Total: a.total, Free: a.free, Requestable: requestable(a.largest)})
	}
	sort.SliceStable(perNode, func(i, j int) bool {
		if perNode[i].Node != perNode[j].Node {
			return perNode[i].Node < perNode[j].Node
		}
		return perNode[i].GPU < perNode[j].GPU
	})
	return append(out, perNode...)
}

// requestable are the counts offered for one pod: powers of two up to the
// largest node, and the largest node's count itself.
func requestable(largest int) []int {
	var out []int
	for q := 1; q <= largest; q *= 2 {
		out = append(out, q)
	}
	if largest > 0 && out[len(out)-1] != largest {
		out = append(out, largest)
	}
	return out
}
