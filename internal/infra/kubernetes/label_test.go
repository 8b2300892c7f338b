package kubernetes

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/testutil/k8stest"
)

func TestLabelPlan(t *testing.T) {
	gpu := map[string]string{"nvidia.com/gpu": "8"}
	nodes := []corev1.Node{
		testNode("gke", labelled(gkeAccLabel, "nvidia-h100-80gb"), gpu),
		testNode("karpenter", labelled(karpenterAccLabel, "a10g"), gpu),
		testNode("gfd", labelled(gfdProductLabel, "NVIDIA-A100-SXM4-80GB"), gpu),
		testNode("coreweave", labelled(coreweaveAccLabel, "H100_NVLINK_80GB"), gpu),
		testNode("nebius", labelled(nebiusAccLabel, "H200"), gpu),
		testNode("amd-nebius", labelled(nebiusAccLabel, "MI300X"), map[string]string{"amd.com/gpu": "8"}),
		// GKE comes before GFD in the spec's order.
		testNode("both", map[string]string{gfdProductLabel: "Tesla-T4", gkeAccLabel: "nvidia-tesla-t4"}, gpu),
		testNode("wrong-case", labelled(skypilotAccLabel, "L4"), gpu),
		testNode("done", map[string]string{skypilotAccLabel: "l4", gfdProductLabel: "NVIDIA-L4"}, gpu),
		testNode("bare-nvidia", nil, gpu),
		testNode("bare-amd", nil, map[string]string{"amd.com/gpu": "1"}),
		testNode("zero-gpus", labelled(gfdProductLabel, "NVIDIA-L4"), map[string]string{"nvidia.com/gpu": "0"}),
		testNode("cpu", labelled(gfdProductLabel, "NVIDIA-L4"), map[string]string{"cpu": "8"}),
	}
	patches, skipped := labelPlan(nodes)
	want := map[string]map[string]string{
		"gke":        {skypilotAccLabel: "h100"},
		"karpenter":  {skypilotAccLabel: "a10g"},
		"gfd":        {skypilotAccLabel: "a100-80gb"},
		"coreweave":  {skypilotAccLabel: "h100"},
		"nebius":     {skypilotAccLabel: "h200"},
		"amd-nebius": {skypilotAccLabel: "mi300x"},
		"both":       {skypilotAccLabel: "t4"},
		"wrong-case": {skypilotAccLabel: "l4"},
	}
	if !reflect.DeepEqual(patches, want) {
		t.Fatalf("patches:\n got %v\nwant %v", patches, want)
	}
	if len(skipped) != 2 {
		t.Fatalf("skipped %v, want bare-nvidia and bare-amd only", skipped)
	}
	nv := skipped["bare-nvidia"]
	for _, s := range []string{"has nvidia.com/gpu capacity but no product label", "NVIDIA GPU Feature Discovery", "kubectl label node bare-nvidia skypilot.co/accelerator="} {
		if !strings.Contains(nv, s) {
			t.Errorf("bare-nvidia: %q lacks %q", nv, s)
		}
	}
	amd := skipped["bare-amd"]
	if !strings.Contains(amd, "has amd.com/gpu capacity") || strings.Contains(amd, "Feature Discovery") || !strings.Contains(amd, "kubectl label node bare-amd") {
		t.Errorf("bare-amd: %q", amd)
	}
}

func TestLabelPlanInvalidValue(t *testing.T) {
	n := testNode("odd", labelled(karpenterAccLabel, strings.Repeat("x", 70)), map[string]string{"nvidia.com/gpu": "1"})
	patches, skipped := labelPlan([]corev1.Node{n})
	if len(patches) != 0 || !strings.Contains(skipped["odd"], "not a valid label value") {
		t.Fatalf("patches %v, skipped %v", patches, skipped)
	}
}

func TestLabelPlanCustomKey(t *testing.T) {
	t.Setenv(customGPUKeyEnv, "example.com/gpu")
	nodes := []corev1.Node{
		testNode("custom", nil, map[string]string{"example.com/gpu": "2"}),
		// The custom key replaces NVIDIA's, so this node has no GPUs to label.
		testNode("nvidia", labelled(gfdProductLabel, "NVIDIA-L4"), map[string]string{"nvidia.com/gpu": "1"}),
	}
	patches, skipped := labelPlan(nodes)
	if len(patches) != 0 || len(skipped) != 1 || !strings.Contains(skipped["custom"], "has example.com/gpu capacity") {
		t.Fatalf("patches %v, skipped %v", patches, skipped)
	}
}

// labelPatch names the labels only: a strategic merge patch leaves every
// other label and field as it is.
func TestLabelPatch(t *testing.T) {
	body, err := labelPatch(map[string]string{skypilotAccLabel: "h100"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"metadata":{"labels":{"skypilot.co/accelerator":"h100"}}}`; string(body) != want {
		t.Fatalf("labelPatch = %s, want %s", body, want)
	}
}

// labelNodes makes nodes of the test's own (nodes are cluster-wide) on
// the test control plane, removed when the test ends, and the API client
// the server would use on it.
func labelNodes(t *testing.T, labels map[string]map[string]string) (*kubeAPI, *k8stest.Cluster, map[string]string) {
	t.Helper()
	c := k8stest.Start(t, k8stest.Options{})
	kc, err := newKubeAPI(c.REST)
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	names := map[string]string{}
	for short, l := range labels {
		name := short + "-" + suffix
		names[short] = name
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
		if _, err := c.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	return kc, c, names
}

func TestApplyLabelsOnAPIServer(t *testing.T) {
	kc, c, names := labelNodes(t, map[string]map[string]string{
		"n1": {"keep": "me", gfdProductLabel: "NVIDIA-L4"},
		"n2": nil,
	})
	patches := map[string]map[string]string{names["n2"]: {skypilotAccLabel: "h100"}, names["n1"]: {skypilotAccLabel: "l4"}}
	if err := applyLabels(context.Background(), kc, patches); err != nil {
		t.Fatal(err)
	}
	for short, want := range map[string]map[string]string{
		"n1": {"keep": "me", gfdProductLabel: "NVIDIA-L4", skypilotAccLabel: "l4"},
		"n2": {skypilotAccLabel: "h100"},
	} {
		// Read back with client-go's own clientset: what the server holds,
		// not what our client thinks it wrote.
		got, err := c.Client.CoreV1().Nodes().Get(context.Background(), names[short], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if got.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q (labels %v)", short, k, got.Labels[k], v, got.Labels)
			}
		}
		// The field manager is recorded beside the creator's; a node made
		// with no fields at all (n2) gets no managed fields to add to.
		if short == "n1" && !slices.ContainsFunc(got.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == "sky" }) {
			t.Errorf("%s: no field of the node is managed by sky: %+v", short, got.ManagedFields)
		}
	}
}

func TestApplyLabelsReportsEachFailure(t *testing.T) {
	kc, c, names := labelNodes(t, map[string]map[string]string{"present": nil})
	gone1, gone2 := "gone1-"+names["present"], "gone2-"+names["present"]
	err := applyLabels(context.Background(), kc, map[string]map[string]string{
		gone1: {skypilotAccLabel: "h100"}, names["present"]: {skypilotAccLabel: "h100"}, gone2: {skypilotAccLabel: "h100"},
	})
	if err == nil || !strings.Contains(err.Error(), "labelling node "+gone1) || !strings.Contains(err.Error(), "labelling node "+gone2) ||
		!strings.Contains(err.Error(), "not found") {
		t.Fatalf("err = %v, want both missing nodes named, not found", err)
	}
	got, err := c.Client.CoreV1().Nodes().Get(context.Background(), names["present"], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[skypilotAccLabel] != "h100" {
		t.Fatalf("the existing node was not labelled: %v", got.Labels)
	}
}
