package config

import (
	"slices"

	"github.com/skygo/skygo/internal/infrakind"
)

// Overlay returns base with override laid on top, without changing either:
// mappings merge key by key, anything else in override replaces the base
// value (lists are replaced, not appended). The keys an infrastructure
// names as pod specs (infrakind.Kind.PodKeys, also in its per-region
// section) merge the way a pod spec's strategic merge does; see mergeK8s.
func Overlay(base, override map[string]any) map[string]any {
	return overlayMap(base, override, nil)
}

func overlayMap(base, over map[string]any, path []string) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = deepCopy(v)
	}
	for k, ov := range over {
		p := append(path[:len(path):len(path)], k)
		bv, exists := out[k]
		if !exists {
			out[k] = deepCopy(ov)
			continue
		}
		if k8sMergePath(p) {
			out[k] = mergeK8s(bv, ov, k)
			continue
		}
		bm, bok := bv.(map[string]any)
		om, ook := ov.(map[string]any)
		if bok && ook {
			out[k] = overlayMap(bm, om, p)
			continue
		}
		out[k] = deepCopy(ov)
	}
	return out
}

// k8sMergePath reports whether path is <kind>.<pod key> or
// <kind>.<region section>.<region>.<pod key> of a kind with pod keys.
func k8sMergePath(p []string) bool {
	if len(p) != 2 && len(p) != 4 {
		return false
	}
	k, ok := infrakind.Lookup(p[0])
	if !ok || k.Name != p[0] || !slices.Contains(k.PodKeys, p[len(p)-1]) {
		return false
	}
	return len(p) == 2 || (k.RegionSection != "" && p[1] == k.RegionSection)
}

// patchMergeKeys are the pod-spec lists whose items are matched by `name`
// and merged, instead of appended side by side.
var patchMergeKeys = map[string]bool{
	"containers": true, "initContainers": true, "volumes": true,
	"volumeMounts": true, "env": true, "ports": true,
}

// atomicKeys are lists that a later value replaces whole: a command is not
// meaningfully the concatenation of two commands.
var atomicKeys = map[string]bool{"command": true, "args": true}

// mergeK8s merges two pod_config / custom_metadata fragments: mappings
// recursively, lists appended, except name-keyed lists (merged item by
// item), imagePullSecrets (first items merged) and command/args (replaced).
func mergeK8s(base, over any, key string) any {
	bm, bok := base.(map[string]any)
	om, ook := over.(map[string]any)
	if bok && ook {
		out := make(map[string]any, len(bm)+len(om))
		for k, v := range bm {
			out[k] = deepCopy(v)
		}
		for k, v := range om {
			if cur, ok := out[k]; ok {
				out[k] = mergeK8s(cur, v, k)
			} else {
				out[k] = deepCopy(v)
			}
		}
		return out
	}
	bl, bok := base.([]any)
	ol, ook := over.([]any)
	if !bok || !ook || atomicKeys[key] {
		return deepCopy(over)
	}
	out := deepCopy(bl).([]any)
	switch {
	case key == "imagePullSecrets":
		if len(out) == 0 {
			return deepCopy(ol)
		}
		if len(ol) > 0 {
			out[0] = mergeK8s(out[0], ol[0], "")
		}
		return out
	case patchMergeKeys[key]:
		for _, item := range ol {
			im, isMap := item.(map[string]any)
			if !isMap {
				out = append(out, deepCopy(item))
				continue
			}
			name, named := im["name"]
			idx := -1
			if named {
				for i, b := range out {
					if bmi, ok := b.(map[string]any); ok && bmi["name"] == name {
						idx = i
						break
					}
				}
			} else if key == "containers" && len(out) > 0 {
				idx = 0 // an unnamed container patches the primary container
			}
			if idx >= 0 {
				out[idx] = mergeK8s(out[idx], im, "")
			} else {
				out = append(out, deepCopy(im))
			}
		}
		return out
	default:
		return append(out, deepCopy(ol).([]any)...)
	}
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}
