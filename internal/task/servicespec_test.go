package task

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadService(t *testing.T, path string, opts LoadOptions) *Task {
	t.Helper()
	dag, err := Load(path, opts)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	if len(dag.Tasks) != 1 {
		t.Fatalf("%s: %d tasks", path, len(dag.Tasks))
	}
	return dag.Tasks[0]
}

func loadServiceBytes(t *testing.T, yaml string) *Task {
	t.Helper()
	dag, err := LoadBytes("svc.yaml", []byte(yaml), LoadOptions{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return dag.Tasks[0]
}

// The corpus services (copied to testdata/serve) convert as SkyPilot
// reads them at `sky serve up`.
func TestServiceSpecOfCorpus(t *testing.T) {
	t.Run("http_aws", func(t *testing.T) {
		s, err := ServiceSpecOf(loadService(t, "testdata/serve/http_aws.yaml", LoadOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		if s.Port != 8080 || s.Replicas == nil || *s.Replicas != 2 || s.Probe.Path != "/health" || s.Probe.InitialDelaySeconds != 20 {
			t.Errorf("spec %+v", s)
		}
		if s.Probe.TimeoutSeconds != 15 || s.Probe.EndpointProbeIntervalSeconds != 10 || s.Probe.ConsecutiveFailureThresholdTimeout != 180 || s.StreamTimeoutSeconds != 120 {
			t.Errorf("defaults not filled: %+v", s)
		}
		if s.MinReplicas() != 2 || s.MaxReplicas() != 2 || s.TLS != nil || s.Probe.PostData != "" {
			t.Errorf("spec %+v", s)
		}
	})
	t.Run("post_data mapping becomes its JSON", func(t *testing.T) {
		s, err := ServiceSpecOf(loadService(t, "testdata/serve/qwen25_post_data.yaml", LoadOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"max_tokens":1,"messages":[{"content":"Hello! What is your name?","role":"user"}],"model":"Qwen/Qwen2.5-7B-Instruct"}`
		if s.Probe.PostData != want || s.Port != 8000 {
			t.Errorf("post_data %q port %d, want %q 8000", s.Probe.PostData, s.Port, want)
		}
	})
	t.Run("TLS paths made absolute", func(t *testing.T) {
		dir := t.TempDir()
		wd, _ := os.Getwd()
		if err := os.Chdir(dir); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Chdir(wd) }()
		home, _ := os.UserHomeDir()
		s, err := ServiceSpecOf(loadService(t, filepath.Join(wd, "testdata/serve/https_service.yaml"), LoadOptions{
			Env: []string{"TLS_KEYFILE_ENV_VAR=certs/key.pem"}, Secrets: []string{"TLS_CERTFILE_ENV_VAR=~/cert.pem"}}))
		if err != nil {
			t.Fatal(err)
		}
		real, _ := filepath.EvalSymlinks(dir)
		if s.TLS == nil || (s.TLS.Keyfile != filepath.Join(dir, "certs/key.pem") && s.TLS.Keyfile != filepath.Join(real, "certs/key.pem")) ||
			s.TLS.Certfile != filepath.Join(home, "cert.pem") {
			t.Errorf("tls %+v (cwd %s, home %s)", s.TLS, dir, home)
		}
		if s.Port != 8081 {
			t.Errorf("port %d", s.Port)
		}
	})
	t.Run("spot fallback across any_of", func(t *testing.T) {
		s, err := ServiceSpecOf(loadService(t, "testdata/serve/spot_dynamic_fallback_any_of.yaml", LoadOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		rp := s.ReplicaPolicy
		if rp == nil || !rp.DynamicOndemandFallback || rp.MinReplicas != 2 || rp.MaxReplicas != 3 || rp.TargetQPS == nil || *rp.TargetQPS != 1 || s.Port != 8081 {
			t.Errorf("spec %+v policy %+v", s, rp)
		}
		if rp.UpscaleDelaySeconds != 300 || rp.DownscaleDelaySeconds != 1200 {
			t.Errorf("delay defaults %+v", rp)
		}
	})
	t.Run("instance-aware over ordered", func(t *testing.T) {
		s, err := ServiceSpecOf(loadService(t, "testdata/serve/instance_aware_lambda.yaml", LoadOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		rp := s.ReplicaPolicy
		if s.LoadBalancingPolicy != "instance_aware_least_load" || rp == nil || rp.TargetQPSPerAccelerator["A100:1"] != 1.25 || s.Port != 8080 || rp.UpscaleDelaySeconds != 200 {
			t.Errorf("spec %+v policy %+v", s, rp)
		}
	})
}

// Each check of `sky serve up` time, with the YAML line it points at.
func TestServiceSpecOfChecks(t *testing.T) {
	fallback, err := os.ReadFile("testdata/serve/spot_dynamic_fallback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	noSpot := strings.Replace(string(fallback), "  use_spot: true\n", "", 1)
	cases := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"no service", "run: echo\n", []string{"Service section not found in the YAML file"}},
		{"mixed spot", `service:
  readiness_probe: /
  replicas: 1
resources:
  ports: 8080
  any_of:
    - use_spot: true
    - use_spot: false
run: echo
`, []string{"svc.yaml:4:", "Resources must either all use spot or none use spot"}},
		{"job_recovery", `service:
  readiness_probe: /
resources:
  ports: 8080
  use_spot: true
  job_recovery: FAILOVER
run: echo
`, []string{"svc.yaml:6:", "resources.job_recovery", "job_recovery is disabled for SkyServe"}},
		{"dynamic fallback without spot", noSpot, []string{"svc.yaml:8:", "dynamic_ondemand_fallback is only for spot services"}},
		{"base fallback without spot", `service:
  readiness_probe: /
  replica_policy:
    min_replicas: 1
    base_ondemand_fallback_replicas: 1
resources:
  ports: 8080
run: echo
`, []string{"svc.yaml:5:", "base_ondemand_fallback_replicas is only for spot services"}},
		{"spot_placer without spot", `service:
  readiness_probe: /
  replica_policy:
    min_replicas: 1
    spot_placer: dynamic_fallback
resources:
  ports: 8080
run: echo
`, []string{"svc.yaml:5:", "spot_placer dynamic_fallback", "use_spot: true"}},
		{"no port", `service:
  readiness_probe: /
run: echo
`, []string{"Must only specify one port in resources (got no ports)"}},
		{"two ports", `service:
  readiness_probe: /
resources:
  ports: [8080, 9090]
run: echo
`, []string{"svc.yaml:4:", "got ports 8080,9090"}},
		{"a range", `service:
  readiness_probe: /
resources:
  ports: 8000-8010
run: echo
`, []string{"svc.yaml:4:", "got ports 8000-8010"}},
		{"candidates on different ports", `service:
  readiness_probe: /
resources:
  any_of:
    - ports: 8080
    - ports: 8081
run: echo
`, []string{"svc.yaml:6:", "resources.any_of[1].ports", "Resources must all open the same port: 8081 here, 8080"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ServiceSpecOf(loadServiceBytes(t, c.yaml))
			if err == nil {
				t.Fatalf("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// What passes: service.ports wins over resources, spot everywhere allows
// the fallback options, a one-port range is one port.
func TestServiceSpecOfAccepts(t *testing.T) {
	cases := []struct {
		name, yaml string
		port       int
	}{
		{"service.ports wins", "service:\n  readiness_probe: /\n  ports: 9000\nresources:\n  ports: [8080, 8081]\nrun: echo\n", 9000},
		{"one-port range", "service:\n  readiness_probe: /\nresources:\n  ports: 8080-8080\nrun: echo\n", 8080},
		{"same port everywhere", "service:\n  readiness_probe: /\nresources:\n  ports: 8080\n  use_spot: true\n  any_of:\n    - cpus: 2\n    - cpus: 4\n  \nrun: echo\n", 8080},
		{"spot placer on spot", "service:\n  readiness_probe: /\n  replica_policy:\n    min_replicas: 1\n    spot_placer: DYNAMIC_FALLBACK\n    base_ondemand_fallback_replicas: 1\nresources:\n  ports: 8080\n  use_spot: true\nrun: echo\n", 8080},
		{"post_data string", "service:\n  readiness_probe:\n    path: /v1\n    post_data: '{\"a\": 1}'\nresources:\n  ports: 8080\nrun: echo\n", 8080},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ServiceSpecOf(loadServiceBytes(t, c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if s.Port != c.port {
				t.Errorf("port %d, want %d", s.Port, c.port)
			}
			if c.name == "post_data string" && s.Probe.PostData != `{"a": 1}` {
				t.Errorf("post_data %q", s.Probe.PostData)
			}
			if c.name == "spot placer on spot" && s.ReplicaPolicy.SpotPlacer != "dynamic_fallback" {
				t.Errorf("spot_placer %q", s.ReplicaPolicy.SpotPlacer)
			}
		})
	}
}
