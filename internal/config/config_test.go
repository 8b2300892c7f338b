package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/fielderr"
	"github.com/skygo/skygo/internal/testutil"
)

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// clearEnv makes sure the developer's own config variables never leak in.
func clearEnv(t *testing.T) {
	for _, k := range []string{EnvGlobalConfig, EnvProjectConfig, EnvConfig, EnvDBURI, EnvCatalogDir} {
		t.Setenv(k, "")
	}
}

func TestLoadPrecedence(t *testing.T) {
	const user = "kubernetes:\n  provision_timeout: 10\n  namespace: user-ns\n  allowed_contexts: [a, b]\njobs:\n  controller:\n    resources:\n      cpus: 2\n"
	const project = "kubernetes:\n  provision_timeout: 20\n  allowed_contexts: [c]\n"
	cases := []struct {
		name    string
		project bool
		cli     []string
		task    map[string]any
		path    string
		want    any
	}{
		{name: "user only", path: "kubernetes.provision_timeout", want: 10},
		{name: "project over user", project: true, path: "kubernetes.provision_timeout", want: 20},
		{name: "project keeps untouched user keys", project: true, path: "kubernetes.namespace", want: "user-ns"},
		{name: "lists replace, not append", project: true, path: "kubernetes.allowed_contexts", want: []any{"c"}},
		{name: "cli over project", project: true, cli: []string{"kubernetes.provision_timeout=30"}, path: "kubernetes.provision_timeout", want: 30},
		{name: "cli value parsed as yaml list", cli: []string{"kubernetes.allowed_contexts=[x, y]"}, path: "kubernetes.allowed_contexts", want: []any{"x", "y"}},
		{name: "cli deep key keeps siblings", cli: []string{"jobs.controller.resources.memory=8"}, path: "jobs.controller.resources", want: map[string]any{"cpus": 2, "memory": 8}},
		{name: "later cli wins", cli: []string{"kubernetes.provision_timeout=30", "kubernetes.provision_timeout=40"}, path: "kubernetes.provision_timeout", want: 40},
		{name: "task over cli", project: true, cli: []string{"kubernetes.provision_timeout=30"},
			task: map[string]any{"kubernetes": map[string]any{"provision_timeout": 50}}, path: "kubernetes.provision_timeout", want: 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			home, cwd := t.TempDir(), t.TempDir()
			writeFile(t, filepath.Join(home, ".sky", "config.yaml"), user)
			if tc.project {
				writeFile(t, filepath.Join(cwd, ".sky.yaml"), project)
			}
			cfg, err := Load(LoadOptions{Home: home, Cwd: cwd, CLI: tc.cli, TaskConfig: tc.task})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := cfg.Get(tc.path)
			if !ok || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Get(%q) = %#v, %v; want %#v", tc.path, got, ok, tc.want)
			}
		})
	}
}

func TestLoadEnvFiles(t *testing.T) {
	clearEnv(t)
	home, cwd := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(home, ".sky", "config.yaml"), "db: from-home\n")
	writeFile(t, filepath.Join(cwd, ".sky.yaml"), "active_workspace: default\n")
	alt := filepath.Join(t.TempDir(), "alt.yaml")
	writeFile(t, alt, "db: from-global-env\n")

	t.Setenv(EnvGlobalConfig, alt)
	cfg, err := Load(LoadOptions{Home: home, Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.GetString("db", ""); got != "from-global-env" {
		t.Fatalf("db = %q, want the file named by %s", got, EnvGlobalConfig)
	}
	if got := cfg.Sources(); len(got) != 2 || got[0] != alt {
		t.Fatalf("sources = %v", got)
	}

	t.Setenv(EnvGlobalConfig, filepath.Join(home, "missing.yaml"))
	if _, err := Load(LoadOptions{Home: home, Cwd: cwd}); err == nil || !strings.Contains(err.Error(), EnvGlobalConfig) {
		t.Fatalf("missing $%s file: err = %v, want it to name the variable", EnvGlobalConfig, err)
	}

	t.Setenv(EnvGlobalConfig, "")
	t.Setenv(EnvConfig, alt) // internal: this file alone, project ignored
	cfg, err = Load(LoadOptions{Home: home, Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Sources(); len(got) != 1 || got[0] != alt {
		t.Fatalf("with %s sources = %v, want only %s", EnvConfig, got, alt)
	}
}

func TestLoadNoFiles(t *testing.T) {
	clearEnv(t)
	cfg, err := Load(LoadOptions{Home: t.TempDir(), Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Map()) != 0 || cfg.ActiveWorkspace() != "default" {
		t.Fatalf("empty load = %v", cfg.Map())
	}
}

func TestGetters(t *testing.T) {
	cfg := New(map[string]any{
		"kubernetes": map[string]any{
			"allowed_contexts":  []any{"a", "b"},
			"provision_timeout": 600,
			"ports":             "ingress",
			"apt_mirrors":       []any{},
			"context_configs":   map[string]any{"gke.prod": map[string]any{"namespace": "prod"}},
			"namespace":         "team",
		},
		"jobs":           map[string]any{"controller": map[string]any{"high_availability": true, "resources": map[string]any{"cpus": "4+"}}},
		"docker":         map[string]any{"run_options": "--ipc=host"},
		"api_server":     map[string]any{"cluster_event_retention_hours": 24.0},
		"allowed_clouds": []any{"aws", 5},
	})
	cases := []struct {
		name string
		got  any
		want any
	}{
		{"string", cfg.GetString("kubernetes.ports", "x"), "ingress"},
		{"string default when absent", cfg.GetString("kubernetes.networking", "portforward"), "portforward"},
		{"string default when not a string", cfg.GetString("kubernetes.provision_timeout", "d"), "d"},
		{"int", cfg.GetInt("kubernetes.provision_timeout", 0), 600},
		{"whole float as int", cfg.GetInt("api_server.cluster_event_retention_hours", 0), 24},
		{"int default", cfg.GetInt("kubernetes.nope", 7), 7},
		{"bool", cfg.GetBool("jobs.controller.high_availability", false), true},
		{"bool default", cfg.GetBool("jobs.controller.consolidation_mode", false), false},
		{"slice", cfg.GetStringSlice("kubernetes.allowed_contexts", nil), []string{"a", "b"}},
		{"slice from lone string", cfg.GetStringSlice("docker.run_options", nil), []string{"--ipc=host"}},
		{"empty slice is not default", cfg.GetStringSlice("kubernetes.apt_mirrors", []string{"d"}), []string{}},
		{"slice default", cfg.GetStringSlice("ssh.allowed_node_pools", []string{"d"}), []string{"d"}},
		{"scalars printed", cfg.GetStringSlice("allowed_clouds", nil), []string{"aws", "5"}},
		{"nested map", mustGet(cfg, "jobs.controller.resources"), map[string]any{"cpus": "4+"}},
		{"through a scalar is absent", present(cfg, "kubernetes.ports.x"), false},
		{"empty path", present(cfg, ""), false},
	}
	for _, tc := range cases {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.name, tc.got, tc.want)
		}
	}
	// Keys containing dots need Lookup / RegionValue.
	if v, _ := cfg.RegionValue("kubernetes", "gke.prod", "namespace"); v != "prod" {
		t.Errorf("RegionValue per-context = %v, want prod", v)
	}
	if v, _ := cfg.RegionValue("kubernetes", "other", "namespace"); v != "team" {
		t.Errorf("RegionValue fallback = %v, want team", v)
	}
	var nilCfg *Config
	if nilCfg.GetString("a", "d") != "d" || len(nilCfg.Map()) != 0 {
		t.Error("nil *Config must behave as empty")
	}
}

func mustGet(c *Config, p string) any  { v, _ := c.Get(p); return v }
func present(c *Config, p string) bool { _, ok := c.Get(p); return ok }

func TestParseCLIOverride(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "over.yaml")
	writeFile(t, file, "kubernetes:\n  namespace: from-file\n")
	cases := []struct {
		in      string
		want    map[string]any
		wantErr string
	}{
		{in: "jobs.controller.resources.cpus=4", want: map[string]any{"jobs": map[string]any{"controller": map[string]any{"resources": map[string]any{"cpus": 4}}}}},
		{in: "kubernetes.allowed_contexts=[a, b]", want: map[string]any{"kubernetes": map[string]any{"allowed_contexts": []any{"a", "b"}}}},
		{in: "kubernetes.allowed_contexts=all", want: map[string]any{"kubernetes": map[string]any{"allowed_contexts": "all"}}},
		{in: "aws.vpc_name=null", want: map[string]any{"aws": map[string]any{"vpc_name": nil}}},
		{in: "nvidia_gpus.disable_ecc=true", want: map[string]any{"nvidia_gpus": map[string]any{"disable_ecc": true}}},
		{in: "docker.run_options=--ipc=host", want: map[string]any{"docker": map[string]any{"run_options": "--ipc=host"}}},
		{in: file, want: map[string]any{"kubernetes": map[string]any{"namespace": "from-file"}}},
		{in: "=4", wantErr: "key before = is empty"},
		{in: "a.b=", wantErr: "value after = is empty"},
		{in: "a..b=1", wantErr: "empty part"},
		{in: "nosuchfile.yaml", wantErr: "no such file"},
		{in: "", wantErr: "empty value"},
		{in: "kubernetes.ports=nodeport", wantErr: `kubernetes.ports: must be one of "loadbalancer", "ingress", "podip"`},
		{in: "kubernetse.ports=ingress", wantErr: `did you mean "kubernetes"`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCLIOverride(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestCLIFileMustBeAlone(t *testing.T) {
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "over.yaml")
	writeFile(t, file, "db: x\n")
	_, err := Load(LoadOptions{Home: t.TempDir(), Cwd: t.TempDir(), CLI: []string{file, "a.b=1"}})
	if err == nil || !strings.Contains(err.Error(), "only --config") {
		t.Fatalf("err = %v", err)
	}
}

func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name       string
		body       string
		line, col  int
		path, want string
	}{
		{"unknown top-level key", "kubernetes:\n  namespace: x\nalowed_clouds: [aws]\n", 3, 1, "alowed_clouds", `unknown field "alowed_clouds"; did you mean "allowed_clouds"?`},
		{"unknown nested key", "jobs:\n  controller:\n    high_availabilty: true\n", 3, 5, "jobs.controller.high_availabilty", `did you mean "high_availability"`},
		{"bad enum", "kubernetes:\n  ports: nodeport\n", 2, 10, "kubernetes.ports", "must be one of"},
		{"wrong type", "provision:\n  ssh_timeout: soon\n", 2, 16, "provision.ssh_timeout", "expected integer, got string"},
		{"below minimum", "provision:\n  ssh_timeout: 0\n", 2, 16, "provision.ssh_timeout", "minimum"},
		{"list item", "allowed_clouds:\n  - aws\n  - mars\n", 3, 5, "allowed_clouds[1]", "does not have the expected form"},
		{"bad bucket", "jobs:\n  bucket: ftp://x\n", 2, 11, "jobs.bucket", "does not have the expected form"},
		{"controller ports", "serve:\n  controller:\n    resources:\n      ports: 8080\n", 4, 7, "serve.controller.resources.ports", "not allowed"},
		{"labels and instance_tags", "aws:\n  labels: {a: b}\n  instance_tags: {a: b}\n", 2, 3, "aws", "labels and instance_tags"},
		{"required field", "logs:\n  gcp: {project_id: p}\n", 2, 3, "logs", "missing required field(s): store"},
		{"duplicate key", "db: a\ndb: b\n", 2, 0, "", "duplicate key"},
		{"syntax error", "db: a\n  b: c\n", 2, 0, "", "not valid YAML"},
		{"not a mapping", "- a\n- b\n", 1, 1, "", "must be a mapping"},
		{"custom_metadata name", "kubernetes:\n  custom_metadata:\n    name: x\n", 3, 5, "kubernetes.custom_metadata.name", "not allowed"},
		{"workspace name", "workspaces:\n  Bad_Name: {}\n", 2, 3, "workspaces.Bad_Name", `"Bad_Name" is not an allowed name here (names must match`},
		{"workspace unknown cloud key", "workspaces:\n  team:\n    aws:\n      region: x\n", 4, 7, "workspaces.team.aws.region", "unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			home := t.TempDir()
			path := filepath.Join(home, ".sky", "config.yaml")
			writeFile(t, path, tc.body)
			_, err := Load(LoadOptions{Home: home, Cwd: t.TempDir()})
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v (%T), want *ValidationError", err, err)
			}
			if ve.Source != path || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %q; want source %s and %q", err, path, tc.want)
			}
			if tc.line != 0 && (ve.Line != tc.line || (tc.col != 0 && ve.Column != tc.col)) {
				t.Errorf("position = %d:%d, want %d:%d (%v)", ve.Line, ve.Column, tc.line, tc.col, err)
			}
			if tc.path != "" && ve.Path != tc.path {
				t.Errorf("path = %q, want %q (%v)", ve.Path, tc.path, err)
			}
		})
	}
}

func TestValidConfigs(t *testing.T) {
	cases := map[string]string{
		"remote identity globs": "aws:\n  remote_identity:\n    - my-*: role-a\n    - \"*\": LOCAL_CREDENTIALS\n",
		"k8s everything":        "kubernetes:\n  allowed_contexts: all\n  ports: ingress\n  enable_docker: {mode: BUILD, cache_volume: v}\n  set_pod_resource_limits: 1.5\n  dws: {enabled: true, max_run_duration: 10h}\n  context_configs:\n    gke.ctx:\n      namespace: ns\n      provision_timeout: 100\n",
		"null vpc":              "gcp:\n  vpc_name: null\n  managed_instance_group: {run_duration: 3600}\n",
		"slurm":                 "slurm:\n  allowed_clusters: all\n  sbatch_options: {time: '1:00:00', exclusive: null, nodes: 2}\n  cluster_configs:\n    c1:\n      partition_configs:\n        gpu: {pricing: {cpu: 0.1}}\n",
		"workspaces":            "active_workspace: team\nworkspaces:\n  team:\n    private: true\n    aws: {profile: p}\n    lambda: {disabled: true}\n    kubernetes: {allowed_contexts: [a]}\n",
		"plugins free-form":     "plugins:\n  anything: {goes: [1, 2]}\n",
		"empty file":            "",
		"comments only":         "# nothing\n",
		"catalog dir":           "catalog:\n  dir: /opt/catalogs\n",
		"autostop forms":        "jobs:\n  controller:\n    autostop: {idle_minutes: 5, down: true, wait_for: JOBS}\nserve:\n  controller:\n    autostop: false\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			home := t.TempDir()
			writeFile(t, filepath.Join(home, ".sky", "config.yaml"), body)
			if _, err := Load(LoadOptions{Home: home, Cwd: t.TempDir()}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestActiveWorkspaceMustExist(t *testing.T) {
	clearEnv(t)
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".sky", "config.yaml"), "active_workspace: ghost\n")
	_, err := Load(LoadOptions{Home: home, Cwd: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "Workspace ghost does not exist") {
		t.Fatalf("err = %v", err)
	}
}

// validateConfigFiles validates every config file in dir as a --config
// file and returns how many there were.
func validateConfigFiles(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no config files in %s: %v", dir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			clearEnv(t)
			if _, err := ParseCLIOverride(f); err != nil {
				t.Fatal(err)
			}
		})
	}
	return len(files)
}

// The project's example configs (testdata/configs) validate; the broken
// ones are rejected with the line of the mistake.
func TestExampleConfigs(t *testing.T) {
	validateConfigFiles(t, testutil.Testdata("configs"))
	for file, want := range map[string]string{
		"typo-in-section.yaml": `line 3, column 3: kubernetes.provison_timeout: unknown field "provison_timeout"`,
		"wrong-type.yaml":      "line 1, column 17: allowed_clouds",
	} {
		t.Run("invalid/"+file, func(t *testing.T) {
			clearEnv(t)
			_, err := ParseCLIOverride(testutil.Testdata("configs", "invalid", file))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want it to contain %q", err, want)
			}
		})
	}
}

func TestValidateTaskConfig(t *testing.T) {
	cases := []struct {
		name     string
		cfg      any
		wantPath string
		wantMsg  string
	}{
		{name: "nil is fine", cfg: nil},
		{name: "overridable keys", cfg: map[string]any{
			"kubernetes":       map[string]any{"pod_config": map[string]any{"spec": map[string]any{}}, "provision_timeout": 900, "enable_docker": "BUILD"},
			"docker":           map[string]any{"run_options": []any{"--ipc=host"}},
			"gcp":              map[string]any{"managed_instance_group": map[string]any{"run_duration": 36000}},
			"active_workspace": "team",
			"hooks":            []any{map[string]any{"run": "echo bye", "events": []any{"stop"}}},
		}},
		{name: "allowed_clouds not overridable", cfg: map[string]any{"allowed_clouds": []any{"aws"}}, wantPath: "allowed_clouds", wantMsg: "allowed keys: active_workspace, azure.remote_identity"},
		{name: "aws not overridable", cfg: map[string]any{"aws": map[string]any{"vpc_name": "x"}}, wantPath: "aws", wantMsg: "not overridable"},
		{name: "context_configs not overridable", cfg: map[string]any{"kubernetes": map[string]any{"context_configs": map[string]any{}}}, wantPath: "kubernetes.context_configs", wantMsg: "cannot be set in a task's config"},
		{name: "typo suggests", cfg: map[string]any{"kubernetes": map[string]any{"pod_confg": map[string]any{}}}, wantPath: "kubernetes.pod_confg", wantMsg: `did you mean "kubernetes.pod_config"`},
		{name: "value type checked", cfg: map[string]any{"kubernetes": map[string]any{"provision_timeout": "soon"}}, wantPath: "kubernetes.provision_timeout", wantMsg: "expected integer"},
		{name: "section must be mapping", cfg: map[string]any{"gcp": "x"}, wantPath: "gcp", wantMsg: "must be a mapping"},
		{name: "hook without run", cfg: map[string]any{"hooks": []any{map[string]any{"events": []any{"down"}}}}, wantPath: "hooks[0]", wantMsg: "run"},
		{name: "hook bad event", cfg: map[string]any{"hooks": []any{map[string]any{"run": "x", "events": []any{"reboot"}}}}, wantPath: "hooks[0].events[0]", wantMsg: "must be one of"},
		{name: "not a mapping", cfg: []any{"a"}, wantPath: "", wantMsg: "must be a mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTaskConfig(tc.cfg)
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *fielderr.Error
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want *fielderr.Error", err, err)
			}
			if fe.Path != tc.wantPath || !strings.Contains(fe.Msg, tc.wantMsg) {
				t.Fatalf("got path %q msg %q; want path %q msg containing %q", fe.Path, fe.Msg, tc.wantPath, tc.wantMsg)
			}
		})
	}
}

// checkTaskConfigs validates the config: section of every task YAML in
// dir that has one (single-document files; pipelines are the task
// loader's business) and returns how many it checked.
func checkTaskConfigs(t *testing.T, dir string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), "\nconfig:") && !strings.HasPrefix(string(data), "config:") {
			continue
		}
		d, err := parseYAML(data)
		if err != nil {
			continue
		}
		if m, ok := d.value.(map[string]any); ok && m["config"] != nil {
			checked++
			if err := ValidateTaskConfig(m["config"]); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	}
	return checked
}

// rejectTaskConfig wants the config: section of the task YAML at path
// rejected.
func rejectTaskConfig(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateTaskConfig(d.value.(map[string]any)["config"]); err == nil {
		t.Errorf("%s: a key that is not overridable must be rejected", filepath.Base(path))
	}
}

func TestTaskConfigExamples(t *testing.T) {
	rejectTaskConfig(t, testutil.Testdata("tasks", "invalid", "config-not-overridable.yaml"))
	if checkTaskConfigs(t, testutil.Testdata("tasks")) == 0 {
		t.Fatal("no example task has a config: section")
	}
}

// TestSkyPilotCorpus is the corpus compatibility suite for configs: every
// config file of the shared SkyPilot corpus validates, so do the config:
// sections of its tasks, and the authored non-overridable case is
// rejected. It is skipped, with one line, without ../shared.
func TestSkyPilotCorpus(t *testing.T) {
	dir := testutil.Shared(t, "corpus")
	t.Run("configs", func(t *testing.T) { validateConfigFiles(t, filepath.Join(dir, "configs")) })
	t.Run("task_configs", func(t *testing.T) {
		rejectTaskConfig(t, filepath.Join(dir, "invalid", "authored__config_key_not_overridable.yaml"))
		if checkTaskConfigs(t, filepath.Join(dir, "yamls")) == 0 {
			t.Fatal("no corpus task had a config: section")
		}
	})
}

func TestEnvHelpers(t *testing.T) {
	clearEnv(t)
	cfg := New(map[string]any{"db": "postgresql://cfg", "catalog": map[string]any{"dir": "~/cat"}})
	if got := cfg.DBConnectionURI(); got != "postgresql://cfg" {
		t.Errorf("DBConnectionURI = %q", got)
	}
	home := testutil.TempHome(t)
	if got := cfg.CatalogDir(); got != filepath.Join(home, "cat") {
		t.Errorf("CatalogDir = %q, want ~ expanded", got)
	}
	t.Setenv(EnvDBURI, "postgresql://env")
	t.Setenv(EnvCatalogDir, "/env/cat")
	if cfg.DBConnectionURI() != "postgresql://env" || cfg.CatalogDir() != "/env/cat" {
		t.Errorf("env must win: %q %q", cfg.DBConnectionURI(), cfg.CatalogDir())
	}
	var empty *Config
	if empty.DBConnectionURI() != "postgresql://env" {
		t.Error("nil config still reads the env")
	}
}

func TestHostileYAML(t *testing.T) {
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		laughs += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	if _, err := parseSource([]byte(laughs), "laughs.yaml"); err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"", "a: b", "kubernetes:\n  ports: x\n", "- 1", "a: &x {b: *x}", "workspaces: {A: {}}", "<<: {a: 1}", "? [a]\n: b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseSource([]byte(s), "fuzz.yaml") // must not panic
		_ = ValidateTaskConfig(map[string]any{"kubernetes": s})
	})
}
