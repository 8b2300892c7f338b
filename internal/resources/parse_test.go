package resources

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/fielderr"
)

// decode turns a YAML snippet into the value Parse receives.
func decode(t *testing.T, src string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatalf("bad test YAML %q: %v", src, err)
	}
	return v
}

// canon is the canonical JSON of r (ToMap, keys sorted by encoding/json).
func canon(t *testing.T, r *Resources) string {
	t.Helper()
	b, err := json.Marshal(r.ToMap())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseAccepted(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // canonical JSON
	}{
		{"null", ``, `{}`},
		{"empty mapping", `{}`, `{}`},
		{"null values ignored", "cpus:\nimage_id:\nports:\n", `{}`},
		{"infra", `infra: AWS/us-east-1`, `{"infra":"aws/us-east-1"}`},
		{"legacy cloud region zone", "cloud: gcp\nregion: us-central1\nzone: us-central1-a", `{"infra":"gcp/us-central1/us-central1-a"}`},
		{"legacy zone only", "zone: us-east-1a", `{"infra":"*/*/us-east-1a"}`},
		{"legacy k8s alias", "cloud: k8s\nregion: my-ctx", `{"infra":"kubernetes/my-ctx"}`},
		{"legacy ssh pool gets prefix", "cloud: ssh\nregion: gpus", `{"infra":"ssh/gpus"}`},
		{"local cloud", "cloud: local", `{"infra":"local"}`},
		{"accelerator name only", `accelerators: V100`, `{"accelerators":"V100:1"}`},
		{"accelerator count", `accelerators: "H100:8"`, `{"accelerators":"H100:8"}`},
		{"fractional count", `accelerators: T4:0.5`, `{"accelerators":"T4:0.5"}`},
		{"gpus alias", `gpus: H100:8`, `{"accelerators":"H100:8"}`},
		{"mapping one", `accelerators: {A100: 2}`, `{"accelerators":"A100:2"}`},
		{"mapping set", `accelerators: {L4: 1, A10G: 1}`, `{"accelerators":{"A10G":1,"L4":1}}`},
		{"flow set with counts", `accelerators: {A100:1, H100:1}`, `{"accelerators":{"A100":1,"H100":1}}`},
		{"null value means one", "accelerators:\n  A10:\n  L4:\n", `{"accelerators":{"A10":1,"L4":1}}`},
		{"list ordered", `accelerators: [A100:8, H100:8]`, `{"accelerators":["A100:8","H100:8"]}`},
		{"one item list is plain", `accelerators: [A100:8]`, `{"accelerators":"A100:8"}`},
		{"memory accelerator", `accelerators: 80GB+`, `{"accelerators":"80GB+:1"}`},
		{"memory accelerator count", `accelerators: "48GB:2"`, `{"accelerators":"48GB:2"}`},
		{"manufacturer memory", `accelerators: nvidia:80GB`, `{"accelerators":"nvidia:80GB:1"}`},
		{"manufacturer memory count", `accelerators: nvidia:80GB:4`, `{"accelerators":"nvidia:80GB:4"}`},
		{"tpu on gcp", "infra: gcp\naccelerators: tpu-v5litepod-16:1\naccelerator_args: {runtime_version: v2-alpha-tpuv5-lite, gcp_queued_resource: true}",
			`{"accelerator_args":{"gcp_queued_resource":true,"runtime_version":"v2-alpha-tpuv5-lite"},"accelerators":"tpu-v5litepod-16:1","infra":"gcp"}`},
		{"cpus int", `cpus: 4`, `{"cpus":"4"}`},
		{"cpus plus", `cpus: 4+`, `{"cpus":"4+"}`},
		{"cpus fraction", `cpus: "0.1+"`, `{"cpus":"0.1+"}`},
		{"memory plus", `memory: 16+`, `{"memory":"16+"}`},
		{"memory units", `memory: 512MB`, `{"memory":"0.5"}`},
		{"memory TB at least", `memory: 1TB+`, `{"memory":"1024+"}`},
		{"memory per cpu", `memory: 4x`, `{"memory":"4x"}`},
		{"memory zero on slurm", "infra: slurm/c1/gpu\nmemory: 0", `{"infra":"slurm/c1/gpu","memory":"0"}`},
		{"disk int", `disk_size: 512`, `{"disk_size":512}`},
		{"disk units", `disk_size: 1TB`, `{"disk_size":1024}`},
		{"disk Gi", `disk_size: 500Gi`, `{"disk_size":500}`},
		{"ephemeral", `ephemeral_storage: 20GB`, `{"ephemeral_storage":20}`},
		{"tiers case-insensitive", "disk_tier: BEST\nnetwork_tier: Best", `{"disk_tier":"best","network_tier":"best"}`},
		{"use_spot", `use_spot: false`, `{"use_spot":false}`},
		{"instance type", `instance_type: p4d.24xlarge`, `{"instance_type":"p4d.24xlarge"}`},
		{"local disk mode", `local_disk: SSD`, `{"local_disk":"ssd:100+"}`},
		{"local disk size", `local_disk: 500+`, `{"local_disk":"nvme:500+"}`},
		{"local disk full", `local_disk: ssd:200`, `{"local_disk":"ssd:200"}`},
		{"max cost", `max_hourly_cost: 2.5`, `{"max_hourly_cost":2.5}`},
		{"port int", `ports: 8080`, `{"ports":["8080"]}`},
		{"ports merged", `ports: [8080, "8081", "9000-9002,9003"]`, `{"ports":["8080-8081","9000-9003"]}`},
		{"ports overlap", `ports: ["8000-8010", 8005, 7000]`, `{"ports":["7000","8000-8010"]}`},
		{"ports empty list", `ports: []`, `{}`},
		{"labels", `labels: {team: ml}`, `{"labels":{"team":"ml"}}`},
		{"image string", `image_id: docker:ubuntu:22.04`, `{"image_id":"docker:ubuntu:22.04"}`},
		{"image per region", "image_id:\n  us-east-1: ami-1\n  us-west-2: ami-2", `{"image_id":{"us-east-1":"ami-1","us-west-2":"ami-2"}}`},
		{"image null key any region", "image_id:\n  null: ami-any\n  us-east-1: ami-1", `{"image_id":{"":"ami-any","us-east-1":"ami-1"}}`},
		{"image docker key", "image_id:\n  us-east-1: ami-1\n  docker: docker:nvcr.io/x:1", `{"image_id":{"docker":"nvcr.io/x:1","us-east-1":"ami-1"}}`},
		{"autostop false", `autostop: false`, `{"autostop":false}`},
		{"autostop true", `autostop: true`, `{"autostop":{"down":false,"idle_minutes":0,"wait_for":"jobs_and_ssh"}}`},
		{"autostop int", `autostop: 10`, `{"autostop":{"down":false,"idle_minutes":10,"wait_for":"jobs_and_ssh"}}`},
		{"autostop hours", `autostop: 2H`, `{"autostop":{"down":false,"idle_minutes":120,"wait_for":"jobs_and_ssh"}}`},
		{"autostop week", `autostop: 1w`, `{"autostop":{"down":false,"idle_minutes":10080,"wait_for":"jobs_and_ssh"}}`},
		{"autostop mapping", "autostop:\n  idle_minutes: 5\n  down: true\n  wait_for: JOBS\n  hook: echo bye\n  hook_timeout: 30",
			`{"autostop":{"down":true,"hook":"echo bye","hook_timeout":30,"idle_minutes":5,"wait_for":"jobs"}}`},
		{"job_recovery string", `job_recovery: failover`, `{"job_recovery":{"strategy":"FAILOVER"}}`},
		{"job_recovery none", `job_recovery: none`, `{"job_recovery":{"strategy":"NONE"}}`},
		{"job_recovery mapping", "job_recovery:\n  strategy: eager_next_region\n  max_restarts_on_errors: 3\n  recover_on_exit_codes: [33, 34]",
			`{"job_recovery":{"max_restarts_on_errors":3,"recover_on_exit_codes":[33,34],"strategy":"EAGER_NEXT_REGION"}}`},
		{"job_recovery single code", "job_recovery: {recover_on_exit_codes: 29}", `{"job_recovery":{"recover_on_exit_codes":[29]}}`},
		{"job_recovery plugin key kept", "job_recovery: {strategy: null, my_plugin_opt: 1}", `{"job_recovery":{"my_plugin_opt":1}}`},
		{"priority", `priority: -1000`, `{"priority":-1000}`},
		{"priority class", `priority_class: high`, `{"priority_class":"high"}`},
		{"volumes", "volumes:\n- path: /data\n  disk_size: 100\n  disk_tier: High\n  auto_delete: true",
			`{"volumes":[{"auto_delete":true,"disk_size":100,"disk_tier":"high","path":"/data"}]}`},
		{"any_of", "cpus: 4+\nany_of:\n- infra: aws\n  accelerators: A100:1\n- infra: gcp",
			`{"any_of":[{"accelerators":"A100:1","infra":"aws"},{"infra":"gcp"}],"cpus":"4+"}`},
		{"any_of with gpus alias", "any_of:\n- gpus: H100:1", `{"any_of":[{"accelerators":"H100:1"}]}`},
		{"ordered", "ordered:\n- infra: aws/us-east-1\n- infra: gcp", `{"ordered":[{"infra":"aws/us-east-1"},{"infra":"gcp"}]}`},
		{"any_of with accelerator set", "accelerators: {A100: 1, H100: 1}\nany_of:\n- infra: aws\n- infra: gcp",
			`{"accelerators":{"A100":1,"H100":1},"any_of":[{"infra":"aws"},{"infra":"gcp"}]}`},
		{"internal keys", "_docker_login_config: {username: u, password: p, server: s}\n_is_image_managed: true\n_requires_fuse: true\n_cluster_config_overrides: {a: {b: 1}}\n_no_missing_accel_warnings: true",
			`{"_cluster_config_overrides":{"a":{"b":1}},"_docker_login_config":{"password":"p","server":"s","username":"u"},"_is_image_managed":true,"_no_missing_accel_warnings":true,"_requires_fuse":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(decode(t, tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := canon(t, r); got != tt.want {
				t.Errorf("canonical form\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestParseRejected(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		path string
		msg  string // fragment of the message
	}{
		{"not a mapping", `[a, b]`, "", "must be a mapping"},
		{"unknown key suggests", `acelerators: A100`, "acelerators", `did you mean "accelerators"?`},
		{"unknown key far from all", `zzzzzzzzzzzzzzzzzz: 1`, "zzzzzzzzzzzzzzzzzz", "valid fields"},
		{"spot_recovery renamed", `spot_recovery: failover`, "spot_recovery", `did you mean "job_recovery"?`},
		{"hooks belong in config", "hooks:\n- run: echo bye", "hooks", "config.hooks"},
		{"any_of and ordered", "any_of:\n- accelerators: A100:1\nordered:\n- accelerators: V100:1", "ordered", `Cannot specify both "any_of" and "ordered"`},
		{"nested any_of", "any_of:\n- any_of:\n  - cpus: 2", "any_of[0].any_of", "may not itself contain"},
		{"gpus and accelerators", "gpus: A100:1\naccelerators: V100:1", "gpus", "Cannot specify both gpus and accelerators in config."},
		{"gpus and accelerators in item", "any_of:\n- gpus: A100:1\n  accelerators: V100:1", "any_of[0].gpus", "Cannot specify both gpus and accelerators"},
		{"infra and cloud", "infra: aws\ncloud: gcp", "infra", "Cannot specify both `infra` and `cloud`, `region`, or `zone`"},
		{"infra double slash", `infra: aws//us-east-1`, "infra", "empty segment"},
		{"infra unknown cloud", `infra: notacloud/us-east-1`, "infra", `unknown cloud "notacloud"`},
		{"infra typo suggests", `infra: asw`, "infra", `did you mean "aws"?`},
		{"infra too many parts", `infra: aws/a/b/c`, "infra", "at most"},
		{"infra not string", `infra: 3`, "infra", "expected a string"},
		{"legacy unknown cloud", `cloud: azur`, "cloud", `did you mean "azure"?`},
		{"legacy k8s zone", "cloud: kubernetes\nzone: z", "zone", "no zones"},
		{"accelerator count zero", `accelerators: A100:0`, "accelerators", "Accelerator count must be a positive number"},
		{"accelerator count negative map", `accelerators: {A100: -1}`, "accelerators.A100", "positive number"},
		{"accelerator count text", `accelerators: A100:many`, "accelerators", "positive number"},
		{"accelerator too many colons", `accelerators: a:b:c`, "accelerators", "should be <name> or <name>:<cnt>"},
		{"accelerator bad list item", `accelerators: [3]`, "accelerators[0]", "expected NAME:COUNT"},
		{"accelerator number", `accelerators: 4`, "accelerators", "expected NAME"},
		{"accelerator list with any_of", "accelerators: [A100:1, H100:1]\nany_of:\n- infra: aws", "accelerators", "cannot be combined with any_of"},
		{"multi accelerators with ordered", "accelerators: {A100: 1, H100: 1}\nordered:\n- infra: aws", "accelerators", `Cannot specify multiple "accelerators" with "ordered"`},
		{"tpu on aws", "infra: aws\naccelerators: tpu-v2-8", "infra", "only available on GCP or Kubernetes"},
		{"tpu vm instance type", "accelerators: tpu-v2-8\ninstance_type: n1-standard-8", "instance_type", "TPU VM"},
		{"cpus word", `cpus: four`, "cpus", `either a number or a string "<number>+"`},
		{"cpus zero", `cpus: 0`, "cpus", "greater than 0"},
		{"cpus bool", `cpus: true`, "cpus", "number"},
		{"memory bad unit", `memory: 16XB`, "memory", "units"},
		{"memory zero", `memory: 0`, "memory", "only allowed on Slurm"},
		{"disk zero", `disk_size: 0`, "disk_size", "greater than 0"},
		{"disk fraction", `disk_size: 1536MB`, "disk_size", "whole number"},
		{"disk word", `disk_size: big`, "disk_size", "whole number of GB"},
		{"disk tier unknown", `disk_tier: fastest`, "disk_tier", "low, medium, high, ultra, best"},
		{"network tier unknown", `network_tier: fast`, "network_tier", "standard, best"},
		{"use_spot string", `use_spot: yes please`, "use_spot", "true or false"},
		{"local disk mode", `local_disk: hdd:100`, "local_disk", "nvme or ssd"},
		{"max cost zero", `max_hourly_cost: 0`, "max_hourly_cost", "greater than 0"},
		{"port out of range", `ports: 70000`, "ports", "1..65535"},
		{"port range reversed", `ports: "9000-8000"`, "ports", "start is after the end"},
		{"port list item", `ports: [80, "x"]`, "ports[1]", "invalid port"},
		{"label value int", `labels: {v: 2}`, "labels.v", "must be strings"},
		{"image docker twice", "image_id:\n  us-east-1: docker:a\n  docker: b", "image_id.docker", "both a docker key"},
		{"image number", `image_id: 5`, "image_id", "image string"},
		{"autostop bad wait_for", "autostop:\n  idle_minutes: 10\n  wait_for: ssh_only", "autostop.wait_for", "jobs_and_ssh, jobs, none"},
		{"autostop bad string", `autostop: 10s`, "autostop", "unit m, h, d or w"},
		{"autostop negative", `autostop: -5`, "autostop", ">= 0"},
		{"autostop unknown key", "autostop: {idle_minute: 5}", "autostop.idle_minute", `did you mean "idle_minutes"?`},
		{"autostop hook_timeout", "autostop: {hook_timeout: 0}", "autostop.hook_timeout", ">= 1"},
		{"exit code out of range", "job_recovery:\n  max_restarts_on_errors: 3\n  recover_on_exit_codes: [300]", "job_recovery.recover_on_exit_codes[0]", "0..255"},
		{"exit code duplicate", "job_recovery: {recover_on_exit_codes: [1, 1]}", "job_recovery.recover_on_exit_codes[1]", "twice"},
		{"max restarts negative", "job_recovery: {max_restarts_on_errors: -1}", "job_recovery.max_restarts_on_errors", ">= 0"},
		{"job_recovery number", `job_recovery: 3`, "job_recovery", "strategy name"},
		{"priority out of range", `priority: 5000`, "priority", "-1000 to 1000"},
		{"priority string", `priority: high`, "priority", "integer"},
		{"priority inconsistent", "any_of:\n- priority: 1\n- priority: 2", "any_of[1].priority", "Priority is not consistent across resources"},
		{"autostop inconsistent", "any_of:\n- autostop: 5\n- infra: aws", "autostop", "All resources must have the same autostop config."},
		{"volume unknown key", "volumes:\n- size: 10", "volumes[0].size", "unknown field"},
		{"item not mapping", "any_of: [aws]", "any_of[0]", "resources mapping"},
		{"item bad field path", "any_of:\n- cpus: 2\n- cpus: two", "any_of[1].cpus", "number"},
		{"accelerator_args unknown", "accelerator_args: {tpu_vms: true}", "accelerator_args.tpu_vms", `did you mean "tpu_vm"?`},
		{"num_nodes misplaced", `num_nodes: 2`, "num_nodes", "task field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(decode(t, tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted it: %s", r)
			}
			var fe *fielderr.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *fielderr.Error", err, err)
			}
			if fe.Path != tt.path {
				t.Errorf("path = %q, want %q (error: %v)", fe.Path, tt.path, err)
			}
			if !strings.Contains(fe.Msg, tt.msg) {
				t.Errorf("message %q does not contain %q", fe.Msg, tt.msg)
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	r, err := Parse(decode(t, `
infra: k8s/arn:aws:eks:us-east-1:123:cluster/my-cluster
accelerators: H100:8
cpus: 8+
memory: 32GB+
use_spot: true
autostop: {idle_minutes: 15, down: true}
image_id: docker:vllm/vllm-openai:v0.10.0
priority: 10
`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Infra != (Infra{Cloud: "kubernetes", Region: "arn:aws:eks:us-east-1:123:cluster/my-cluster"}) {
		t.Errorf("Infra = %+v", r.Infra)
	}
	if r.AcceleratorName() != "H100" || r.AcceleratorCount() != 8 {
		t.Errorf("accelerator = %q x %v", r.AcceleratorName(), r.AcceleratorCount())
	}
	if *r.CPUs != (Quantity{Value: 8, AtLeast: true}) || *r.Memory != (Quantity{Value: 32, AtLeast: true}) {
		t.Errorf("cpus %+v memory %+v", *r.CPUs, *r.Memory)
	}
	if !r.Spot() || r.DiskSizeGB() != DefaultDiskSizeGB {
		t.Errorf("spot %v disk %d", r.Spot(), r.DiskSizeGB())
	}
	if a := r.Autostop; a == nil || !a.Enabled || a.IdleMinutes != 15 || !a.Down || a.LegacyHookEvent() != "down" {
		t.Errorf("autostop %+v", r.Autostop)
	}
	if r.DockerImage() != "vllm/vllm-openai:v0.10.0" {
		t.Errorf("docker image %q", r.DockerImage())
	}
	if *r.Priority != 10 {
		t.Errorf("priority %d", *r.Priority)
	}
}

// TestParseJSONNumbers: encoding/json gives float64 for every number, so
// integer fields must take integral floats.
func TestParseJSONNumbers(t *testing.T) {
	var v any
	if err := json.Unmarshal([]byte(`{"disk_size": 100, "priority": 5, "ports": [80], "autostop": 3, "job_recovery": {"recover_on_exit_codes": [1]}}`), &v); err != nil {
		t.Fatal(err)
	}
	r, err := Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	if r.DiskSize != 100 || *r.Priority != 5 || r.Ports[0] != "80" || r.Autostop.IdleMinutes != 3 || r.JobRecovery.RecoverOnExitCodes[0] != 1 {
		t.Errorf("got %s", canon(t, r))
	}
}
