package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
)

func mustLoad(t *testing.T, yamlText string, opts LoadOptions) *Task {
	t.Helper()
	dag, err := LoadBytes("t.yaml", []byte(yamlText), opts)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(dag.Tasks) != 1 {
		t.Fatalf("want 1 task, got %d", len(dag.Tasks))
	}
	return dag.Tasks[0]
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnvPrecedence(t *testing.T) {
	const doc = "envs:\n  A: yaml\n  B: yaml\n  C: yaml\n  N: 123\n  F: 1e3\n  T: true\nrun: echo\n"
	envFile := writeFile(t, "a.env", "# comment\nexport B=file1\nC='file1 quoted'\nD=\"line\\nnext\"\n")
	envFile2 := writeFile(t, "b.env", "C=file2 # trailing comment\n")
	lookup := func(k string) (string, bool) {
		if k == "LOCAL" {
			return "from-local", true
		}
		return "", false
	}
	tests := []struct {
		name string
		opts LoadOptions
		want map[string]string
	}{
		{"yaml only, stringified like Python", LoadOptions{}, map[string]string{"A": "yaml", "B": "yaml", "N": "123", "F": "1000.0", "T": "True"}},
		{"env file overrides yaml", LoadOptions{EnvFiles: []string{envFile}}, map[string]string{"A": "yaml", "B": "file1", "C": "file1 quoted", "D": "line\nnext"}},
		{"later env file wins", LoadOptions{EnvFiles: []string{envFile, envFile2}}, map[string]string{"C": "file2"}},
		{"--env beats env file", LoadOptions{EnvFiles: []string{envFile}, Env: []string{"B=flag", "B=flag2"}}, map[string]string{"B": "flag2", "C": "file1 quoted"}},
		{"bare --env copies local env", LoadOptions{Env: []string{"LOCAL"}, LookupEnv: lookup}, map[string]string{"LOCAL": "from-local"}},
		{"empty value allowed", LoadOptions{Env: []string{"A="}}, map[string]string{"A": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := mustLoad(t, doc, tc.opts)
			for k, v := range tc.want {
				if got := tk.Envs[k]; got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestSecretPrecedenceAndRefs(t *testing.T) {
	const doc = "secrets:\n  TOKEN: yaml-secret\n  OTHER: null\n  secrets:global.SHARED: null\nrun: echo\n"
	sf := writeFile(t, "s.env", "TOKEN=file-secret\nOTHER=file-other\n")
	tk := mustLoad(t, doc, LoadOptions{SecretFiles: []string{sf}, Secrets: []string{"TOKEN=flag-secret"}})
	if got := tk.Secrets["TOKEN"].Reveal(); got != "flag-secret" {
		t.Errorf("TOKEN = %q, want flag-secret (--secret beats --secret-file beats YAML)", got)
	}
	if got := tk.Secrets["OTHER"].Reveal(); got != "file-other" {
		t.Errorf("OTHER = %q, want file-other", got)
	}
	if len(tk.SecretRefs) != 1 || tk.SecretRefs[0] != "secrets:global.SHARED" {
		t.Errorf("SecretRefs = %v", tk.SecretRefs)
	}
	if err := ValidateForLaunch(tk); err != nil {
		t.Errorf("ValidateForLaunch: %v", err)
	}

	// A null inline secret loads (examples ship them) but cannot launch.
	tk = mustLoad(t, doc, LoadOptions{})
	err := ValidateForLaunch(tk)
	if err == nil || !strings.Contains(err.Error(), "Secret 'OTHER' is None") || !strings.Contains(err.Error(), "t.yaml:3:") {
		t.Errorf("want located None error for OTHER, got %v", err)
	}

	// List form plus --secret becomes refs + inline.
	tk = mustLoad(t, "secrets:\n  - secrets:API_KEY\nrun: echo\n", LoadOptions{Secrets: []string{"EXTRA=x1y2z3"}})
	if len(tk.SecretRefs) != 1 || tk.Secrets["EXTRA"].Reveal() != "x1y2z3" {
		t.Errorf("refs %v secrets %v", tk.SecretRefs, tk.SecretNames())
	}
}

func TestNullEnvNeedsOverride(t *testing.T) {
	const doc = "envs:\n  MODEL:\n  EMPTY: ''\nrun: echo\n"
	_, err := LoadBytes("t.yaml", []byte(doc), LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "t.yaml:2:3: envs.MODEL: Environment variable 'MODEL' is None") {
		t.Fatalf("got %v", err)
	}
	tk := mustLoad(t, doc, LoadOptions{Env: []string{"MODEL=llama"}})
	if tk.Envs["MODEL"] != "llama" || tk.Envs["EMPTY"] != "" {
		t.Errorf("envs = %v", tk.Envs)
	}
}

func TestBadOverrides(t *testing.T) {
	for _, opts := range []LoadOptions{
		{Env: []string{"1BAD=x"}},
		{Env: []string{"UNSET_VAR_FOR_TEST"}, LookupEnv: func(string) (string, bool) { return "", false }},
		{EnvFiles: []string{"/nonexistent/file.env"}},
		{SecretFiles: []string{writeFile(t, "bad.env", "no equals sign here\n")}},
	} {
		if _, err := LoadBytes("t.yaml", []byte("run: echo\n"), opts); err == nil {
			t.Errorf("%+v: want error", opts)
		}
	}
}

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"BUCKET": "my-bkt", "B": "short", "EMPTY": ""}
	tests := []struct{ in, want string }{
		{"s3://$BUCKET/data", "s3://my-bkt/data"},
		{"s3://${BUCKET}data", "s3://my-bktdata"},
		{"$BUCKETX", "$BUCKETX"}, // longest identifier, unknown: left as is
		{"$B-$B", "short-short"},
		{"${UNKNOWN} $UNKNOWN", "${UNKNOWN} $UNKNOWN"},
		{"${BUCKET:-x}", "${BUCKET:-x}"}, // no default syntax
		{"x$EMPTY.y", "x.y"},
		{"no dollar", "no dollar"},
	}
	for _, tc := range tests {
		if got := Substitute(tc.in, vars); got != tc.want {
			t.Errorf("Substitute(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSubstitutionScope(t *testing.T) {
	const doc = `envs:
  BUCKET: data-bkt
  MODEL: llama
  DIR: /mnt
secrets:
  TOKEN: tok-123456
workdir: ./$MODEL
file_mounts:
  $DIR/data:
    name: $BUCKET
    mode: COPY
    source: ./src
  /cfg: s3://${BUCKET}/cfg
volumes:
  $DIR/vol: vol-$MODEL
service:
  readiness_probe:
    path: /health
    post_data:
      model: $MODEL
      auth: $TOKEN
  replicas: 1
resources:
  labels:
    model: $MODEL
run: echo $MODEL
setup: echo $MODEL
name: n-$MODEL
`
	tk := mustLoad(t, doc, LoadOptions{Env: []string{"MODEL=qwen"}})
	checks := map[string]string{
		"workdir":          tk.Workdir.Path,
		"bucket name":      tk.FileMounts["/mnt/data"].Storage.Name,
		"uri source":       tk.FileMounts["/cfg"].Source,
		"volume":           tk.Volumes["/mnt/vol"].Name,
		"post_data.model":  tk.Service.ReadinessProbe.PostData.(map[string]any)["model"].(string),
		"post_data.secret": tk.Service.ReadinessProbe.PostData.(map[string]any)["auth"].(string),
		"run untouched":    tk.Run,
		"setup untouched":  tk.Setup,
		"name untouched":   tk.Name,
		"labels untouched": fmt.Sprint(tk.ResourcesConfig["labels"].(map[string]any)["model"]),
	}
	want := map[string]string{
		"workdir": "./qwen", "bucket name": "data-bkt", "uri source": "s3://data-bkt/cfg", "volume": "vol-qwen",
		"post_data.model": "qwen", "post_data.secret": "tok-123456", "run untouched": "echo $MODEL",
		"setup untouched": "echo $MODEL", "name untouched": "n-$MODEL", "labels untouched": "$MODEL",
	}
	for k, got := range checks {
		if got != want[k] {
			t.Errorf("%s = %q, want %q", k, got, want[k])
		}
	}
}

func TestRedaction(t *testing.T) {
	const doc = `name: r
envs:
  PUBLIC: visible-value
secrets:
  API_KEY: sk-supersecret-1
service:
  readiness_probe:
    path: /
    headers:
      Authorization: Bearer $API_KEY
  replicas: 1
run: echo
`
	tk := mustLoad(t, doc, LoadOptions{Secrets: []string{"CLI_SECRET=cli-secret-value"}})
	secrets := []string{"sk-supersecret-1", "cli-secret-value"}

	y, err := tk.ToYAML()
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json escapes < and > in Marshaler output; decode to compare.
	var decoded map[string]any
	if err := json.Unmarshal(j, &decoded); err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"ToYAML":        string(y),
		"JSON":          fmt.Sprint(decoded),
		"fmt %v":        fmt.Sprintf("%v %s %q %+v", tk.Secrets["API_KEY"], tk.Secrets["API_KEY"], tk.Secrets["API_KEY"], tk.Secrets),
		"Redacted dump": fmt.Sprint(tk.Redacted().Secrets["API_KEY"].Reveal()),
	}
	for name, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s leaks %q:\n%s", name, s, out)
			}
		}
		if !strings.Contains(out, Redacted) {
			t.Errorf("%s does not show %s:\n%s", name, Redacted, out)
		}
	}
	if !strings.Contains(string(y), "visible-value") {
		t.Errorf("envs should stay visible:\n%s", y)
	}
	if tk.Secrets["API_KEY"].Reveal() != "sk-supersecret-1" {
		t.Errorf("Reveal lost the value")
	}

	r := tk.Redactor()
	line := "curl -H 'Authorization: Bearer sk-supersecret-1' && echo cli-secret-value; echo visible-value"
	got := r.Redact(line)
	want := "curl -H 'Authorization: Bearer <redacted>' && echo <redacted>; echo visible-value"
	if got != want {
		t.Errorf("Redact:\n got %s\nwant %s", got, want)
	}
}

func TestRedactorOverlaps(t *testing.T) {
	r := NewRedactor("abc", "abcdef", "", "x")
	tests := []struct{ in, want string }{
		{"abcdef", "<redacted>"},
		{"abc abcdef", "<redacted> <redacted>"},
		{"x marks", "x marks"}, // one-character values are not redacted
		{"", ""},
	}
	for _, tc := range tests {
		if got := r.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var nilR *Redactor
	if nilR.Redact("abc") != "abc" {
		t.Error("nil Redactor must pass text through")
	}
}

func TestToYAMLRoundTrip(t *testing.T) {
	const doc = `name: rt
workdir:
  url: https://github.com/org/repo
  ref: main
num_nodes: 2
resources:
  cpus: 4+
envs:
  A: "1"
file_mounts:
  /d:
    name: bkt
    source: ./x
    mode: mount_cached
    type: dataset_ro
  /e: s3://b/k
volumes:
  /v: vol
setup: pip install x
run: python x.py
`
	tk := mustLoad(t, doc, LoadOptions{})
	y, err := tk.ToYAML()
	if err != nil {
		t.Fatal(err)
	}
	tk2 := mustLoad(t, string(y), LoadOptions{})
	y2, err := tk2.ToYAML()
	if err != nil {
		t.Fatal(err)
	}
	if string(y) != string(y2) {
		t.Errorf("dump is not stable:\n%s\n---\n%s", y, y2)
	}
	if tk2.NumNodes != 2 || tk2.Workdir.URL != "https://github.com/org/repo" || tk2.FileMounts["/d"].Storage.Mode != "MOUNT_CACHED" {
		t.Errorf("round trip lost data:\n%s", y)
	}
}

func TestStructuralRules(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"docker login split", "envs:\n  SKYPILOT_DOCKER_USERNAME: u\nsecrets:\n  SKYPILOT_DOCKER_PASSWORD: p\n  SKYPILOT_DOCKER_SERVER: s\nrun: x\n", "same section"},
		{"cloud destination", "file_mounts:\n  s3://b/x: ./a\nrun: x\n", "cannot be cloud storage"},
		{"workdir destination", "workdir: .\nfile_mounts:\n  ~/sky_workdir: ./a\nrun: x\n", "~/sky_workdir"},
		{"bucket prefix in name", "file_mounts:\n  /d:\n    name: s3://b\nrun: x\n", "Prefix detected"},
		{"local source without name", "file_mounts:\n  /d:\n    source: ./a\nrun: x\n", "Storage name must be specified if the source is local"},
		{"duplicate basenames", "file_mounts:\n  /d:\n    name: b\n    source: [./a/f, ./b/f]\nrun: x\n", "unique base names"},
		{"volume without name or size", "volumes:\n  /v:\n    labels: {a: b}\nrun: x\n", `Either "size"`},
		{"volume too small", "volumes:\n  /v:\n    size: 512Mi\nrun: x\n", "at least 1Gi"},
		{"relative volume path", "volumes:\n  data: vol\nrun: x\n", "must be absolute"},
		{"max below min", "service:\n  replica_policy:\n    min_replicas: 3\n    max_replicas: 1\nrun: x\n", "greater than or equal"},
		{"qps without max", "service:\n  replica_policy:\n    min_replicas: 1\n    target_qps_per_replica: 2\nrun: x\n", "max_replicas must be set"},
		{"accel qps needs policy", "service:\n  replica_policy:\n    min_replicas: 1\n    max_replicas: 2\n    target_qps_per_replica: {H100: 5}\nrun: x\n", "instance_aware_least_load"},
		{"bad post_data", "service:\n  readiness_probe:\n    path: /\n    post_data: '{bad'\n  replicas: 1\nrun: x\n", "Invalid JSON"},
		{"pool needs workers", "pool:\n  max_workers: 3\nsetup: x\n", "One of workers"},
		{"pool ports", "pool:\n  workers: 1\nresources:\n  ports: 8080\nsetup: x\n", "Cannot specify ports in a pool"},
		{"pool min > max", "pool:\n  min_workers: 3\n  max_workers: 1\nsetup: x\n", "greater than or equal"},
		{"mount config wrong mode", "file_mounts:\n  /d:\n    name: b\n    mode: COPY\n    config:\n      mount: {read_only: true}\nrun: x\n", "only valid with mode: MOUNT"},
		{"string doc", "just a string\n", "YAML loaded as str"},
		{"list doc", "- a\n- b\n", "must be a mapping"},
		{"syntax error", "run: [unclosed\n", "invalid YAML"},
		{"non-utf8", "run: \xff\xfe\n", "not a valid UTF-8"},
		{"unknown nested field", "service:\n  replicas: 1\n  readiness_prob: /\nrun: x\n", `did you mean "readiness_probe"`},
		{"job header only parallel", "name: g\nexecution: parallel\n", "needs at least one job"},
		{"termination delay unknown job", "name: g\nexecution: parallel\ntermination_delay:\n  default: 5s\n  nope: 1m\n---\nname: a\nrun: x\n", "not a job of this group"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadBytes("t.yaml", []byte(tc.doc), LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("want *Error, got %T", err)
			}
		})
	}
}

func TestMultiDocument(t *testing.T) {
	t.Run("pipeline with header names tasks", func(t *testing.T) {
		dag, err := LoadBytes("p.yaml", []byte("name: pipe\n---\nrun: a\n---\nname: second\nrun: b\n"), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if dag.Name != "pipe" || dag.Execution != Serial || len(dag.Tasks) != 2 || dag.Tasks[0].Name != "pipe-0" || dag.Tasks[1].Name != "second" {
			t.Errorf("dag = %+v, tasks %q %q", dag, dag.Tasks[0].Name, dag.Tasks[1].Name)
		}
		if !dag.IsPipeline() {
			t.Error("IsPipeline false")
		}
	})
	t.Run("header alone is one empty task", func(t *testing.T) {
		dag, err := LoadBytes("p.yaml", []byte("name: only\n"), LoadOptions{})
		if err != nil || len(dag.Tasks) != 1 || dag.Tasks[0].Name != "only" {
			t.Fatalf("dag=%+v err=%v", dag, err)
		}
	})
	t.Run("job group", func(t *testing.T) {
		doc := "name: grp\nexecution: parallel\nprimary_tasks: [a]\ntermination_delay:\n  default: 30s\n  b: 2m\nextra: 1\n---\nname: a\nrun: x\n---\nname: b\nrun: y\n"
		dag, err := LoadBytes("g.yaml", []byte(doc), LoadOptions{Env: []string{"X=1"}})
		if err != nil {
			t.Fatal(err)
		}
		if !dag.IsJobGroup() || dag.Name != "grp" || len(dag.Tasks) != 2 || dag.PrimaryTasks[0] != "a" {
			t.Fatalf("dag = %+v", dag)
		}
		if dag.TerminationDelay.For("b").Minutes() != 2 || dag.TerminationDelay.For("a").Seconds() != 30 {
			t.Errorf("delays = %+v", dag.TerminationDelay)
		}
		if len(dag.Warnings) != 1 || !strings.Contains(dag.Warnings[0], "extra") {
			t.Errorf("warnings = %v", dag.Warnings)
		}
		for _, tk := range dag.Tasks {
			if tk.Envs["X"] != "1" {
				t.Errorf("--env not applied to job %s", tk.Name)
			}
		}
	})
	t.Run("leading empty document skipped", func(t *testing.T) {
		dag, err := LoadBytes("p.yaml", []byte("# comment\n---\nrun: a\n"), LoadOptions{})
		if err != nil || len(dag.Tasks) != 1 {
			t.Fatalf("dag=%+v err=%v", dag, err)
		}
	})
}

func TestParseDelay(t *testing.T) {
	tests := []struct {
		in   any
		want string
		ok   bool
	}{
		{"30", "30s", true}, {45, "45s", true}, {"5m", "5m0s", true}, {"2h", "2h0m0s", true},
		{"1d", "24h0m0s", true}, {"1w", "168h0m0s", true}, {"10 minutes", "", false}, {"-5", "", false}, {1.5, "", false},
	}
	for _, tc := range tests {
		d, err := ParseDelay(tc.in)
		if (err == nil) != tc.ok || (tc.ok && d.String() != tc.want) {
			t.Errorf("ParseDelay(%v) = %v, %v; want %s ok=%v", tc.in, d, err, tc.want, tc.ok)
		}
	}
}

func TestValidateForLaunchDisk(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc, want string
	}{
		{"ok", "workdir: " + dir + "\nfile_mounts:\n  /f: " + file + "\n  /b: s3://x/y\nrun: x\n", ""},
		{"missing workdir", "workdir: " + dir + "/nope\nrun: x\n", "Workdir must be a valid directory"},
		{"missing source", "file_mounts:\n  /f: " + dir + "/nope\nrun: x\n", "does not exist locally"},
		{"source slash", "file_mounts:\n  /f: " + dir + "/\nrun: x\n", "cannot end with a slash"},
		{"bucket file source", "file_mounts:\n  /f:\n    name: b\n    source: " + file + "\nrun: x\n", "is a file"},
		{"bad name", "name: -bad\nrun: x\n", "invalid task name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateForLaunch(mustLoad(t, tc.doc, LoadOptions{}))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "t.yaml:") {
				t.Fatalf("want %q with location, got %v", tc.want, err)
			}
		})
	}
}

func TestVolumeSpecRules(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"name: v\ntype: k8s-pvc\nsize: 10Gi\n", ""},
		{"name: v\ntype: k8s-hostpath\nconfig:\n  host_path: /mnt/x\n", ""},
		{"name: v\ntype: K8S-PVC\n", "expected one of"},
		{"type: k8s-pvc\n", "missing required field `name`"},
		{"name: v\ntype: k8s-pvc\nsize: 0.5Gi\n", "at least 1Gi"},
		{"name: v\ntype: k8s-pvc\ninfra: aws/*\n", "infra"},
		{"name: v\ntype: k8s-hostpath\n", "host_path"},
		{"name: v\ntype: k8s-pvc\nconfig:\n  access_mode: RWX\n", "ReadWriteMany"},
		{"name: v\ntype: runpod-network-volume\ninfra: runpod/US/ca-1\nsize: 5\n", "10GB"},
	}
	for _, tc := range tests {
		_, err := LoadVolumeSpecBytes("v.yaml", []byte(tc.doc))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.doc, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want %q, got %v", tc.doc, tc.want, err)
		}
	}
}

func TestAliasesAndMerge(t *testing.T) {
	doc := "resources: &r\n  cpus: 2\nenvs:\n  <<: {A: base, B: base}\n  B: own\nfile_mounts:\n  /x: &src ./a\n  /y: *src\nrun: x\n"
	tk := mustLoad(t, doc, LoadOptions{})
	if tk.Envs["A"] != "base" || tk.Envs["B"] != "own" || tk.FileMounts["/y"].Source != "./a" {
		t.Errorf("envs %v mounts %v", tk.Envs, tk.FileMounts["/y"])
	}
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
	if _, err := LoadBytes("bomb.yaml", []byte(bomb), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("alias bomb: %v", err)
	}
}

// A count the loader cannot represent exactly must be an error at its line,
// never a task quietly left on the default single node.
func TestNumNodesOutOfRangeOrNotInteger(t *testing.T) {
	tests := []struct {
		value, want string
	}{
		{"99999999999999999999", "out of range: must be at most 2147483647. Got: 99999999999999999999"},
		{"9223372036854775807", "out of range: must be at most 2147483647. Got: 9223372036854775807"},
		{"2147483648", "out of range: must be at most 2147483647. Got: 2147483648"},
		{"1e3", "without a decimal point or exponent. Got: 1e3"},
		{"1000.0", "without a decimal point or exponent. Got: 1000.0"},
		{"-1e3", "Got: -1e3"},
		{"1.5", "expected an integer"},
		{"0", "positive int. Got: 0"},
	}
	for _, tc := range tests {
		src := "name: n\n\nnum_nodes: " + tc.value + "\nrun: echo\n"
		_, err := LoadBytes("t.yaml", []byte(src), LoadOptions{})
		if err == nil {
			t.Errorf("num_nodes: %s loaded without error", tc.value)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "t.yaml:3:") || !strings.Contains(msg, tc.want) {
			t.Errorf("num_nodes: %s: error %q, want t.yaml:3:... %s", tc.value, msg, tc.want)
		}
	}
	d, err := LoadBytes("t.yaml", []byte("num_nodes: 2147483647\nrun: echo\n"), LoadOptions{})
	if err != nil || d.Tasks[0].NumNodes != MaxNumNodes {
		t.Fatalf("the largest count: %v, %+v", err, d)
	}
	d.Tasks[0].NumNodes = MaxNumNodes + 1
	if err := ValidateForLaunch(d.Tasks[0]); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("ValidateForLaunch of an override past the bound: %v", err)
	}
}

// TestCheckRunnableVolumes: a named volume goes through (the backend
// checks it against the cluster's infra) and into the spec, as does an
// ephemeral one (a k8s-pvc made with the cluster); an ephemeral volume of
// another type is refused at its line when the YAML loads.
func TestCheckRunnableVolumes(t *testing.T) {
	tk := mustLoad(t, "run: echo hi\nvolumes:\n  /data: myvol\n  ~/sub:\n    name: other\n    sub_path: a/b\n", LoadOptions{})
	if err := CheckRunnable(tk); err != nil {
		t.Fatalf("CheckRunnable of named volumes = %v", err)
	}
	spec, err := Spec(tk)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.VolumeMount{{Path: "/data", Name: "myvol"}, {Path: "~/sub", Name: "other", SubPath: "a/b"}}
	if !reflect.DeepEqual(spec.Volumes, want) {
		t.Errorf("spec volumes = %+v, want %+v", spec.Volumes, want)
	}
	eph := mustLoad(t, "run: echo hi\nvolumes:\n  /scratch:\n    size: 10Gi\n    labels: {team: ml}\n    config: {access_mode: ReadWriteMany}\n", LoadOptions{})
	if err := CheckRunnable(eph); err != nil {
		t.Fatalf("CheckRunnable of an ephemeral volume = %v", err)
	}
	spec, err = Spec(eph)
	if err != nil {
		t.Fatal(err)
	}
	wantEph := []api.VolumeMount{{Path: "/scratch", Ephemeral: &api.EphemeralVolume{SizeGi: 10,
		Labels: map[string]string{"team": "ml"}, Config: map[string]any{"access_mode": "ReadWriteMany"}}}}
	if !reflect.DeepEqual(spec.Volumes, wantEph) {
		t.Errorf("ephemeral spec volumes = %+v, want %+v", spec.Volumes, wantEph)
	}
	_, err = LoadBytes("t.yaml", []byte("run: echo hi\nvolumes:\n  /scratch:\n    size: 10Gi\n    type: host-dir\n"), LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "t.yaml:5:") || !strings.Contains(err.Error(), "k8s-pvc") {
		t.Fatalf("load of an ephemeral host-dir volume = %v, want the file:line and the refusal", err)
	}
	if err := CheckRunnable(mustLoad(t, "run: echo hi\n", LoadOptions{})); err != nil {
		t.Errorf("a task without volumes: %v", err)
	}
}

// TestWaitForSchedulingTimeout: job.wait_for_scheduling_timeout takes a
// duration or seconds, survives a dump, and a bad value or an unknown
// job key is refused at its line.
func TestWaitForSchedulingTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"2h": 2 * time.Hour, "90s": 90 * time.Second, "600": 10 * time.Minute} {
		dag, err := LoadBytes("t.yaml", []byte("job:\n  wait_for_scheduling_timeout: "+in+"\nrun: echo\n"), LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := dag.Tasks[0].WaitForSchedulingTimeout; got != want {
			t.Errorf("wait_for_scheduling_timeout %s = %s, want %s", in, got, want)
		}
		out, err := dag.Tasks[0].ToYAML()
		if err != nil {
			t.Fatal(err)
		}
		again, err := LoadBytes("dump.yaml", out, LoadOptions{})
		if err != nil || again.Tasks[0].WaitForSchedulingTimeout != want {
			t.Errorf("dump of %s does not load back to the same timeout: %v\n%s", in, err, out)
		}
	}
	for doc, want := range map[string]string{
		"run: echo\njob:\n  wait_for_scheduling_timeout: soon\n": "t.yaml:3",
		"run: echo\njob:\n  max_wait: 1h\n":                      "t.yaml:3",
	} {
		_, err := LoadBytes("t.yaml", []byte(doc), LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one at %s", doc, err, want)
		}
	}
}
