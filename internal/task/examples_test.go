package task

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// The project's own example files (testdata/tasks, testdata/volumes)
// cover the features of SkyPilot task YAMLs that the corpus suite
// (corpus_test.go) checks on SkyPilot's files, so that they are tested in
// a plain clone too. A file's kind is its name's prefix.

func exampleKind(path string) string {
	kind, _, _ := strings.Cut(filepath.Base(path), "-")
	return kind
}

// exampleChecks are facts of single files beyond "loads as its kind".
var exampleChecks = map[string]func(t *testing.T, d *DAG){
	"task-finetune.yaml": func(t *testing.T, d *DAG) {
		tk := d.Tasks[0]
		if tk.NumNodes != 2 || !tk.Workdir.IsGit() || tk.Workdir.Ref != "v1.2.0" {
			t.Errorf("num_nodes %d, workdir %+v", tk.NumNodes, tk.Workdir)
		}
		if got := tk.FileMounts["/datasets"]; got == nil || got.Storage == nil || strings.Join(got.Storage.Source, ",") != "s3://my-finetune-data/datasets" || got.Storage.Mode != "MOUNT" {
			t.Errorf("/datasets: env not substituted into the bucket source, or mode lost: %+v", got)
		}
		if got := tk.FileMounts["/checkpoints"]; got == nil || got.Storage == nil || got.Storage.Name != "my-finetune-data-ckpt" || got.Storage.Mode != "MOUNT_CACHED" || got.Storage.Store != "S3" {
			t.Errorf("/checkpoints: %+v", got)
		}
		if got := tk.FileMounts["/configs"]; got == nil || got.Storage == nil || got.Storage.Mode != "COPY" || got.Storage.Name != "my-finetune-data-configs" {
			t.Errorf("/configs: %+v", got)
		}
		if got := tk.FileMounts["/tokenizer"]; got == nil || got.Source != "gs://public-models/tokenizer" {
			t.Errorf("/tokenizer: %+v", got)
		}
		if tk.Envs["EPOCHS"] != "3" || len(tk.Secrets) != 2 || tk.Secrets["HF_TOKEN"].Reveal() != "placeholder-token" {
			t.Errorf("envs %v, %d secrets", tk.Envs, len(tk.Secrets))
		}
	},
	"task-needs-env.yaml": func(t *testing.T, d *DAG) {
		if got := d.Tasks[0].Envs["MODEL_ID"]; got != "test-value" {
			t.Errorf("MODEL_ID = %q, want the --env override", got)
		}
	},
	"task-k8s-fractional.yaml": func(t *testing.T, d *DAG) {
		if d.Tasks[0].Config["kubernetes"] == nil {
			t.Errorf("config override lost: %v", d.Tasks[0].Config)
		}
	},
	"task-volumes.yaml": func(t *testing.T, d *DAG) {
		v := d.Tasks[0].Volumes
		if v["/mnt/datasets"] == nil || v["/mnt/datasets"].Name != "shared-datasets" || v["/mnt/scratch"] == nil || !v["/mnt/scratch"].Ephemeral() {
			t.Errorf("volumes = %+v", v)
		}
	},
	"task-setup-only.yaml": func(t *testing.T, d *DAG) {
		if d.Tasks[0].Run != "" || d.Tasks[0].Setup == "" {
			t.Errorf("setup %q, run %q", d.Tasks[0].Setup, d.Tasks[0].Run)
		}
	},
	"service-autoscaled.yaml": func(t *testing.T, d *DAG) {
		s := d.Tasks[0].Service
		p := s.ReplicaPolicy
		if p == nil || p.MinReplicas != 1 || p.MaxReplicas != 4 || p.TargetQPS == nil || *p.TargetQPS != 2.5 {
			t.Fatalf("replica policy %+v", p)
		}
		if s.ReadinessProbe.Path != "/v1/completions" || s.ReadinessProbe.PostData == nil || s.ReadinessProbe.InitialDelaySeconds != 600 || s.LoadBalancingPolicy != "least_load" {
			t.Errorf("service %+v", s)
		}
	},
	"service-fixed.yaml": func(t *testing.T, d *DAG) {
		s := d.Tasks[0].Service
		if s.Replicas == nil || *s.Replicas != 2 || s.ReadinessProbe.Path != "/health" || s.ReadinessProbe.PostData != nil {
			t.Errorf("service %+v", s)
		}
	},
	"pool-workers.yaml": func(t *testing.T, d *DAG) {
		if w := d.Tasks[0].Pool.Workers; w == nil || *w != 2 {
			t.Errorf("workers = %v", w)
		}
	},
	"pipeline-train-eval.yaml": func(t *testing.T, d *DAG) {
		if d.Name != "train-then-eval" || !d.IsPipeline() || d.Tasks[0].Name != "train" || d.Tasks[1].Name != "eval" {
			t.Errorf("pipeline %q, %d tasks", d.Name, len(d.Tasks))
		}
	},
	"jobgroup-rl.yaml": func(t *testing.T, d *DAG) {
		if len(d.Tasks) != 3 || strings.Join(d.PrimaryTasks, ",") != "trainer" {
			t.Errorf("%d jobs, primary %v", len(d.Tasks), d.PrimaryTasks)
		}
		if d.TerminationDelay.For("rollout") != 30*time.Second || d.TerminationDelay.For("replay-buffer") != 2*time.Minute {
			t.Errorf("termination delay %+v", d.TerminationDelay)
		}
		if d.Tasks[1].NumNodes != 2 {
			t.Errorf("rollout num_nodes = %d", d.Tasks[1].NumNodes)
		}
	},
}

func TestExamplesLoad(t *testing.T) {
	files := corpusFiles(t, testutil.Testdata(), "tasks")
	checked := 0
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var opts LoadOptions
			if opts.Env = nullEnvOverrides(t, data); len(opts.Env) > 0 {
				// A null env must be given with --env; without it the
				// load fails and names the variable.
				_, err := LoadBytes(path, data, LoadOptions{})
				if err == nil || !strings.Contains(err.Error(), "is None") {
					t.Errorf("loaded without --env for a null env: err = %v", err)
				}
			}
			dag, err := LoadBytes(path, data, opts)
			if err != nil {
				t.Fatalf("load failed:\n%v", err)
			}
			kind := map[string]string{"jobgroup": "job_group"}[exampleKind(path)]
			if kind == "" {
				kind = exampleKind(path)
			}
			checkKind(t, kind, dag)
			// The canonical dump loads again, to the same dump.
			dump, err := dag.ToYAML()
			if err != nil {
				t.Fatal(err)
			}
			again, err := LoadBytes(name, dump, opts)
			if err != nil {
				t.Fatalf("the dump does not load:\n%v\n%s", err, dump)
			}
			dump2, err := again.ToYAML()
			if err != nil || !bytes.Equal(dump, dump2) {
				t.Errorf("dump changed on reload (%v):\n%s\n---\n%s", err, dump, dump2)
			}
			if check := exampleChecks[name]; check != nil {
				check(t, dag)
				checked++
			}
		})
	}
	if checked != len(exampleChecks) {
		t.Errorf("%d of %d exampleChecks ran: a file was renamed?", checked, len(exampleChecks))
	}
	for _, kind := range []string{"task", "service", "pool", "pipeline", "jobgroup"} {
		if !hasExampleOfKind(files, kind) {
			t.Errorf("testdata/tasks has no %s example", kind)
		}
	}
}

func hasExampleOfKind(files []string, kind string) bool {
	for _, f := range files {
		if exampleKind(f) == kind {
			return true
		}
	}
	return false
}

// invalidExamples is what each testdata/tasks/invalid file must produce:
// the phase that rejects it, the line the error points at and a pattern
// the message must match.
var invalidExamples = map[string]struct {
	phase string
	line  int
	field string
}{
	"unknown-top-level-field.yaml":       {"load", 2, `"node".*"num_nodes"`},
	"num-nodes-negative.yaml":            {"load", 4, "num_nodes"},
	"num-nodes-float.yaml":               {"load", 1, "num_nodes"},
	"env-null-no-override.yaml":          {"load", 6, "API_TOKEN"},
	"env-bad-key.yaml":                   {"load", 3, "BAD-KEY"},
	"any-of-with-ordered.yaml":           {"load", 4, `"any_of" and "ordered"`},
	"service-with-pool.yaml":             {"load", 7, "service and pool"},
	"infra-empty-segment.yaml":           {"load", 3, "infra"},
	"infra-unknown-cloud.yaml":           {"load", 2, "infra.*mycloud"},
	"infra-with-region.yaml":             {"load", 3, "infra.*region"},
	"gpus-with-accelerators.yaml":        {"load", 3, "gpus and accelerators"},
	"accelerator-count-negative.yaml":    {"load", 3, "accelerators"},
	"memory-not-number.yaml":             {"load", 4, "memory"},
	"disk-tier-unknown.yaml":             {"load", 3, "disk_tier"},
	"priority-too-low.yaml":              {"load", 3, "priority"},
	"autostop-bad-wait-for.yaml":         {"load", 5, "wait_for"},
	"recover-exit-code-negative.yaml":    {"load", 5, `recover_on_exit_codes\[1\]`},
	"hooks-under-resources.yaml":         {"load", 4, "hooks"},
	"config-not-overridable.yaml":        {"load", 3, "jobs"},
	"probe-dict-without-path.yaml":       {"load", 5, "path"},
	"replica-policy-without-min.yaml":    {"load", 4, "min_replicas"},
	"replicas-with-policy.yaml":          {"load", 4, "replica_policy"},
	"autoscale-without-target.yaml":      {"load", 5, "target_qps_per_replica"},
	"probe-path-relative.yaml":           {"load", 2, "readiness"},
	"service-port-zero.yaml":             {"load", 4, "ports"},
	"lb-policy-unknown.yaml":             {"load", 4, "load_balancing_policy"},
	"pool-threshold-without-max.yaml":    {"load", 4, "queue_length_threshold"},
	"secrets-list-plain-name.yaml":       {"load", 4, "API_KEY"},
	"workdir-git-no-url.yaml":            {"load", 3, "url"},
	"storage-mode-unknown.yaml":          {"load", 6, "mode"},
	"storage-name-with-uri.yaml":         {"load", 4, "name"},
	"storage-type-without-cached.yaml":   {"load", 6, "type"},
	"spot-recovery-renamed.yaml":         {"load", 4, "spot_recovery.*job_recovery"},
	"bucket-without-name-or-source.yaml": {"load", 3, "source or storage name"},
	"duplicate-key.yaml":                 {"parse", 5, "run"},
	"only-comments.yaml":                 {"parse", 1, "empty"},
	"pipeline-header-execution.yaml":     {"load", 2, "execution"},
	"jobgroup-unnamed-job.yaml":          {"load", 7, "name"},
	"jobgroup-duplicate-names.yaml":      {"load", 7, "shard"},
	"jobgroup-unknown-primary.yaml":      {"load", 3, "primary_tasks.*trainer"},
	"jobgroup-bad-delay.yaml":            {"load", 3, "termination_delay"},
	"task-name-spaces.yaml":              {"validate", 1, "name"},
	"mount-path-trailing-slash.yaml":     {"validate", 4, `"/remote/models/"`},
}

func TestInvalidExamplesRejected(t *testing.T) {
	files := corpusFiles(t, testutil.Testdata(), "tasks/invalid")
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			want, ok := invalidExamples[name]
			if !ok {
				t.Fatalf("no expectation written for %s", name)
			}
			checkRejected(t, path, want.phase, want.line, want.field)
		})
	}
	if len(files) != len(invalidExamples) {
		t.Errorf("testdata/tasks/invalid has %d files, the table %d", len(files), len(invalidExamples))
	}
}

func TestExampleVolumeSpecs(t *testing.T) {
	want := map[string]string{} // file -> type
	for _, path := range corpusFiles(t, testutil.Testdata(), "volumes") {
		spec, err := LoadVolumeSpec(path)
		if err != nil {
			t.Errorf("%s rejected:\n%v", filepath.Base(path), err)
			continue
		}
		if spec.Name == "" || spec.Type == "" {
			t.Errorf("%s: incomplete spec %+v", filepath.Base(path), spec)
		}
		want[filepath.Base(path)] = spec.Type
	}
	for _, typ := range []string{"k8s-pvc", "k8s-hostpath", "runpod-network-volume"} {
		found := false
		for _, got := range want {
			found = found || got == typ
		}
		if !found {
			t.Errorf("testdata/volumes has no %s spec (have %v)", typ, want)
		}
	}
}
