package kind

import "testing"

// The namespace of a context: the context's own setting in
// kubernetes.context_configs, then kubernetes.namespace, then the
// kubeconfig context's, then "default". A context name may hold dots.
func TestKubeNamespace(t *testing.T) {
	cfg := func(m map[string]any) func(keys ...string) (any, bool) {
		return func(keys ...string) (any, bool) {
			var cur any = m
			for _, k := range keys {
				mm, ok := cur.(map[string]any)
				if !ok {
					return nil, false
				}
				if cur, ok = mm[k]; !ok {
					return nil, false
				}
			}
			return cur, true
		}
	}
	both := map[string]any{"kubernetes": map[string]any{"namespace": "team",
		"context_configs": map[string]any{"gke.prod": map[string]any{"namespace": "prod"}}}}
	for _, tc := range []struct {
		name   string
		lookup func(keys ...string) (any, bool)
		c      KubeContext
		want   string
	}{
		{"per context", cfg(both), KubeContext{Name: "gke.prod", Namespace: "own"}, "prod"},
		{"global", cfg(both), KubeContext{Name: "other", Namespace: "own"}, "team"},
		{"the context's own", cfg(map[string]any{}), KubeContext{Name: "other", Namespace: "own"}, "own"},
		{"no config at all", nil, KubeContext{Name: "other"}, "default"},
		{"an empty setting falls through", cfg(map[string]any{"kubernetes": map[string]any{"namespace": ""}}), KubeContext{Name: "x", Namespace: "own"}, "own"},
	} {
		if got := KubeNamespace(tc.lookup, tc.c); got != tc.want {
			t.Errorf("%s: KubeNamespace = %q, want %q", tc.name, got, tc.want)
		}
	}
}
