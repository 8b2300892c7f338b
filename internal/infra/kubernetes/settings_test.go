package kubernetes

import (
	"slices"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/provision"
)

// TestUnsupportedKeysRefused: keys that change how a pod runs and that
// SkyGo does not implement refuse the launch, whether set in the task or
// the server's config; switched off or empty they do not.
func TestUnsupportedKeysRefused(t *testing.T) {
	p := &Provisioner{in: &Infra{env: infra.Env{Home: t.TempDir()}}, context: "ctx"}
	c := &client{namespace: "default"}
	for _, tc := range []struct {
		kube  map[string]any
		ports []string
		want  string // "" for no refusal
	}{
		{kube: map[string]any{"kueue": map[string]any{"local_queue_name": "q"}}, want: "kubernetes.kueue"},
		{kube: map[string]any{"dws": map[string]any{"enabled": true}}, want: "kubernetes.dws"},
		{kube: map[string]any{"dws": map[string]any{"enabled": false, "max_run_duration": "1h"}}},
		{kube: map[string]any{"auto_mounts": []any{map[string]any{"volume_name": "v", "mount_paths": []any{"/v"}}}}, want: "auto_mounts"},
		{kube: map[string]any{"ports": "ingress"}, ports: []string{"8080"}, want: "ingress"},
		{kube: map[string]any{"ports": "ingress"}},
		{kube: map[string]any{"ports": "podip"}, ports: []string{"8080"}},
	} {
		s, err := p.settings(c, provision.ClusterSpec{Config: map[string]any{"kubernetes": tc.kube}, Ports: tc.ports})
		if err != nil {
			t.Fatalf("%v: %v", tc.kube, err)
		}
		got := strings.Join(s.unsupported, "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v ports %v: unsupported %q, want %q", tc.kube, tc.ports, got, tc.want)
		}
	}
}

// The verb this package serves is the one its kind declares, so the
// command line hands `sky k8s-exec` over to the server program.
func TestKindDeclaresExecVerb(t *testing.T) {
	k, ok := infrakind.Lookup(Kind)
	if !ok || !slices.Contains(k.Verbs, ExecCommand) {
		t.Errorf("kind %s declares verbs %q, not %s", Kind, k.Verbs, ExecCommand)
	}
}
