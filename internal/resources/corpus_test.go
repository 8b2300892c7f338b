package resources

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/fielderr"
	"github.com/skygo/skygo/internal/testutil"
	"gopkg.in/yaml.v3"
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

// TestCorpus parses the resources of every real SkyPilot YAML in the
// development corpus; all must be accepted and survive the round trip.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.SharedDir(t), "corpus", "yamls", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus YAMLs found: %v", err)
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
	if n < 100 {
		t.Errorf("only %d resources sections found; is the corpus complete?", n)
	}
}

// TestInvalidCorpus checks the resources-related rejection cases of the
// corpus: each file's resources must fail with the given path.
func TestInvalidCorpus(t *testing.T) {
	dir := filepath.Join(testutil.SharedDir(t), "corpus", "invalid")
	tests := []struct{ file, path, msg string }{
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
	}
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
