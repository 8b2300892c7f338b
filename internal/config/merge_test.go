package config

import (
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func y(t *testing.T, s string) map[string]any {
	t.Helper()
	d, err := parseYAML([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d.value.(map[string]any)
}

func TestOverlay(t *testing.T) {
	cases := []struct {
		name             string
		base, over, want string
	}{
		{"maps merge recursively",
			"a: {b: 1, c: 2}", "a: {c: 3, d: 4}", "a: {b: 1, c: 3, d: 4}"},
		{"lists replace",
			"allowed_clouds: [aws, gcp]", "allowed_clouds: [azure]", "allowed_clouds: [azure]"},
		{"scalar replaces map",
			"jobs: {controller: {autostop: {idle_minutes: 5}}}", "jobs: {controller: {autostop: false}}", "jobs: {controller: {autostop: false}}"},
		{"null overrides",
			"aws: {vpc_name: x}", "aws: {vpc_name: null}", "aws: {vpc_name: null}"},
		{"pod_config containers merge by name, lists append",
			"kubernetes: {pod_config: {spec: {containers: [{name: a, env: [{name: X, value: '1'}]}], tolerations: [{key: k1}]}}}",
			"kubernetes: {pod_config: {spec: {containers: [{name: a, env: [{name: X, value: '2'}, {name: Y, value: '3'}]}, {name: b}], tolerations: [{key: k2}]}}}",
			"kubernetes: {pod_config: {spec: {containers: [{name: a, env: [{name: X, value: '2'}, {name: Y, value: '3'}]}, {name: b}], tolerations: [{key: k1}, {key: k2}]}}}"},
		{"unnamed container patches the first one; command replaced",
			"kubernetes: {pod_config: {spec: {containers: [{name: ray-node, command: [a, b]}]}}}",
			"kubernetes: {pod_config: {spec: {containers: [{securityContext: {runAsUser: 0}, command: [c]}]}}}",
			"kubernetes: {pod_config: {spec: {containers: [{name: ray-node, command: [c], securityContext: {runAsUser: 0}}]}}}"},
		{"imagePullSecrets merges the first item",
			"kubernetes: {pod_config: {spec: {imagePullSecrets: [{name: a}]}}}",
			"kubernetes: {pod_config: {spec: {imagePullSecrets: [{name: b}]}}}",
			"kubernetes: {pod_config: {spec: {imagePullSecrets: [{name: b}]}}}"},
		{"custom_metadata under context_configs merges k8s-style",
			"kubernetes: {context_configs: {c: {custom_metadata: {labels: {a: '1'}}}}}",
			"kubernetes: {context_configs: {c: {custom_metadata: {labels: {b: '2'}}}}}",
			"kubernetes: {context_configs: {c: {custom_metadata: {labels: {a: '1', b: '2'}}}}}"},
		{"outside kubernetes lists still replace",
			"ssh: {pod_config: {spec: {tolerations: [{key: k1}]}}}",
			"ssh: {pod_config: {spec: {tolerations: [{key: k2}]}}}",
			"ssh: {pod_config: {spec: {tolerations: [{key: k2}]}}}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, over := y(t, tc.base), y(t, tc.over)
			baseCopy := deepCopy(base)
			got := Overlay(base, over)
			if want := y(t, tc.want); !reflect.DeepEqual(got, want) {
				g, _ := yaml.Marshal(got)
				w, _ := yaml.Marshal(want)
				t.Fatalf("got\n%s\nwant\n%s", g, w)
			}
			if !reflect.DeepEqual(base, baseCopy) {
				t.Fatal("Overlay modified its base")
			}
		})
	}
}

func TestForWorkspace(t *testing.T) {
	cfg := New(y(t, `
kubernetes: {allowed_contexts: [a, b], namespace: ns}
workspaces:
  team:
    private: true
    kubernetes: {allowed_contexts: [c]}
    aws: {profile: team-profile}
`))
	ws := cfg.ForWorkspace("team")
	if got := ws.GetStringSlice("kubernetes.allowed_contexts", nil); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("allowed_contexts = %v, want workspace value", got)
	}
	if ws.GetString("kubernetes.namespace", "") != "ns" || ws.GetString("aws.profile", "") != "team-profile" {
		t.Errorf("merged = %v", ws.Map())
	}
	if _, ok := ws.Get("private"); ok {
		t.Error("workspace-wide keys must not move to the top level")
	}
	if got := cfg.ForWorkspace("default").GetStringSlice("kubernetes.allowed_contexts", nil); len(got) != 2 {
		t.Errorf("default workspace = %v", got)
	}
	if got := cfg.WorkspaceNames(); !reflect.DeepEqual(got, []string{"default", "team"}) {
		t.Errorf("WorkspaceNames = %v", got)
	}
}

func TestOverlayClient(t *testing.T) {
	server := New(y(t, "allowed_clouds: [aws]\njobs: {controller: {consolidation_mode: true}}\n"))
	client := New(y(t, "allowed_clouds: [gcp]\ndb: postgresql://x\njobs: {controller: {consolidation_mode: true, high_availability: true}}\nkubernetes: {namespace: mine}\n"))
	merged, warnings := OverlayClient(server, client)
	if got := merged.GetStringSlice("allowed_clouds", nil); !reflect.DeepEqual(got, []string{"aws"}) {
		t.Errorf("allowed_clouds = %v, want the server's", got)
	}
	if _, ok := merged.Get("db"); ok {
		t.Error("client db must be dropped")
	}
	if !merged.GetBool("jobs.controller.high_availability", false) || merged.GetString("kubernetes.namespace", "") != "mine" {
		t.Errorf("client keys lost: %v", merged.Map())
	}
	joined := strings.Join(warnings, "\n")
	if len(warnings) != 2 || !strings.Contains(joined, "allowed_clouds") || !strings.Contains(joined, "db") {
		t.Errorf("warnings = %v, want allowed_clouds and db only (equal values are not warned)", warnings)
	}
}

func TestYAMLMergeKeys(t *testing.T) {
	got := y(t, "base: &b {cpus: 2, memory: 4}\nother: &o {disk: 50}\nres:\n  <<: [*b, *o]\n  cpus: 8\n")
	want := map[string]any{"cpus": 8, "memory": 4, "disk": 50}
	if !reflect.DeepEqual(got["res"], want) {
		t.Fatalf("res = %v, want %v", got["res"], want)
	}
}
