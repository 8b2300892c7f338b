package resources

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{``, "*"},
		{"infra: aws/us-east-1\naccelerators: H100:8\ncpus: 4+\nmemory: 16+\nuse_spot: true\ndisk_size: 256",
			"aws/us-east-1 (gpus=H100:8, cpus=4+, mem=16+, spot, disk=256)"},
		{"instance_type: p4d.24xlarge\ninfra: aws", "aws (p4d.24xlarge)"},
		{"accelerators: {A100: 1, H100: 1}", "* (gpus={A100:1,H100:1})"},
		{"accelerators: [H100:1, A100:1]", "* (gpus=[H100:1,A100:1])"},
		{"ports: [8080, 8081]\nimage_id: docker:ubuntu", "* (ports=8080-8081, image=docker:ubuntu)"},
		{"autostop: {idle_minutes: 10, down: true}\npriority: 5", "* (priority=5, autostop=10m, down)"},
		{"job_recovery: {strategy: failover, max_restarts_on_errors: 2}", "* (job_recovery=FAILOVER, max_restarts_on_errors=2)"},
		{"infra: k8s/ctx\nany_of:\n- cpus: 2\n- cpus: 4", "any_of[kubernetes/ctx (cpus=2); kubernetes/ctx (cpus=4)]"},
		{"ordered:\n- infra: aws\n- infra: gcp", "ordered[aws; gcp]"},
		{"_docker_login_config: {username: u, password: hunter2, server: s}", "*"},
	}
	for _, tt := range tests {
		r, err := Parse(decode(t, tt.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tt.yaml, err)
		}
		if got := r.String(); got != tt.want {
			t.Errorf("String of %q\n got: %s\nwant: %s", tt.yaml, got, tt.want)
		}
	}
}

// roundTripInputs cover every field and form; each must survive
// Parse -> ToMap -> Parse and Parse -> JSON -> Parse unchanged.
var roundTripInputs = []string{
	``,
	"infra: k8s/arn:aws:eks:us-east-1:123:cluster/my-cluster\ncpus: 2",
	"infra: ssh/pool\nmemory: 4x",
	"infra: slurm/c/p\nmemory: 0",
	"cloud: AWS\nzone: us-east-1a",
	"accelerators: {A100:1, A100:2, H100:1}",
	"accelerators: [T4:0.25, nvidia:80GB:2, 48GB+]",
	"accelerators: tpu-v6e-8\naccelerator_args: {tpu_vm: false, tpu_name: t}\ninstance_type: n2-standard-8",
	"cpus: 0.5+\nmemory: 1.5TB\ndisk_size: 2TB\nephemeral_storage: 10\ndisk_tier: ultra\nnetwork_tier: standard\nlocal_disk: '200'",
	"use_spot: false\nmax_hourly_cost: 3.75\nports: [22, '1000-2000', 1500]\nlabels: {a: b}",
	"image_id: {null: ami-0, eu-west-1: ami-1, docker: img}",
	"autostop: false\njob_recovery: {}",
	"autostop: 90m\njob_recovery: {strategy: none, recover_on_exit_codes: [0, 255], extra_key: [1, 2]}",
	"priority: 0\npriority_class: ' p '",
	"volumes: [{name: v, path: /mnt, disk_size: 10Gi, disk_tier: low, storage_type: network, attach_mode: read_only, auto_delete: false}]",
	"labels: {x: y}\nany_of:\n- {infra: aws, labels: {z: w}, gpus: {A10G: 1, L4: 1}}\n- {}\n- null",
	"ordered:\n- {infra: gcp/us-central1, use_spot: true}\n- {region: us-east1}",
	"_docker_login_config: {username: u, password: p, server: s}\n_is_image_managed: true\n_requires_fuse: true\n_cluster_config_overrides: {k: [1, {a: b}]}\n_no_missing_accel_warnings: true",
}

func TestRoundTrip(t *testing.T) {
	for _, src := range roundTripInputs {
		r, err := Parse(decode(t, src))
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		assertRoundTrip(t, src, r)
	}
}

func assertRoundTrip(t *testing.T, name string, r *Resources) {
	t.Helper()
	back, err := Parse(r.ToMap())
	if err != nil {
		t.Errorf("%s: Parse(ToMap()) failed: %v\nToMap: %#v", name, err, r.ToMap())
		return
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("%s: Parse(ToMap(r)) != r\n   r: %s\nback: %s", name, canon(t, r), canon(t, back))
	}
	// Through real JSON text too (numbers become float64).
	b, err := json.Marshal(r.ToMap())
	if err != nil {
		t.Fatal(err)
	}
	var viaJSON Resources
	if err := json.Unmarshal(b, &viaJSON); err != nil {
		t.Errorf("%s: UnmarshalJSON: %v", name, err)
		return
	}
	// Free-form values (plugin job_recovery keys, cluster config
	// overrides) keep JSON's float64 numbers, so compare canonical forms.
	if canon(t, &viaJSON) != canon(t, r) {
		t.Errorf("%s: JSON round trip differs\n   r: %s\nback: %s", name, canon(t, r), canon(t, &viaJSON))
	}
	if !reflect.DeepEqual(r.Copy(), r) {
		t.Errorf("%s: Copy differs", name)
	}
}

func TestMarshalJSONRedactsPassword(t *testing.T) {
	r, err := Parse(decode(t, "_docker_login_config: {username: u, password: hunter2, server: s}"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), redacted) {
		t.Errorf("MarshalJSON = %s, want the password redacted", b)
	}
	if strings.Contains(r.String(), "hunter2") {
		t.Errorf("String shows the password: %s", r)
	}
	// ToMap keeps it: it is the storage form.
	if r.ToMap()["_docker_login_config"].(map[string]any)["password"] != "hunter2" {
		t.Errorf("ToMap lost the password")
	}
}

func TestCopyIsDeep(t *testing.T) {
	r, err := Parse(decode(t, roundTripInputs[15]))
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := Parse(decode(t, roundTripInputs[17]))
	r.ClusterConfigOverrides = r2.ClusterConfigOverrides
	before := canon(t, r)
	c := r.Copy()
	c.Labels["x"] = "changed"
	c.AnyOf[0].Labels["z"] = "changed"
	c.AnyOf[0].Accelerators.List[0].Count = 99
	c.ClusterConfigOverrides["k"].([]any)[1].(map[string]any)["a"] = "changed"
	if canon(t, r) != before {
		t.Errorf("changing the copy changed the original:\n%s\n%s", before, canon(t, r))
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		cloud    string
		gpus     bool
		cpu, mem string
	}{
		{"aws", false, "8+", "4x"},
		{"gcp", true, "8+", "4x"},
		{"cudo", false, "8+", "2x"},
		{"lambda", false, "30+", "4x"},
		{"fluidstack", false, "6+", "4x"},
		{"vsphere", false, "2+", "4x"},
		{"kubernetes", false, "2", "1x"},
		{"ssh", true, "4", "4x"},
		{"slurm", false, "2", "1x"},
		{"local", false, "2", "1x"},
	}
	for _, tt := range tests {
		if got := DefaultCPUs(tt.cloud, tt.gpus).String(); got != tt.cpu {
			t.Errorf("DefaultCPUs(%s, %v) = %s, want %s", tt.cloud, tt.gpus, got, tt.cpu)
		}
		if got := DefaultMemory(tt.cloud, tt.gpus).String(); got != tt.mem {
			t.Errorf("DefaultMemory(%s, %v) = %s, want %s", tt.cloud, tt.gpus, got, tt.mem)
		}
	}
}

func TestQuantitySatisfied(t *testing.T) {
	tests := []struct {
		q    Quantity
		have float64
		want bool
	}{
		{Quantity{Value: 4}, 4, true},
		{Quantity{Value: 4}, 8, false},
		{Quantity{Value: 4, AtLeast: true}, 8, true},
		{Quantity{Value: 4, AtLeast: true}, 2, false},
		{Quantity{Value: 4, PerCPU: true}, 64, false},
	}
	for _, tt := range tests {
		if got := tt.q.Satisfied(tt.have); got != tt.want {
			t.Errorf("%s.Satisfied(%v) = %v, want %v", tt.q, tt.have, got, tt.want)
		}
	}
}

func TestExportedParsers(t *testing.T) {
	a, err := ParseAutostop("1h")
	if err != nil || a.IdleMinutes != 60 {
		t.Errorf("ParseAutostop(1h) = %+v, %v", a, err)
	}
	if _, err := ParseAutostop(map[string]any{"wait_for": "x"}); err == nil || !strings.HasPrefix(err.Error(), "wait_for:") {
		t.Errorf("ParseAutostop bad wait_for: %v", err)
	}
	if p, err := ParsePorts("80,81"); err != nil || len(p) != 1 || p[0] != "80-81" {
		t.Errorf("ParsePorts = %v, %v", p, err)
	}
	if c, err := NormalizeCloud("K8s"); err != nil || c != "kubernetes" {
		t.Errorf("NormalizeCloud(K8s) = %q, %v", c, err)
	}
	if j, err := ParseJobRecovery("eager_next_region"); err != nil || j.Strategy != RecoveryEagerNextRegion || j.Disabled() {
		t.Errorf("ParseJobRecovery = %+v, %v", j, err)
	}
	if acc, err := ParseAccelerators([]any{"A100:1", "H100:1"}); err != nil || !acc.Ordered || len(acc.List) != 2 {
		t.Errorf("ParseAccelerators = %+v, %v", acc, err)
	}
}
