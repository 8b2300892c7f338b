package kubernetes

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testNode is a Ready node with the given labels and resources; res maps
// a resource name to "capacity" or "capacity/allocatable".
func testNode(name string, labels map[string]string, res map[string]string) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{},
			Allocatable: corev1.ResourceList{},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for k, v := range res {
		c, a, ok := strings.Cut(v, "/")
		if !ok {
			a = c
		}
		n.Status.Capacity[corev1.ResourceName(k)] = resource.MustParse(c)
		n.Status.Allocatable[corev1.ResourceName(k)] = resource.MustParse(a)
	}
	return n
}

func labelled(key, value string) map[string]string { return map[string]string{key: value} }

func TestDetectScheme(t *testing.T) {
	gpu := map[string]string{"nvidia.com/gpu": "8"}
	tests := []struct {
		name       string
		nodes      []corev1.Node
		autoscaler string
		want       string // scheme name, "" for nil
	}{
		{"none", []corev1.Node{testNode("a", nil, gpu)}, "", ""},
		{"skypilot", []corev1.Node{testNode("a", labelled(skypilotAccLabel, "h100"), gpu)}, "", "skypilot"},
		{"gke", []corev1.Node{testNode("a", labelled(gkeAccLabel, "nvidia-tesla-t4"), gpu)}, "", "gke"},
		{"gke tpu", []corev1.Node{testNode("a", labelled(gkeTPULabel, "tpu-v5-lite-podslice"), nil)}, "", "gke"},
		{"karpenter", []corev1.Node{testNode("a", labelled(karpenterAccLabel, "a10g"), gpu)}, "", "karpenter"},
		{"gfd", []corev1.Node{testNode("a", labelled(gfdProductLabel, "NVIDIA-H100-80GB-HBM3"), gpu)}, "", "gfd"},
		{"coreweave", []corev1.Node{testNode("a", labelled(coreweaveAccLabel, "H100_NVLINK_80GB"), gpu)}, "", "coreweave"},
		{"nebius", []corev1.Node{testNode("a", labelled(nebiusAccLabel, "H200"), gpu)}, "", "nebius"},
		// Spec order decides, not node order: the GFD node comes first but
		// the SkyPilot label on the second node wins.
		{"order across nodes", []corev1.Node{
			testNode("a", labelled(gfdProductLabel, "NVIDIA-L4"), gpu),
			testNode("b", labelled(skypilotAccLabel, "l4"), gpu),
		}, "", "skypilot"},
		{"order on one node", []corev1.Node{testNode("a", map[string]string{
			nebiusAccLabel: "H100", karpenterAccLabel: "h100", gkeAccLabel: "nvidia-h100-80gb",
		}, gpu)}, "", "gke"},
		// Values of the wrong case are not this scheme's: detection moves on.
		{"upper-case skypilot value invalid", []corev1.Node{testNode("a", map[string]string{
			skypilotAccLabel: "H100", gfdProductLabel: "NVIDIA-H100-80GB-HBM3",
		}, gpu)}, "", "gfd"},
		{"lower-case nebius value invalid", []corev1.Node{testNode("a", labelled(nebiusAccLabel, "h100"), gpu)}, "", ""},
		{"gke value without nvidia- invalid", []corev1.Node{testNode("a", labelled(gkeAccLabel, "h100"), gpu)}, "", ""},
		{"autoscaler gke forces", []corev1.Node{testNode("a", labelled(skypilotAccLabel, "h100"), gpu)}, "gke", "gke"},
		{"autoscaler karpenter on empty cluster", nil, "karpenter", "karpenter"},
		{"autoscaler coreweave", nil, "coreweave", "coreweave"},
		{"autoscaler nebius", nil, "nebius", "nebius"},
		{"autoscaler generic", []corev1.Node{testNode("a", labelled(gfdProductLabel, "NVIDIA-L4"), gpu)}, "generic", "skypilot"},
		{"unknown autoscaler detects", []corev1.Node{testNode("a", labelled(gfdProductLabel, "NVIDIA-L4"), gpu)}, "other", "gfd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := detectScheme(tt.nodes, tt.autoscaler)
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tt.want {
				t.Fatalf("detectScheme = %q, want %q", name, tt.want)
			}
		})
	}
}

func TestNodeAcceleratorPerScheme(t *testing.T) {
	tests := []struct {
		scheme, key, value, want string
	}{
		{"skypilot", skypilotAccLabel, "h100", "H100"},
		{"skypilot", skypilotAccLabel, "a100-80gb", "A100-80GB"},
		{"gke", gkeAccLabel, "nvidia-h100-80gb", "H100"},
		{"gke", gkeAccLabel, "nvidia-h100-mega-80gb", "H100-MEGA"},
		{"gke", gkeAccLabel, "nvidia-h200-141gb", "H200"},
		{"gke", gkeAccLabel, "nvidia-a100-80gb", "A100-80GB"},
		{"gke", gkeAccLabel, "nvidia-tesla-a100", "A100"},
		{"gke", gkeAccLabel, "nvidia-tesla-t4", "T4"},
		{"gke", gkeAccLabel, "nvidia-l4", "L4"},
		{"gke", gkeAccLabel, "nvidia-b200", "B200"},
		{"karpenter", karpenterAccLabel, "a10g", "A10G"},
		{"karpenter", karpenterAccLabel, "l40s", "L40S"},
		{"gfd", gfdProductLabel, "NVIDIA-H100-80GB-HBM3", "H100"},
		{"gfd", gfdProductLabel, "NVIDIA-A100-SXM4-80GB", "A100-80GB"},
		{"gfd", gfdProductLabel, "NVIDIA-A100-SXM4-40GB", "A100"},
		{"gfd", gfdProductLabel, "Tesla-T4", "T4"},
		{"gfd", gfdProductLabel, "Tesla-V100-SXM2-16GB", "V100"},
		{"gfd", gfdProductLabel, "NVIDIA-GeForce-RTX-4090", "RTX4090"},
		{"gfd", gfdProductLabel, "NVIDIA-RTX-A6000", "RTXA6000"},
		{"gfd", gfdProductLabel, "NVIDIA-L4-SHARED", "L4"},
		{"coreweave", coreweaveAccLabel, "H100_NVLINK_80GB", "H100"},
		{"coreweave", coreweaveAccLabel, "A100_NVLINK_80GB", "A100-80GB"},
		{"coreweave", coreweaveAccLabel, "RTX_A6000", "RTXA6000"},
		{"coreweave", coreweaveAccLabel, "L40S", "L40S"},
		{"nebius", nebiusAccLabel, "H200", "H200"},
	}
	for _, tt := range tests {
		t.Run(tt.scheme+"/"+tt.value, func(t *testing.T) {
			n := testNode("n", labelled(tt.key, tt.value), map[string]string{"nvidia.com/gpu": "8/7"})
			acc, capacity, alloc, key := nodeAccelerator(&n, schemeNamed(tt.scheme))
			if acc != tt.want || capacity != 8 || alloc != 7 || key != nvidiaGPUKey {
				t.Fatalf("nodeAccelerator = %q, %d, %d, %q; want %q, 8, 7, %q", acc, capacity, alloc, key, tt.want, nvidiaGPUKey)
			}
		})
	}
}

func TestNodeAcceleratorKeys(t *testing.T) {
	t.Run("amd", func(t *testing.T) {
		n := testNode("n", labelled(skypilotAccLabel, "mi300x"), map[string]string{"amd.com/gpu": "8", "cpu": "64"})
		acc, c, a, key := nodeAccelerator(&n, schemeNamed("skypilot"))
		if acc != "MI300X" || c != 8 || a != 8 || key != amdGPUKey {
			t.Fatalf("got %q %d %d %q", acc, c, a, key)
		}
	})
	t.Run("nvidia wins over amd", func(t *testing.T) {
		n := testNode("n", nil, map[string]string{"amd.com/gpu": "2", "nvidia.com/gpu": "4"})
		if _, c, _, key := nodeAccelerator(&n, nil); key != nvidiaGPUKey || c != 4 {
			t.Fatalf("got %q %d", key, c)
		}
	})
	t.Run("tpu", func(t *testing.T) {
		n := testNode("n", map[string]string{gkeTPULabel: "tpu-v5-lite-podslice", gkeTPUTopology: "2x2"}, map[string]string{"google.com/tpu": "4"})
		acc, c, a, key := nodeAccelerator(&n, schemeNamed("gke"))
		if acc != "tpu-v5-lite-podslice" || c != 4 || a != 4 || key != tpuKey {
			t.Fatalf("got %q %d %d %q", acc, c, a, key)
		}
	})
	t.Run("custom key", func(t *testing.T) {
		t.Setenv(customGPUKeyEnv, "example.com/gpu")
		n := testNode("n", labelled(skypilotAccLabel, "h100"), map[string]string{"example.com/gpu": "2/1", "nvidia.com/gpu": "8"})
		acc, c, a, key := nodeAccelerator(&n, schemeNamed("skypilot"))
		if acc != "H100" || c != 2 || a != 1 || key != "example.com/gpu" {
			t.Fatalf("got %q %d %d %q", acc, c, a, key)
		}
	})
	t.Run("no GPUs, no scheme", func(t *testing.T) {
		n := testNode("n", nil, map[string]string{"cpu": "4"})
		acc, c, a, key := nodeAccelerator(&n, nil)
		if acc != "" || c != 0 || a != 0 || key != nvidiaGPUKey {
			t.Fatalf("got %q %d %d %q", acc, c, a, key)
		}
	})
	t.Run("label of another scheme", func(t *testing.T) {
		n := testNode("n", labelled(gfdProductLabel, "NVIDIA-L4"), map[string]string{"nvidia.com/gpu": "1"})
		if acc, _, _, _ := nodeAccelerator(&n, schemeNamed("skypilot")); acc != "" {
			t.Fatalf("acc = %q under the SkyPilot scheme, want none", acc)
		}
	})
}

func TestAcceleratorSelector(t *testing.T) {
	gpu := map[string]string{"nvidia.com/gpu": "8"}
	tests := []struct {
		name, scheme, acc string
		nodes             []corev1.Node
		key               string
		values            []string
	}{
		{"skypilot", "skypilot", "H100", nil, skypilotAccLabel, []string{"h100"}},
		{"gke h100", "gke", "H100", nil, gkeAccLabel, []string{"nvidia-h100-80gb"}},
		{"gke h100 mega", "gke", "H100-MEGA", nil, gkeAccLabel, []string{"nvidia-h100-mega-80gb"}},
		{"gke h200", "gke", "H200", nil, gkeAccLabel, []string{"nvidia-h200-141gb"}},
		{"gke a100-80gb", "gke", "A100-80GB", nil, gkeAccLabel, []string{"nvidia-a100-80gb"}},
		{"gke l4", "gke", "L4", nil, gkeAccLabel, []string{"nvidia-l4"}},
		{"gke b200", "gke", "B200", nil, gkeAccLabel, []string{"nvidia-b200"}},
		{"gke t4", "gke", "T4", nil, gkeAccLabel, []string{"nvidia-tesla-t4"}},
		{"gke tpu", "gke", "tpu-v5-lite-podslice", nil, gkeTPULabel, []string{"tpu-v5-lite-podslice"}},
		{"karpenter", "karpenter", "A10G", nil, karpenterAccLabel, []string{"a10g"}},
		{"nebius", "nebius", "h100", nil, nebiusAccLabel, []string{"H100"}},
		{"coreweave adds node classes", "coreweave", "H100", []corev1.Node{
			testNode("a", labelled(coreweaveAccLabel, "H100_NVLINK_80GB"), gpu),
			testNode("b", labelled(coreweaveAccLabel, "A40"), gpu),
			testNode("c", labelled(coreweaveAccLabel, "H100_PCIE"), gpu),
		}, coreweaveAccLabel, []string{"H100", "H100_NVLINK_80GB", "H100_PCIE"}},
		{"gfd takes the products on the nodes", "gfd", "H100", []corev1.Node{
			testNode("a", labelled(gfdProductLabel, "NVIDIA-H100-80GB-HBM3"), gpu),
			testNode("b", labelled(gfdProductLabel, "NVIDIA-H100-PCIe"), gpu),
			testNode("c", labelled(gfdProductLabel, "NVIDIA-A100-SXM4-80GB"), gpu),
			testNode("d", labelled(gfdProductLabel, "NVIDIA-H100-80GB-HBM3"), gpu),
		}, gfdProductLabel, []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"}},
		{"gfd a100-80gb is not a100", "gfd", "A100", []corev1.Node{
			testNode("a", labelled(gfdProductLabel, "NVIDIA-A100-SXM4-80GB"), gpu),
			testNode("b", labelled(gfdProductLabel, "NVIDIA-A100-SXM4-40GB"), gpu),
		}, gfdProductLabel, []string{"NVIDIA-A100-SXM4-40GB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, values, err := acceleratorSelector(schemeNamed(tt.scheme), tt.acc, tt.nodes)
			if err != nil {
				t.Fatal(err)
			}
			if key != tt.key || !reflect.DeepEqual(values, tt.values) {
				t.Fatalf("got %s %v, want %s %v", key, values, tt.key, tt.values)
			}
		})
	}
}

func TestAcceleratorSelectorErrors(t *testing.T) {
	if _, _, err := acceleratorSelector(nil, "H100", nil); err == nil || !strings.Contains(err.Error(), "sky gpus label") || !strings.Contains(err.Error(), "skypilot.co/accelerator=h100") {
		t.Fatalf("no scheme: err = %v, want a hint to label the nodes", err)
	}
	nodes := []corev1.Node{testNode("a", labelled(gfdProductLabel, "NVIDIA-L4"), map[string]string{"nvidia.com/gpu": "1"})}
	if _, _, err := acceleratorSelector(schemeNamed("gfd"), "H100", nodes); err == nil || !strings.Contains(err.Error(), "nvidia.com/gpu.product") {
		t.Fatalf("gfd without an H100 node: err = %v", err)
	}
}

func TestGPULabelKeys(t *testing.T) {
	nodes := []corev1.Node{
		testNode("a", map[string]string{nebiusAccLabel: "H100", "kubernetes.io/hostname": "a"}, nil),
		testNode("b", map[string]string{gfdProductLabel: "NVIDIA-L4", skypilotAccLabel: "l4"}, nil),
		testNode("c", map[string]string{gkeTPULabel: "tpu-v4-podslice"}, nil),
		testNode("d", nil, nil),
	}
	want := []string{skypilotAccLabel, gkeTPULabel, gfdProductLabel, nebiusAccLabel}
	if got := gpuLabelKeys(nodes); !reflect.DeepEqual(got, want) {
		t.Fatalf("gpuLabelKeys = %v, want %v", got, want)
	}
	if got := gpuLabelKeys([]corev1.Node{testNode("d", nil, nil)}); got != nil {
		t.Fatalf("CPU-only cluster: %v, want none", got)
	}
}
