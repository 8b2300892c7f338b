package resources

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/fielderr"
	"github.com/skygo/skygo/internal/testutil"
)

// docsResources decodes every document of a YAML file and returns the
// resources value of each document that has one.
func docsResources(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []any
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		m, ok := asMap(doc)
		if !ok {
			continue
		}
		if res, ok := m["resources"]; ok {
			out = append(out, res)
		}
	}
}

// parseAllResources parses the resources of every YAML in dir; all must be
// accepted and survive the round trip. It returns how many sections it saw.
func parseAllResources(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAMLs in %s: %v", dir, err)
	}
	n := 0
	for _, f := range files {
		for i, res := range docsResources(t, f) {
			n++
			r, err := Parse(res)
			if err != nil {
				t.Errorf("%s (document %d): %v", filepath.Base(f), i, err)
				continue
			}
			assertRoundTrip(t, filepath.Base(f), r)
		}
	}
	return n
}

// rejectCase is one file whose (single) resources section must fail with
// a field error at path whose message contains msg.
type rejectCase struct{ file, path, msg string }

func checkResourcesRejected(t *testing.T, dir string, tests []rejectCase) {
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			docs := docsResources(t, filepath.Join(dir, tt.file))
			if len(docs) != 1 {
				t.Fatalf("%d resources sections, want 1", len(docs))
			}
			_, err := Parse(docs[0])
			var fe *fielderr.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Parse error = %v, want a *fielderr.Error", err)
			}
			if fe.Path != tt.path || !strings.Contains(fe.Msg, tt.msg) {
				t.Errorf("got %q: %q; want path %q and a message containing %q", fe.Path, fe.Msg, tt.path, tt.msg)
			}
		})
	}
}

// TestExamples: the project's example tasks (testdata/tasks), whose
// resources use every form the parser knows.
func TestExamples(t *testing.T) {
	if n := parseAllResources(t, testutil.Testdata("tasks")); n < 20 {
		t.Errorf("only %d resources sections in testdata/tasks", n)
	}
}

// TestInvalidExamples: the resources-related files of
// testdata/tasks/invalid fail with the right field path.
func TestInvalidExamples(t *testing.T) {
	checkResourcesRejected(t, testutil.Testdata("tasks", "invalid"), []rejectCase{
		{"accelerator-count-negative.yaml", "accelerators", "positive number"},
		{"any-of-with-ordered.yaml", "ordered", `"any_of" and "ordered"`},
		{"autostop-bad-wait-for.yaml", "autostop.wait_for", "jobs_and_ssh, jobs, none"},
		{"memory-not-number.yaml", "memory", "16+"},
		{"disk-tier-unknown.yaml", "disk_tier", "low, medium, high, ultra, best"},
		{"gpus-with-accelerators.yaml", "gpus", "Cannot specify both gpus and accelerators in config."},
		{"infra-with-region.yaml", "infra", "Cannot specify both `infra`"},
		{"infra-empty-segment.yaml", "infra", "empty segment"},
		{"infra-unknown-cloud.yaml", "infra", "unknown cloud"},
		{"priority-too-low.yaml", "priority", "-1000 to 1000"},
		{"recover-exit-code-negative.yaml", "job_recovery.recover_on_exit_codes[1]", "0..255"},
		{"hooks-under-resources.yaml", "hooks", "config.hooks"},
		{"spot-recovery-renamed.yaml", "spot_recovery", "job_recovery"},
	})
}

// TestSkyPilotCorpus is the corpus compatibility suite for resources: the
// resources of every SkyPilot YAML in the shared corpus parse and survive
// the round trip, and the corpus' resources rejection cases fail with the
// given path. It is skipped, with one line, without ../shared.
func TestSkyPilotCorpus(t *testing.T) {
	dir := testutil.Shared(t, "corpus")
	t.Run("yamls", func(t *testing.T) {
		if n := parseAllResources(t, filepath.Join(dir, "yamls")); n < 100 {
			t.Errorf("only %d resources sections found; is the corpus complete?", n)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		checkResourcesRejected(t, filepath.Join(dir, "invalid"), []rejectCase{
			{"authored__accelerator_count_zero.yaml", "accelerators", "positive number"},
			{"authored__any_of_and_ordered.yaml", "ordered", `"any_of" and "ordered"`},
			{"authored__autostop_bad_wait_for.yaml", "autostop.wait_for", "jobs_and_ssh, jobs, none"},
			{"authored__cpus_not_number.yaml", "cpus", "<number>+"},
			{"authored__disk_tier_unknown.yaml", "disk_tier", "low, medium, high, ultra, best"},
			{"authored__gpus_and_accelerators.yaml", "gpus", "Cannot specify both gpus and accelerators in config."},
			{"authored__infra_and_cloud.yaml", "infra", "Cannot specify both `infra`"},
			{"authored__infra_double_slash.yaml", "infra", "empty segment"},
			{"authored__infra_unknown_cloud.yaml", "infra", "unknown cloud"},
			{"authored__priority_out_of_range.yaml", "priority", "-1000 to 1000"},
			{"authored__recover_exit_code_out_of_range.yaml", "job_recovery.recover_on_exit_codes[0]", "0..255"},
			{"authored__resources_hooks.yaml", "hooks", "config.hooks"},
			{"examples__spot__resnet.yaml", "spot_recovery", "job_recovery"},
		})
	})
}
