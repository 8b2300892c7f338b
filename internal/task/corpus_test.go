package task

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/testutil"
)

// The SkyPilot corpus compatibility suite: every YAML of SkyPilot's own
// repository in the shared corpus (../shared/corpus) loads, templates load
// once rendered, volume specs validate, and every invalid file is rejected
// at the right line. It runs where the shared folder exists (CI, the
// development machines) and is skipped, with one line, in a plain clone;
// examples_test.go covers the same features with the project's own files.
func TestSkyPilotCorpus(t *testing.T) {
	dir := testutil.Shared(t, "corpus")
	index := corpusIndex(t, dir)
	t.Run("yamls", func(t *testing.T) { testCorpusYAMLsLoad(t, dir, index) })
	t.Run("templates", func(t *testing.T) { testCorpusTemplatesLoad(t, dir, index) })
	t.Run("volumes", func(t *testing.T) { testCorpusVolumeSpecs(t, dir) })
	t.Run("invalid", func(t *testing.T) { testCorpusInvalidRejected(t, filepath.Join(dir, "invalid")) })
}

// corpusIndex reads INDEX.tsv of the corpus in dir: file -> classes.
func corpusIndex(t testing.TB, dir string) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "INDEX.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) >= 3 {
			out[cols[0]] = strings.Split(cols[2], ",")
		}
	}
	return out
}

func hasClass(classes []string, c string) bool {
	for _, x := range classes {
		if x == c {
			return true
		}
	}
	return false
}

// nullEnvOverrides gives --env NAME=value for every env that is null in
// the file, read with a plain YAML pass over each document.
func nullEnvOverrides(t testing.TB, data []byte) []string {
	t.Helper()
	docs, err := splitDocuments("x", data)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		_, envs := mappingValue(d, "envs")
		if envs == nil {
			continue
		}
		for i := 0; i+1 < len(envs.Content); i += 2 {
			if envs.Content[i+1].ShortTag() == "!!null" {
				out = append(out, envs.Content[i].Value+"=test-value")
			}
		}
	}
	return out
}

var placeholderRE = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// renderTemplate fills {{name}} placeholders: cloud -> aws, anything else
// a value that is valid wherever the templates use it.
func renderTemplate(data []byte) []byte {
	values := map[string]string{"cloud": "aws", "delay": "30s", "store_type": "s3", "image_id": "docker:ubuntu:22.04"}
	return placeholderRE.ReplaceAllFunc(data, func(m []byte) []byte {
		name := string(placeholderRE.FindSubmatch(m)[1])
		if v, ok := values[name]; ok {
			return []byte(v)
		}
		return []byte("sky-test-" + strings.ReplaceAll(name, "_", "-"))
	})
}

// corpusFiles lists the YAML files of dir/sub, sorted.
func corpusFiles(t testing.TB, dir, sub string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, sub, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(dir, sub, "*.yml"))
	files = append(files, more...)
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("no YAML files in %s", filepath.Join(dir, sub))
	}
	return files
}

func testCorpusYAMLsLoad(t *testing.T, dir string, index map[string][]string) {
	for _, path := range corpusFiles(t, dir, "yamls") {
		rel := "yamls/" + filepath.Base(path)
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var opts LoadOptions
			if hasClass(index[rel], "env_required") {
				opts.Env = nullEnvOverrides(t, data)
				if len(opts.Env) == 0 {
					t.Fatalf("tagged env_required but no null env found")
				}
				// Without the overrides the load must fail naming the variable.
				_, err := LoadBytes(path, data, LoadOptions{})
				if err == nil || !strings.Contains(err.Error(), "is None") {
					t.Errorf("env_required file loaded without --env: err=%v", err)
				}
			}
			dag, err := LoadBytes(path, data, opts)
			if err != nil {
				t.Fatalf("load failed:\n%v", err)
			}
			if len(dag.Tasks) == 0 {
				t.Fatalf("no tasks loaded")
			}
			kind := strings.TrimPrefix(index[rel][0], "kind=")
			checkKind(t, kind, dag)
		})
	}
}

// checkKind asserts the loaded DAG matches the file kind the corpus index
// gives, so a file is not silently loaded as something else.
func checkKind(t *testing.T, kind string, dag *DAG) {
	t.Helper()
	switch kind {
	case "job_group":
		if !dag.IsJobGroup() {
			t.Errorf("kind job_group, loaded as %s with %d tasks", dag.Execution, len(dag.Tasks))
		}
	case "pipeline":
		if dag.IsJobGroup() || len(dag.Tasks) < 1 {
			t.Errorf("kind pipeline, loaded as %s with %d tasks", dag.Execution, len(dag.Tasks))
		}
	case "service":
		if dag.Tasks[0].Service == nil {
			t.Errorf("kind service, but no service section loaded")
		}
	case "pool":
		if dag.Tasks[0].Pool == nil {
			t.Errorf("kind pool, but no pool section loaded")
		}
	case "task":
		if len(dag.Tasks) != 1 {
			t.Errorf("kind task, loaded %d tasks", len(dag.Tasks))
		}
	}
}

func testCorpusTemplatesLoad(t *testing.T, dir string, index map[string][]string) {
	for _, path := range corpusFiles(t, dir, "templates") {
		rel := "templates/" + filepath.Base(path)
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rendered := renderTemplate(data)
			if placeholderRE.Match(rendered) {
				t.Fatalf("placeholders left after rendering")
			}
			dag, err := LoadBytes(path, rendered, LoadOptions{})
			if hasClass(index[rel], "schema_invalid") {
				// The index marks stale test files SkyPilot's own schema
				// rejects at this commit (e.g. mode: RCLONE, renamed to
				// MOUNT_CACHED): they must be rejected with a located error.
				if err == nil {
					t.Fatalf("tagged schema_invalid but loaded")
				}
				if !regexp.MustCompile(`:\d+:\d+: `).MatchString(err.Error()) {
					t.Errorf("error has no line:col: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("load failed:\n%v", err)
			}
			checkKind(t, strings.TrimPrefix(index[rel][0], "kind="), dag)
		})
	}
}

func testCorpusVolumeSpecs(t *testing.T, dir string) {
	for _, path := range corpusFiles(t, dir, "volumes") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			spec, err := LoadVolumeSpec(path)
			if err != nil {
				t.Fatalf("volume spec rejected:\n%v", err)
			}
			if spec.Name == "" || spec.Type == "" || spec.SizeGi < 1 {
				t.Errorf("incomplete spec: %+v", spec)
			}
		})
	}
}

// invalidCases is what each corpus/invalid file must produce: the line the
// error points at and a field name it must mention. Phases come from
// EXPECTED.tsv; these are read off the files by hand.
var invalidCases = map[string]struct {
	line  int
	field string
}{
	"llm__deepseek-r1__deepseek-r1-671B.yaml":          {line: 52, field: "max_replicas"},
	"examples__spot__bert_qa.yaml":                     {line: 7, field: "file_mounts"},
	"examples__spot__resnet.yaml":                      {line: 0, field: "spot_recovery"},
	"authored__unknown_top_level_field.yaml":           {line: 1, field: "nodes"},
	"authored__num_nodes_zero.yaml":                    {line: 1, field: "num_nodes"},
	"authored__num_nodes_string.yaml":                  {line: 1, field: "num_nodes"},
	"authored__env_value_missing.yaml":                 {line: 2, field: "MODEL_NAME"},
	"authored__env_bad_key.yaml":                       {line: 2, field: "1BAD"},
	"authored__any_of_and_ordered.yaml":                {line: 0, field: "any_of|ordered"},
	"authored__service_and_pool.yaml":                  {line: 4, field: "pool"},
	"authored__infra_double_slash.yaml":                {line: 2, field: "infra"},
	"authored__infra_unknown_cloud.yaml":               {line: 2, field: "infra"},
	"authored__infra_and_cloud.yaml":                   {line: 0, field: "infra|cloud"},
	"authored__gpus_and_accelerators.yaml":             {line: 0, field: "gpus|accelerators"},
	"authored__accelerator_count_zero.yaml":            {line: 2, field: "accelerators"},
	"authored__cpus_not_number.yaml":                   {line: 2, field: "cpus"},
	"authored__disk_tier_unknown.yaml":                 {line: 2, field: "disk_tier"},
	"authored__priority_out_of_range.yaml":             {line: 2, field: "priority"},
	"authored__autostop_bad_wait_for.yaml":             {line: 4, field: "wait_for"},
	"authored__recover_exit_code_out_of_range.yaml":    {line: 4, field: "recover_on_exit_codes"},
	"authored__resources_hooks.yaml":                   {line: 2, field: "hooks"},
	"authored__config_key_not_overridable.yaml":        {line: 2, field: "allowed_clouds"},
	"authored__readiness_probe_no_path.yaml":           {line: 3, field: "path"},
	"authored__replica_policy_no_min.yaml":             {line: 4, field: "min_replicas"},
	"authored__replicas_and_replica_policy.yaml":       {line: 4, field: "replica_policy"},
	"authored__autoscale_without_qps.yaml":             {line: 5, field: "max_replicas"},
	"authored__readiness_path_no_slash.yaml":           {line: 2, field: "readiness_probe"},
	"authored__service_port_out_of_range.yaml":         {line: 4, field: "ports"},
	"authored__lb_policy_unknown.yaml":                 {line: 4, field: "load_balancing_policy"},
	"authored__pool_threshold_without_max.yaml":        {line: 3, field: "queue_length_threshold"},
	"authored__secrets_list_without_prefix.yaml":       {line: 2, field: "secrets"},
	"authored__workdir_git_without_url.yaml":           {line: 2, field: "url"},
	"authored__storage_mode_unknown.yaml":              {line: 4, field: "mode"},
	"authored__storage_name_with_uri_source.yaml":      {line: 3, field: "name"},
	"authored__storage_type_without_mount_cached.yaml": {line: 5, field: "type"},
	"authored__duplicate_key.yaml":                     {line: 3, field: "name"},
	"authored__empty_file.yaml":                        {line: 1, field: "empty"},
	"authored__pipeline_bad_execution.yaml":            {line: 2, field: "execution"},
	"authored__jobgroup_job_without_name.yaml":         {line: 4, field: "name"},
	"authored__jobgroup_duplicate_job_names.yaml":      {line: 7, field: "name"},
	"authored__jobgroup_unknown_primary.yaml":          {line: 3, field: "primary_tasks"},
	"authored__jobgroup_bad_termination_delay.yaml":    {line: 3, field: "termination_delay"},
	"authored__task_name_invalid.yaml":                 {line: 1, field: "name"},
	"authored__mount_dest_trailing_slash.yaml":         {line: 2, field: `"/data/"`},
}

func testCorpusInvalidRejected(t *testing.T, dir string) {
	f, err := os.Open(filepath.Join(dir, "EXPECTED.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	n := 0
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 4 {
			continue
		}
		file, phase := cols[0], cols[2]
		n++
		t.Run(file, func(t *testing.T) {
			want, ok := invalidCases[file]
			if !ok {
				t.Fatalf("no expectation written for %s (%s)", file, cols[3])
			}
			checkRejected(t, filepath.Join(dir, file), phase, want.line, want.field)
		})
	}
	if n != len(invalidCases) {
		t.Errorf("EXPECTED.tsv has %d cases, table has %d", n, len(invalidCases))
	}
}

// checkRejected loads path and wants it rejected in phase (parse or load:
// by the loader; validate: loads, but ValidateForLaunch refuses it) with
// an error that names the file, line (0: some line:col) and a field
// matching the field pattern.
func checkRejected(t *testing.T, path, phase string, line int, field string) {
	t.Helper()
	dag, err := Load(path, LoadOptions{})
	switch phase {
	case "parse", "load":
		if err == nil {
			t.Fatalf("loaded, want rejection at %s", phase)
		}
	case "validate":
		if err != nil {
			t.Fatalf("load failed, want failure only at validate: %v", err)
		}
		for _, tk := range dag.Tasks {
			if err = ValidateForLaunch(tk); err != nil {
				break
			}
		}
		if err == nil {
			t.Fatalf("ValidateForLaunch accepted it")
		}
	default:
		t.Fatalf("unknown phase %q", phase)
	}
	msg := err.Error()
	if !strings.Contains(msg, path+":") {
		t.Errorf("error does not name the file: %s", msg)
	}
	if line > 0 && !strings.Contains(msg, ":"+strconv.Itoa(line)+":") {
		t.Errorf("error does not name line %d: %s", line, msg)
	}
	if line == 0 && !regexp.MustCompile(`:\d+:\d+: `).MatchString(msg) {
		t.Errorf("error names no line: %s", msg)
	}
	if !regexp.MustCompile(field).MatchString(msg) {
		t.Errorf("error does not name %q: %s", field, msg)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("error is %T, want *task.Error inside", err)
	}
}
