package kubernetes

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/infra"
)

func TestPodSize(t *testing.T) {
	tests := []struct {
		name          string
		cpus, mem     catalog.Bound
		acc           float64
		wantC, wantGB float64
	}{
		{"defaults", catalog.Bound{}, catalog.Bound{}, 0, 2, 2},
		{"one GPU", catalog.Bound{}, catalog.Bound{}, 1, 4, 16},
		{"eight GPUs", catalog.Bound{}, catalog.Bound{}, 8, 32, 128},
		{"cpus given", catalog.Bound{Value: 8}, catalog.Bound{}, 0, 8, 8},
		{"cpus given with GPUs", catalog.Bound{Value: 8}, catalog.Bound{}, 2, 8, 32},
		{"memory given", catalog.Bound{}, catalog.Bound{Value: 10}, 0, 2, 10},
		{"memory per CPU", catalog.Bound{Value: 3}, catalog.Bound{Value: 2, PerCPU: true}, 0, 3, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, gb := podSize(tt.cpus, tt.mem, tt.acc)
			if c != tt.wantC || gb != tt.wantGB {
				t.Fatalf("podSize = %v CPUs, %v GB; want %v, %v", c, gb, tt.wantC, tt.wantGB)
			}
		})
	}
}

func testPod(name, node string, phase corev1.PodPhase, req map[string]string) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for k, v := range req {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return p
}

func TestNodesFree(t *testing.T) {
	gpuNode := testNode("gpu1", labelled(skypilotAccLabel, "h100"), map[string]string{"cpu": "32/31", "memory": "256Gi/250Gi", "nvidia.com/gpu": "8"})
	gpuNode.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	cpuNode := testNode("cpu1", nil, map[string]string{"cpu": "8", "memory": "32Gi"})
	cpuNode.Spec.Unschedulable = true
	notReady := testNode("down", nil, map[string]string{"cpu": "4", "memory": "16Gi"})
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse

	deleting := testPod("deleting", "gpu1", corev1.PodRunning, map[string]string{"cpu": "10", "nvidia.com/gpu": "4"})
	deleting.DeletionTimestamp = &metav1.Time{}
	sidecar := corev1.ContainerRestartPolicyAlways
	withInit := testPod("init", "cpu1", corev1.PodPending, map[string]string{"cpu": "1", "memory": "1Gi"})
	withInit.Spec.InitContainers = []corev1.Container{
		{Name: "big-init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("3")}}},
		{Name: "sidecar", RestartPolicy: &sidecar, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": resource.MustParse("2Gi")}}},
	}
	limitOnly := testPod("limit", "gpu1", corev1.PodRunning, nil)
	limitOnly.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}

	pods := []corev1.Pod{
		testPod("run", "gpu1", corev1.PodRunning, map[string]string{"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}),
		testPod("pend", "gpu1", corev1.PodPending, map[string]string{"cpu": "500m", "memory": "512Mi"}),
		testPod("done", "gpu1", corev1.PodSucceeded, map[string]string{"cpu": "8", "nvidia.com/gpu": "4"}),
		testPod("failed", "gpu1", corev1.PodFailed, map[string]string{"cpu": "8", "nvidia.com/gpu": "4"}),
		testPod("unbound", "", corev1.PodPending, map[string]string{"cpu": "8", "nvidia.com/gpu": "4"}),
		testPod("elsewhere", "other-node", corev1.PodRunning, map[string]string{"cpu": "8", "nvidia.com/gpu": "4"}),
		deleting, withInit, limitOnly,
	}
	got := nodesFree([]corev1.Node{gpuNode, cpuNode, notReady}, pods, schemeNamed("skypilot"))
	if len(got) != 3 {
		t.Fatalf("%d nodes, want 3", len(got))
	}
	g := got[0]
	want := nodeFree{Name: "gpu1", Ready: true, Schedulable: true, CPUs: 32, MemoryGB: 256, AllocCPUs: 31, AllocMemoryGB: 250,
		FreeCPUs: 26.5, FreeMemoryGB: 233.5, Acc: "H100", GPUs: 8, AllocGPUs: 8, FreeGPUs: 5, GPUKey: nvidiaGPUKey,
		Labels: gpuNode.Labels, Taints: gpuNode.Spec.Taints}
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("gpu node:\n got %+v\nwant %+v", g, want)
	}
	// The init container (3 CPUs) outweighs the container (1); the sidecar's
	// 2Gi runs beside both.
	c := got[1]
	if c.Schedulable || !c.Ready || c.FreeCPUs != 5 || c.FreeMemoryGB != 29 || c.Acc != "" || c.GPUs != 0 {
		t.Fatalf("cpu node: %+v", c)
	}
	if d := got[2]; d.Ready || d.FreeCPUs != 4 {
		t.Fatalf("not-ready node: %+v", d)
	}
}

func TestNodesFreeNeverNegative(t *testing.T) {
	n := testNode("n", labelled(skypilotAccLabel, "t4"), map[string]string{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"})
	pods := []corev1.Pod{testPod("p", "n", corev1.PodRunning, map[string]string{"cpu": "3", "memory": "8Gi", "nvidia.com/gpu": "2"})}
	got := nodesFree([]corev1.Node{n}, pods, schemeNamed("skypilot"))[0]
	if got.FreeCPUs != 0 || got.FreeMemoryGB != 0 || got.FreeGPUs != 0 {
		t.Fatalf("overcommitted node: %+v", got)
	}
}

func clusterFree() []nodeFree {
	return []nodeFree{
		{Name: "cpu-small", CPUs: 8, AllocCPUs: 7.9, MemoryGB: 32, AllocMemoryGB: 30},
		{Name: "cpu-big", CPUs: 32, AllocCPUs: 31.5, MemoryGB: 128, AllocMemoryGB: 120},
		{Name: "h100-a", CPUs: 64, AllocCPUs: 63, MemoryGB: 512, AllocMemoryGB: 500, Acc: "H100", GPUs: 8, AllocGPUs: 8},
		{Name: "l4-a", CPUs: 16, AllocCPUs: 15, MemoryGB: 64, AllocMemoryGB: 60, Acc: "L4", GPUs: 1, AllocGPUs: 1},
	}
}

func TestFeasible(t *testing.T) {
	tests := []struct {
		name         string
		cpus, mem    float64
		acc          string
		count        int64
		autoscaler   string
		ok           bool
		fitC, fitMem float64
		reason       string // substring; "" means exactly ""
	}{
		{"small cpu", 2, 2, "", 0, "", true, 2, 2, ""},
		{"capacity clamped to allocatable", 32, 128, "", 0, "", true, 31.5, 120, ""},
		// Both cpu nodes fit 8 CPUs; only cpu-small has exactly 8, so the
		// request drops to its allocatable and still fits both.
		{"clamp to the node with equal capacity", 8, 16, "", 0, "", true, 7.9, 16, ""},
		{"above capacity", 65, 8, "", 0, "", false, 65, 8, "no node with 65 CPUs (largest: 64)"},
		{"memory", 16, 600, "", 0, "", false, 16, 600, "no node with 16 CPUs and 600 GB memory (largest memory: 512 GB)"},
		{"gpu fits", 32, 128, "h100", 8, "", true, 32, 128, ""},
		{"gpu clamped", 64, 512, "H100", 8, "", true, 63, 500, ""},
		{"too many gpus", 4, 4, "H100", 16, "", false, 4, 4, "no node with 16x H100 (largest: 8)"},
		{"gpu node too small", 32, 32, "L4", 1, "", false, 32, 32, "no node with 1x L4 and 32 CPUs (largest: 16)"},
		{"gpu missing", 4, 4, "A100", 1, "", false, 4, 4, "no node with A100 GPUs (GPUs found: H100, L4)"},
		{"autoscaler karpenter", 4, 4, "A100", 1, "karpenter", true, 4, 4, "the karpenter autoscaler is expected to add such a node"},
		{"autoscaler gke", 128, 4, "", 0, "gke", true, 128, 4, "no node with 128 CPUs (largest: 64)"},
		{"autoscaler unknown", 128, 4, "", 0, "cluster-autoscaler", false, 128, 4, `kubernetes.autoscaler "cluster-autoscaler" is none of`},
		{"fractional", 0.5, 0.25, "", 0, "", true, 0.5, 0.25, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, m, ok, reason := feasible(clusterFree(), tt.cpus, tt.mem, tt.acc, tt.count, tt.autoscaler)
			if ok != tt.ok || c != tt.fitC || m != tt.fitMem {
				t.Fatalf("feasible = %v CPUs, %v GB, %v (%q); want %v, %v, %v", c, m, ok, reason, tt.fitC, tt.fitMem, tt.ok)
			}
			if tt.reason == "" && reason != "" || !strings.Contains(reason, tt.reason) {
				t.Fatalf("reason = %q, want %q", reason, tt.reason)
			}
		})
	}
}

func TestFeasibleNoLabels(t *testing.T) {
	nodes := []nodeFree{{Name: "n", CPUs: 8, MemoryGB: 32, GPUs: 4}}
	_, _, ok, reason := feasible(nodes, 4, 4, "H100", 1, "")
	if ok || !strings.Contains(reason, "no node has a GPU label") || !strings.Contains(reason, "sky gpus label") {
		t.Fatalf("ok %v, reason %q", ok, reason)
	}
	if _, _, ok, reason := feasible(nil, 1, 1, "", 0, ""); ok || reason != "the Kubernetes cluster has no nodes" {
		t.Fatalf("empty cluster: ok %v, reason %q", ok, reason)
	}
}

func TestGPUUsage(t *testing.T) {
	nodes := []nodeFree{
		{Name: "z-h100", Ready: true, Schedulable: true, Acc: "H100", GPUs: 8, FreeGPUs: 3},
		{Name: "cpu", Ready: true, Schedulable: true},
		{Name: "a-h100", Ready: true, Schedulable: true, Acc: "H100", GPUs: 4, FreeGPUs: 4},
		{Name: "cordoned", Ready: true, Schedulable: false, Acc: "L4", GPUs: 2, FreeGPUs: 2},
		{Name: "l4-down", Ready: false, Schedulable: true, Acc: "L4", GPUs: 1, FreeGPUs: 1},
		{Name: "l4", Ready: true, Schedulable: true, Acc: "L4", GPUs: 1, FreeGPUs: 0},
		{Name: "unlabelled", Ready: true, Schedulable: true, GPUs: 8, FreeGPUs: 8},
		{Name: "tpu", Ready: true, Schedulable: true, Acc: "tpu-v5-lite-podslice", GPUs: 4, FreeGPUs: 4, GPUKey: tpuKey},
	}
	want := []infra.GPUUsage{
		{Region: "ctx", GPU: "H100", Total: 12, Free: 7, Requestable: []int{1, 2, 4, 8}},
		{Region: "ctx", GPU: "L4", Total: 4, Free: 0, Requestable: []int{1, 2}},
		{Region: "ctx", GPU: "tpu-v5-lite-podslice", Total: 4, Free: 4, Requestable: []int{1, 2, 4}},
		{Region: "ctx", Node: "a-h100", GPU: "H100", Total: 4, Free: 4, Requestable: []int{4}, Status: "Ready"},
		{Region: "ctx", Node: "cordoned", GPU: "L4", Total: 2, Free: 0, Requestable: []int{2}, Status: "SchedulingDisabled"},
		{Region: "ctx", Node: "l4", GPU: "L4", Total: 1, Free: 0, Requestable: []int{1}, Status: "Ready"},
		{Region: "ctx", Node: "l4-down", GPU: "L4", Total: 1, Free: 0, Requestable: []int{1}, Status: "NotReady"},
		{Region: "ctx", Node: "tpu", GPU: "tpu-v5-lite-podslice", Total: 4, Free: 4, Requestable: []int{4}, Status: "Ready"},
		{Region: "ctx", Node: "z-h100", GPU: "H100", Total: 8, Free: 3, Requestable: []int{8}, Status: "Ready"},
	}
	got := gpuUsage("ctx", nodes)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("gpuUsage:\n got %+v\nwant %+v", got, want)
	}
	if got := gpuUsage("ctx", []nodeFree{{Name: "cpu", CPUs: 4}}); len(got) != 0 {
		t.Fatalf("CPU-only cluster: %+v", got)
	}
}

func TestRequestable(t *testing.T) {
	for largest, want := range map[int][]int{0: nil, 1: {1}, 3: {1, 2, 3}, 6: {1, 2, 4, 6}, 8: {1, 2, 4, 8}} {
		if got := requestable(largest); !reflect.DeepEqual(got, want) {
			t.Errorf("requestable(%d) = %v, want %v", largest, got, want)
		}
	}
}
