package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// labelPlan is the honest part of `sky gpus label`: SkyPilot's command
// runs a probe pod on each GPU node; SkyGo has no probe, so it labels a
// GPU node skypilot.co/accelerator=<lower-case accelerator> from the
// product label another tool already published (GKE, Karpenter, NVIDIA
// GPU Feature Discovery, CoreWeave, Nebius; first found in spec order).
// Only nodes with a GPU resource in their capacity are considered. patches
// maps node name to the labels to set; skipped maps each GPU node that
// cannot be labelled to why and what to do. Nodes already carrying a
// valid SkyPilot label are in neither map.
func labelPlan(nodes []corev1.Node) (patches map[string]map[string]string, skipped map[string]string) {
	patches, skipped = map[string]map[string]string{}, map[string]string{}
	for i := range nodes {
		n := &nodes[i]
		key, count := gpuCapacity(n)
		if count <= 0 {
			continue
		}
		acc, from := "", ""
		switch v := n.Labels[skypilotAccLabel]; {
		case v != "" && v == strings.ToLower(v):
			continue
		case v != "":
			// SkyPilot only matches lower-case values; fix the case.
			acc, from = accCase(v), skypilotAccLabel+"="+v
		}
		for _, s := range gpuSchemes[1:] {
			if acc != "" {
				break
			}
			if k, v := s.valueOf(n.Labels); v != "" && k == s.Key {
				acc, from = s.toAcc(v), k+"="+v
			}
		}
		if acc == "" {
			skipped[n.Name] = noProductLabel(n.Name, key)
			continue
		}
		value := strings.ToLower(acc)
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			skipped[n.Name] = fmt.Sprintf("its %s reads as %q, which is not a valid label value (%s): label it with kubectl label node %s %s=<gpu>",
				from, value, strings.Join(errs, "; "), n.Name, skypilotAccLabel)
			continue
		}
		patches[n.Name] = map[string]string{skypilotAccLabel: value}
	}
	return patches, skipped
}

// gpuCapacity is the GPU resource a node advertises and how many: the
// custom key when set, else NVIDIA's, else AMD's.
func gpuCapacity(n *corev1.Node) (key string, count int64) {
	keys := []string{nvidiaGPUKey, amdGPUKey}
	if k := strings.TrimSpace(os.Getenv(customGPUKeyEnv)); k != "" {
		keys = []string{k}
	}
	for _, k := range keys {
		if q, ok := n.Status.Capacity[corev1.ResourceName(k)]; ok && q.Value() > 0 {
			return k, q.Value()
		}
	}
	return "", 0
}

func noProductLabel(node, key string) string {
	fix := fmt.Sprintf("label it with kubectl label node %s %s=<gpu> (lower case, e.g. h100)", node, skypilotAccLabel)
	if key == nvidiaGPUKey {
		fix = "run NVIDIA GPU Feature Discovery (it publishes " + gfdProductLabel + "), or " + fix
	}
	return fmt.Sprintf("has %s capacity but no product label: %s", key, fix)
}

// applyLabels sets the planned labels, one strategic-merge patch per node
// so other labels are left alone. Every node is tried; the errors of those
// that failed are returned together.
func applyLabels(ctx context.Context, kc *kubeAPI, patches map[string]map[string]string) error {
	names := make([]string, 0, len(patches))
	for name := range patches {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		body, err := labelPatch(patches[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("labelling node %s: %w", name, err))
			continue
		}
		if _, err := kc.Nodes().Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: "sky"}); err != nil {
			errs = append(errs, fmt.Errorf("labelling node %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// labelPatch is {"metadata":{"labels":{...}}}.
func labelPatch(labels map[string]string) ([]byte, error) {
	type meta struct {
		Labels map[string]string `json:"labels"`
	}
	return json.Marshal(struct {
		Metadata meta `json:"metadata"`
	}{meta{labels}})
}
