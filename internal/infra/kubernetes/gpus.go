package kubernetes

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/skygo/skygo/internal/resources"
)

// Resource keys a pod asks for accelerators by.
const (
	nvidiaGPUKey = "nvidia.com/gpu"
	amdGPUKey    = "amd.com/gpu"
	tpuKey       = "google.com/tpu"
	// customGPUKeyEnv names a device plugin's resource other than NVIDIA's
	// or AMD's (SkyPilot reads the same variable on its API server).
	customGPUKeyEnv = "CUSTOM_GPU_RESOURCE_KEY"
)

// Label keys of the schemes below.
const (
	skypilotAccLabel  = "skypilot.co/accelerator"
	gkeAccLabel       = "cloud.google.com/gke-accelerator"
	gkeTPULabel       = "cloud.google.com/gke-tpu-accelerator"
	gkeTPUTopology    = "cloud.google.com/gke-tpu-topology"
	karpenterAccLabel = "karpenter.k8s.aws/instance-gpu-name"
	gfdProductLabel   = "nvidia.com/gpu.product"
	coreweaveAccLabel = "gpu.nvidia.com/class"
	nebiusAccLabel    = "nebius.com/gpu-name"
)

// gpuLabelScheme is one row of the spec's label scheme table: the node
// label some tool publishes the GPU model under, and how its values map
// to accelerator names and back.
type gpuLabelScheme struct {
	Name string // skypilot, gke, karpenter, gfd, coreweave, nebius
	Key  string
	// valid says whether a value is one this scheme writes: a SkyPilot
	// value must be lower case and a Nebius one upper case, so a stray
	// label of the wrong case does not make a scheme win detection.
	valid func(v string) bool
	// toAcc maps a label value to the accelerator name.
	toAcc func(v string) string
	// fromAcc is the value a node with acc carries; nil when the values
	// are free-form product strings that can only be read off the nodes.
	fromAcc func(acc string) string
}

// gpuSchemes are the schemes in the order detection tries them.
var gpuSchemes = []*gpuLabelScheme{
	{Name: "skypilot", Key: skypilotAccLabel,
		valid: func(v string) bool { return v != "" && v == strings.ToLower(v) },
		toAcc: accCase, fromAcc: strings.ToLower},
	{Name: "gke", Key: gkeAccLabel,
		valid: func(v string) bool { return strings.HasPrefix(v, "nvidia-") },
		toAcc: gkeToAcc, fromAcc: accToGKE},
	{Name: "karpenter", Key: karpenterAccLabel,
		valid: nonEmpty, toAcc: accCase, fromAcc: strings.ToLower},
	{Name: "gfd", Key: gfdProductLabel,
		valid: nonEmpty, toAcc: gfdToAcc},
	{Name: "coreweave", Key: coreweaveAccLabel,
		valid: nonEmpty, toAcc: coreweaveToAcc, fromAcc: strings.ToUpper},
	{Name: "nebius", Key: nebiusAccLabel,
		valid: func(v string) bool { return v != "" && v == strings.ToUpper(v) },
		toAcc: accCase, fromAcc: strings.ToUpper},
}

// autoscalerSchemes is the scheme each kubernetes.autoscaler value forces:
// the nodes it will create carry its labels even when none exists yet.
var autoscalerSchemes = map[string]string{
	"gke": "gke", "karpenter": "karpenter", "coreweave": "coreweave", "nebius": "nebius", "generic": "skypilot",
}

func schemeNamed(name string) *gpuLabelScheme {
	for _, s := range gpuSchemes {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func nonEmpty(v string) bool { return v != "" }

// accCase spells an accelerator the way task YAMLs do: upper case, except
// TPUs, whose names are lower case by convention.
func accCase(v string) string {
	if isTPU(v) {
		return strings.ToLower(v)
	}
	return strings.ToUpper(v)
}

func isTPU(acc string) bool { return strings.HasPrefix(strings.ToLower(acc), "tpu-") }

// gkeSpecial are the GKE values that are not nvidia-tesla-<acc> or
// nvidia-<acc>: GKE adds the memory size to these.
var gkeSpecial = map[string]string{
	"H100":      "nvidia-h100-80gb",
	"H100-MEGA": "nvidia-h100-mega-80gb",
	"H200":      "nvidia-h200-141gb",
}

// gkeNoTesla are the accelerators GKE names nvidia-<acc> without "tesla".
var gkeNoTesla = []string{"A100-80GB", "L4", "B200", "H100-MEGA-80GB"}

func accToGKE(acc string) string {
	if isTPU(acc) {
		return strings.ToLower(acc)
	}
	up := strings.ToUpper(acc)
	if v, ok := gkeSpecial[up]; ok {
		return v
	}
	if slices.Contains(gkeNoTesla, up) {
		return "nvidia-" + strings.ToLower(up)
	}
	return "nvidia-tesla-" + strings.ToLower(up)
}

func gkeToAcc(v string) string {
	if isTPU(v) {
		return strings.ToLower(v)
	}
	for acc, val := range gkeSpecial {
		if v == val {
			return acc
		}
	}
	if rest, ok := strings.CutPrefix(v, "nvidia-tesla-"); ok {
		return strings.ToUpper(rest)
	}
	return strings.ToUpper(strings.TrimPrefix(v, "nvidia-"))
}

// gfdToAcc reads an NVIDIA GPU Feature Discovery product string, which is
// nvidia-smi's product name with dashes for spaces
// (NVIDIA-H100-80GB-HBM3 -> H100, NVIDIA-A100-SXM4-80GB -> A100-80GB).
func gfdToAcc(v string) string {
	if acc := resources.GPUName(strings.ReplaceAll(v, "-", " ")); acc != "" {
		return acc
	}
	return strings.ToUpper(v)
}

// coreweaveToAcc reads CoreWeave's GPU classes (H100_NVLINK_80GB -> H100,
// RTX_A6000 -> RTXA6000), which are product names with underscores.
func coreweaveToAcc(v string) string {
	if acc := resources.GPUName(strings.ReplaceAll(v, "_", " ")); acc != "" {
		return strings.ToUpper(acc)
	}
	return strings.ToUpper(v)
}

// valueOf is the scheme's label value on a node, or "" when the node has
// none the scheme accepts. GKE TPU nodes carry their own key.
func (s *gpuLabelScheme) valueOf(labels map[string]string) (key, value string) {
	if s.Name == "gke" {
		if v := labels[gkeTPULabel]; v != "" {
			return gkeTPULabel, v
		}
	}
	if v := labels[s.Key]; s.valid(v) {
		return s.Key, v
	}
	return "", ""
}

// detectScheme picks the label scheme the cluster's GPU nodes use: the
// first, in spec order, whose key some node carries with a valid value.
// A configured autoscaler forces its own scheme, because the nodes it is
// about to create will carry that one. nil means no node is labelled.
func detectScheme(nodes []corev1.Node, autoscaler string) *gpuLabelScheme {
	if name, ok := autoscalerSchemes[autoscaler]; ok {
		return schemeNamed(name)
	}
	for _, s := range gpuSchemes {
		for i := range nodes {
			if _, v := s.valueOf(nodes[i].Labels); v != "" {
				return s
			}
		}
	}
	return nil
}

// gpuResourceKey is the extended resource a node's GPUs are requested by:
// the custom key if the environment sets one, else NVIDIA's or AMD's,
// whichever the node's capacity has (NVIDIA when neither).
func gpuResourceKey(n *corev1.Node) string {
	if k := strings.TrimSpace(os.Getenv(customGPUKeyEnv)); k != "" {
		return k
	}
	for _, k := range []string{nvidiaGPUKey, amdGPUKey} {
		if _, ok := n.Status.Capacity[corev1.ResourceName(k)]; ok {
			return k
		}
	}
	return nvidiaGPUKey
}

// nodeAccelerator is the accelerator a node has under scheme s ("" when
// it carries no label of s), how many the node has (capacity) and can
// give to pods (allocatable), and the resource key a pod requests them by.
// With no scheme the counts are still reported, so unlabelled GPU nodes
// can be named.
func nodeAccelerator(n *corev1.Node, s *gpuLabelScheme) (acc string, capacity, allocatable int64, key string) {
	key = gpuResourceKey(n)
	if _, ok := n.Status.Capacity[tpuKey]; ok || n.Labels[gkeTPULabel] != "" {
		key = tpuKey
	}
	if q, ok := n.Status.Capacity[corev1.ResourceName(key)]; ok {
		capacity = q.Value()
	}
	if q, ok := n.Status.Allocatable[corev1.ResourceName(key)]; ok {
		allocatable = q.Value()
	}
	if s != nil {
		if _, v := s.valueOf(n.Labels); v != "" {
			acc = s.toAcc(v)
		}
	}
	return acc, capacity, allocatable, key
}

// acceleratorSelector is the node label key and values that select the
// nodes with accelerator acc under scheme s, for the pod's required node
// affinity. The values are the scheme's own spelling of acc (so nodes an
// autoscaler has yet to create match) plus every value on the existing
// nodes that reads as acc (GFD and CoreWeave products, Karpenter names
// without a size). GKE TPUs are selected by the TPU accelerator label; the
// topology label is the pod spec's business.
func acceleratorSelector(s *gpuLabelScheme, acc string, nodes []corev1.Node) (key string, values []string, err error) {
	if s == nil {
		return "", nil, fmt.Errorf("no Kubernetes node carries a GPU label, so none can be chosen for %s: label the GPU nodes with `sky gpus label`, or kubectl label node <node> %s=%s", acc, skypilotAccLabel, strings.ToLower(acc))
	}
	key = s.Key
	if s.Name == "gke" && isTPU(acc) {
		key = gkeTPULabel
	}
	seen := map[string]bool{}
	if s.fromAcc != nil {
		v := s.fromAcc(acc)
		seen[v] = true
		values = append(values, v)
	}
	var extra []string
	for i := range nodes {
		k, v := s.valueOf(nodes[i].Labels)
		if k != key || v == "" || seen[v] {
			continue
		}
		if strings.EqualFold(s.toAcc(v), acc) {
			seen[v] = true
			extra = append(extra, v)
		}
	}
	sort.Strings(extra)
	values = append(values, extra...)
	if len(values) == 0 {
		return "", nil, fmt.Errorf("no Kubernetes node has a %s label for %s", key, acc)
	}
	return key, values, nil
}

// gpuLabelKeys lists every GPU label key of any scheme that some node
// carries, in spec order: CPU-only pods prefer nodes without them.
func gpuLabelKeys(nodes []corev1.Node) []string {
	var keys []string
	for _, k := range []string{skypilotAccLabel, gkeAccLabel, gkeTPULabel, karpenterAccLabel, gfdProductLabel, coreweaveAccLabel, nebiusAccLabel} {
		for i := range nodes {
			if _, ok := nodes[i].Labels[k]; ok {
				keys = append(keys, k)
				break
			}
		}
	}
	return keys
}
