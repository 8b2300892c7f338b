package kubernetes

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

func TestApplyLabels(t *testing.T) {
	n1 := testNode("n1", map[string]string{"keep": "me", gfdProductLabel: "NVIDIA-L4"}, nil)
	n2 := testNode("n2", nil, nil)
	cs := fake.NewClientset(&n1, &n2)
	patches := map[string]map[string]string{"n2": {skypilotAccLabel: "h100"}, "n1": {skypilotAccLabel: "l4"}}
	if err := applyLabels(context.Background(), cs, patches); err != nil {
		t.Fatal(err)
	}
	var patched []string
	for _, a := range cs.Actions() {
		pa, ok := a.(k8stesting.PatchAction)
		if !ok {
			continue
		}
		patched = append(patched, pa.GetName())
		if pa.GetPatchType() != types.StrategicMergePatchType {
			t.Errorf("%s: patch type %s", pa.GetName(), pa.GetPatchType())
		}
		var body map[string]any
		if err := json.Unmarshal(pa.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"metadata": map[string]any{"labels": map[string]any{skypilotAccLabel: patches[pa.GetName()][skypilotAccLabel]}}}
		if !reflect.DeepEqual(body, want) {
			t.Errorf("%s: patch %s", pa.GetName(), pa.GetPatch())
		}
	}
	if !reflect.DeepEqual(patched, []string{"n1", "n2"}) {
		t.Fatalf("patched %v, want n1 then n2", patched)
	}
	got, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["keep"] != "me" || got.Labels[skypilotAccLabel] != "l4" {
		t.Fatalf("n1 labels after the patch: %v", got.Labels)
	}
}

func TestApplyLabelsReportsEachFailure(t *testing.T) {
	n := testNode("present", nil, nil)
	cs := fake.NewClientset(&n)
	err := applyLabels(context.Background(), cs, map[string]map[string]string{
		"gone1": {skypilotAccLabel: "h100"}, "present": {skypilotAccLabel: "h100"}, "gone2": {skypilotAccLabel: "h100"},
	})
	if err == nil || !strings.Contains(err.Error(), "labelling node gone1") || !strings.Contains(err.Error(), "labelling node gone2") {
		t.Fatalf("err = %v, want both missing nodes named", err)
	}
	got, _ := cs.CoreV1().Nodes().Get(context.Background(), "present", metav1.GetOptions{})
	if got.Labels[skypilotAccLabel] != "h100" {
		t.Fatalf("the existing node was not labelled: %v", got.Labels)
	}
}
