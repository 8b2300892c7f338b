package infrakind_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/config/configschema"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/task"
)

// toy is an infrastructure that exists only in this file: registering it
// is the whole of adding it, and the tests below find it in `sky check`,
// the optimizer, the config schema and the resources parser, none of
// which was edited for it.
func init() {
	infrakind.Register(infrakind.Kind{
		Name: "toycloud", Display: "ToyCloud", Aliases: []string{"toy"}, Group: infrakind.OnPrem, Sized: true,
		Features: &infrakind.Features{Ports: true, FixedDisk: true},
		TaskKeys: []string{"flavor"},
		Schema: []byte(`{"type": "object", "additionalProperties": false,
			"properties": {"endpoint": {"$ref": "#/$defs/toy_url"}, "flavor": {"enum": ["small", "big"]}},
			"$defs": {"toy_url": {"type": "string", "pattern": "^https://"}}}`),
		WorkspaceSchema: []byte(`{"type": "object", "additionalProperties": false,
			"properties": {"endpoint": {"$ref": "#/$defs/toy_url"}, "disabled": {"type": "boolean"}}}`),
		Volumes: []infrakind.VolumeType{{Type: "toy-disk", Where: "on ToyCloud (infra: toy)",
			Table: "ToyCloud disks:", Columns: []infrakind.VolumeColumn{{Header: "FLAVOR", Field: "config.flavor"}}}},
		Check: func(e infrakind.CheckEnv) infrakind.CheckResult {
			if v, ok := e.Setting("toycloud.endpoint"); ok {
				return infrakind.CheckResult{Enabled: true, Reason: "endpoint " + v.(string) + " from the config"}
			}
			return infrakind.CheckResult{Reason: "set toycloud.endpoint in ~/.sky/config.yaml"}
		},
	})
	config.SetSchemaValidator(configschema.Validator{})
}

func TestToyInCheck(t *testing.T) {
	home := t.TempDir()
	cfg := config.New(map[string]any{"toycloud": map[string]any{"endpoint": "https://toy.example"}})
	res, err := check.Run(context.Background(), check.Options{Home: home, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var toy *check.Result
	for i, r := range res {
		names = append(names, r.Key)
		if r.Key == "toycloud" {
			toy = &res[i]
		}
	}
	if toy == nil {
		t.Fatalf("sky check does not report toycloud: %v", names)
	}
	if !toy.Enabled || toy.Infra != "ToyCloud" || toy.Reason != "endpoint https://toy.example from the config" {
		t.Errorf("toycloud result = %+v", *toy)
	}
	// On-premises kinds come after the clouds, the fallback last.
	if i := slices.Index(names, "toycloud"); i < slices.Index(names, "yotta") || names[len(names)-1] != "local" {
		t.Errorf("report order %v", names)
	}
	// Its alias names it, and without its setting it says what to do.
	res, err = check.Run(context.Background(), check.Options{Home: home, Infras: []string{"TOY"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Enabled || res[0].Reason != "set toycloud.endpoint in ~/.sky/config.yaml" {
		t.Errorf("sky check toy = %+v", res)
	}
}

// capacity is the toy plug-in's runtime half: one region with 16 CPUs.
type capacity struct{}

func (capacity) Name() string { return "toycloud" }
func (capacity) Feasible(_ context.Context, req optimizer.Request, _ int) ([]optimizer.Candidate, string) {
	return []optimizer.Candidate{{Region: "lab", VCPUs: 16, MemoryGiB: 64}}, ""
}

func TestToyInOptimizer(t *testing.T) {
	in := optimizer.Input{Enabled: []string{"toycloud"}, Capacity: []optimizer.CapacityInfra{capacity{}},
		Tasks: []optimizer.Task{{Name: "t", Options: []optimizer.Request{{Cloud: "toy"}}}}}
	plan, err := optimizer.Optimize(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if c := plan.Tasks[0].Chosen; c.Cloud != "toycloud" || c.Region != "lab" {
		t.Fatalf("chosen %+v", c)
	}
	var out bytes.Buffer
	if err := optimizer.WriteDryRun(&out, plan, optimizer.FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ToyCloud (lab)") {
		t.Errorf("dry run does not print the display name:\n%s", out.String())
	}
	// Its features are what it declared: no spot, no disk resizing.
	in.Tasks[0].Options[0].UseSpot = true
	if _, err := optimizer.Optimize(context.Background(), in); err == nil || !strings.Contains(err.Error(), "toycloud: spot instances are not supported") {
		t.Errorf("spot on toycloud: %v", err)
	}
}

func TestToyInConfig(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".sky", "config.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("allowed_clouds: [toycloud, aws]\ntoycloud:\n  endpoint: https://toy.example\n")
	cfg, err := config.Load(config.LoadOptions{Home: home, Cwd: home})
	if err != nil {
		t.Fatalf("a valid toycloud section: %v", err)
	}
	if got := cfg.GetString("toycloud.endpoint", ""); got != "https://toy.example" {
		t.Errorf("toycloud.endpoint = %q", got)
	}
	write("toycloud:\n  endpont: https://toy.example\n")
	_, err = config.Load(config.LoadOptions{Home: home, Cwd: home})
	if err == nil || !strings.Contains(err.Error(), "config.yaml): line 2") || !strings.Contains(err.Error(), `did you mean "endpoint"`) {
		t.Errorf("a misspelt toycloud key: %v", err)
	}
	// Its section in a workspace is its own schema's, sharing its
	// definitions; allowed_clouds takes its alias.
	write("allowed_clouds: [Toy]\nworkspaces:\n  team:\n    toycloud:\n      endpoint: https://team.toy.example\n")
	if _, err := config.Load(config.LoadOptions{Home: home, Cwd: home}); err != nil {
		t.Errorf("a workspace's toycloud section: %v", err)
	}
	write("workspaces:\n  team:\n    toycloud:\n      endpoint: http://team.toy.example\n")
	if _, err := config.Load(config.LoadOptions{Home: home, Cwd: home}); err == nil || !strings.Contains(err.Error(), "does not have the expected form") {
		t.Errorf("a workspace's toycloud endpoint against the kind's shared definition: %v", err)
	}
	write("workspaces:\n  team:\n    toycloud:\n      flavor: big\n")
	if _, err := config.Load(config.LoadOptions{Home: home, Cwd: home}); err == nil || !strings.Contains(err.Error(), `unknown field "flavor"`) {
		t.Errorf("a workspace's toycloud section with a key only the global one has: %v", err)
	}
	// A task may set the keys the kind lets it, and no other.
	if err := config.ValidateTaskConfig(map[string]any{"toycloud": map[string]any{"flavor": "big"}}); err != nil {
		t.Errorf("task config toycloud.flavor: %v", err)
	}
	if err := config.ValidateTaskConfig(map[string]any{"toycloud": map[string]any{"flavor": "huge"}}); err == nil {
		t.Error("task config toycloud.flavor: huge passed the schema")
	}
	if err := config.ValidateTaskConfig(map[string]any{"toycloud": map[string]any{"endpoint": "x"}}); err == nil {
		t.Error("a task set toycloud.endpoint, which the kind does not let it")
	}
}

func TestToyInResources(t *testing.T) {
	inf, err := resources.ParseInfra("Toy/lab")
	if err != nil || inf.Cloud != "toycloud" || inf.Region != "lab" {
		t.Fatalf("ParseInfra(Toy/lab) = %+v, %v", inf, err)
	}
	if q := resources.DefaultCPUs("toycloud", false); q.Value != 2 || q.AtLeast {
		t.Errorf("default cpus on a kind sized to the request = %+v", q)
	}
	if !slices.Contains(resources.Clouds(), "toycloud") {
		t.Error("resources.Clouds lacks toycloud")
	}
}

func TestToyInVolumes(t *testing.T) {
	if _, err := task.LoadVolumeSpecBytes("v.yaml", []byte("name: v\ntype: toy-disk\ninfra: toy/lab\n")); err != nil {
		t.Errorf("a toy-disk volume on toy: %v", err)
	}
	_, err := task.LoadVolumeSpecBytes("v.yaml", []byte("name: v\ntype: toy-disk\ninfra: aws\n"))
	if err == nil || !strings.Contains(err.Error(), `a toy-disk volume lives on ToyCloud (infra: toy), got "aws"`) {
		t.Errorf("a toy-disk volume on aws: %v", err)
	}
}

// `sky volumes ls` prints a table for the toy's volume type, after the
// types of the kinds before it in report order, with its columns.
func TestToyVolumeTable(t *testing.T) {
	var types []string
	var toy infrakind.VolumeType
	for _, v := range infrakind.VolumeTables() {
		types = append(types, v.Type)
		if v.Type == "toy-disk" {
			toy = v
		}
	}
	if toy.Table != "ToyCloud disks:" || len(toy.Columns) != 1 || toy.Columns[0].Header != "FLAVOR" {
		t.Fatalf("toy-disk's table = %+v (tables %v)", toy, types)
	}
	if i := slices.Index(types, "toy-disk"); i < 0 || slices.Index(types[i+1:], "toy-disk") >= 0 {
		t.Errorf("toy-disk listed %v", types)
	}
	if pvc, hd := slices.Index(types, "k8s-pvc"), slices.Index(types, "host-dir"); pvc < 0 || hd < 0 || pvc > hd {
		t.Errorf("the tables %v: a type of an earlier kind in report order comes first", types)
	}
}
