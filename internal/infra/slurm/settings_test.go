package slurm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
)

func layeredConfig() *config.Config {
	return config.New(map[string]any{
		"slurm": map[string]any{
			"provision_timeout": 300,
			"pricing":           map[string]any{"cpu": 0.5, "memory": 0.1, "accelerators": map[string]any{"H100": 4.0, "A100": 2}},
			"sbatch_options": map[string]any{
				"account":   "global-acct",
				"qos":       "normal",
				"exclusive": true,
				"comment":   "from global",
			},
			"gpu_partition_map": map[string]any{"H100": "global-gpu"},
			"cpu_partition":     "global-cpu",
			"cluster_configs": map[string]any{
				"mycluster": map[string]any{
					"workdir": "/shared/$USER",
					"tmpdir":  "/scratch",
					"pricing": map[string]any{"cpu": 0.25, "accelerators": map[string]any{"H100": 3.5}},
					"sbatch_options": map[string]any{
						"account":        "cluster-acct",
						"mail_type":      "END",
						"exclusive":      nil,    // null removes the global flag
						"job_name":       "mine", // protected
						"wait_all_nodes": 0,      // protected, `_` spelling
					},
					"gpu_partition_map": map[string]any{"H100": []any{"h100", "h100-long"}, "L4": "inference"},
					"cpu_partition":     "cpu",
					"partition_configs": map[string]any{
						"h100": map[string]any{
							"pricing":        map[string]any{"memory": 0.05},
							"sbatch_options": map[string]any{"qos": "high", "time": "1-00:00:00", "requeue": false},
						},
					},
				},
			},
		},
	})
}

func TestResolveSettingsLayers(t *testing.T) {
	task := map[string]any{"slurm": map[string]any{
		"sbatch_options": map[string]any{"t": "2:00:00", "comment": "my run", "nice": 10, "-p": "other"},
		"cpu_partition":  "debug",
	}}
	s, err := ResolveSettings(layeredConfig(), "mycluster", "h100", task)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"account":   "cluster-acct", // cluster beats global
		"qos":       "high",         // partition beats cluster
		"time":      "2:00:00",      // task `t` beats partition `time`
		"comment":   "my run",       // task beats global
		"mail-type": "END",          // `_` -> `-`
		"nice":      "10",
	}
	if !reflect.DeepEqual(s.SbatchOptions, want) {
		t.Fatalf("options\n got %v\nwant %v", s.SbatchOptions, want)
	}
	wantWarn := []string{
		"slurm sbatch_options: --job-name is set by SkyGo and cannot be overridden; ignoring it.",
		"slurm sbatch_options: --partition is set by SkyGo and cannot be overridden; ignoring it.",
		"slurm sbatch_options: --wait-all-nodes is set by SkyGo and cannot be overridden; ignoring it.",
	}
	if !reflect.DeepEqual(s.Warnings, wantWarn) {
		t.Fatalf("warnings\n got %q\nwant %q", s.Warnings, wantWarn)
	}
	if !reflect.DeepEqual(s.GPUPartitionMap, map[string][]string{"H100": {"h100", "h100-long"}, "L4": {"inference"}}) {
		t.Fatalf("gpu map (cluster replaces global) %v", s.GPUPartitionMap)
	}
	if !reflect.DeepEqual(s.CPUPartition, []string{"debug"}) {
		t.Fatalf("cpu partition (task wins) %v", s.CPUPartition)
	}
	wantPrice := infra.Pricing{CPU: 0.25, Memory: 0.05, Accelerators: map[string]float64{"H100": 3.5, "A100": 2}}
	if !reflect.DeepEqual(s.Pricing, wantPrice) {
		t.Fatalf("pricing (deep merge) %+v", s.Pricing)
	}
	if s.ProvisionTimeout == nil || *s.ProvisionTimeout != 300 {
		t.Fatalf("timeout %v", s.ProvisionTimeout)
	}
	if s.Workdir != "/shared/$USER" || s.Tmpdir != "/scratch" || s.Cluster != "mycluster" || s.Partition != "h100" {
		t.Fatalf("%+v", s)
	}
	if p, ok := s.GPUPartitions("h100"); !ok || !reflect.DeepEqual(p, []string{"h100", "h100-long"}) {
		t.Fatalf("case-insensitive map lookup: %v %v", p, ok)
	}
}

func TestResolveSettingsDefaults(t *testing.T) {
	s, err := ResolveSettings(config.New(nil), "other", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.SbatchOptions) != 0 || len(s.Warnings) != 0 || len(s.GPUPartitionMap) != 0 || s.CPUPartition != nil ||
		s.ProvisionTimeout != nil || s.Workdir != "" || s.Tmpdir != "" || s.Pricing.CPU != 0 {
		t.Fatalf("%+v", s)
	}
	// A cluster without cluster_configs inherits the global keys.
	s, err = ResolveSettings(layeredConfig(), "other", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.SbatchOptions["account"] != "global-acct" || s.SbatchOptions["exclusive"] != "" || !reflect.DeepEqual(s.CPUPartition, []string{"global-cpu"}) ||
		!reflect.DeepEqual(s.GPUPartitionMap["H100"], []string{"global-gpu"}) || s.Pricing.CPU != 0.5 {
		t.Fatalf("%+v", s)
	}
	if _, ok := s.SbatchOptions["exclusive"]; !ok {
		t.Fatal("true is a bare flag")
	}
}

func TestResolveSettingsErrors(t *testing.T) {
	cases := map[string]struct {
		task map[string]any
		want string
	}{
		"newline": {map[string]any{"slurm": map[string]any{"sbatch_options": map[string]any{"comment": "a\nb"}}}, "sbatch_options.comment: value must not contain a newline"},
		"time":    {map[string]any{"slurm": map[string]any{"sbatch_options": map[string]any{"time": "2h"}}}, `sbatch_options.time "2h" is not a Slurm time`},
		"list":    {map[string]any{"slurm": map[string]any{"sbatch_options": map[string]any{"x": []any{"a"}}}}, "sbatch_options.x: value must be a string, number, bool or null, got a list"},
		"shape":   {map[string]any{"slurm": map[string]any{"sbatch_options": "account=x"}}, "task config slurm.sbatch_options must be a mapping"},
	}
	for name, c := range cases {
		_, err := ResolveSettings(config.New(nil), "c", "p", c.task)
		var ce *provision.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) || ce.Where != "slurm/c/p" {
			t.Errorf("%s: got %v, want a ConfigError containing %q", name, err, c.want)
		}
	}
	for _, ok := range []string{"60", "30:00", "4:00:00", "1-12", "1-12:30", "7-00:00:00"} {
		task := map[string]any{"slurm": map[string]any{"sbatch_options": map[string]any{"time": ok}}}
		if _, err := ResolveSettings(config.New(nil), "c", "", task); err != nil {
			t.Errorf("time %s: %v", ok, err)
		}
	}
	task := map[string]any{"slurm": map[string]any{"sbatch_options": map[string]any{"time": 90}}}
	if s, err := ResolveSettings(config.New(nil), "c", "", task); err != nil || s.SbatchOptions["time"] != "90" {
		t.Errorf("numeric minutes: %v %v", s.SbatchOptions, err)
	}
}

func TestProvisionWait(t *testing.T) {
	var s Settings
	if d, f := s.ProvisionWait(false); d != 120*time.Second || f {
		t.Fatal(d, f)
	}
	if d, f := s.ProvisionWait(true); d != 24*time.Hour || f {
		t.Fatal(d, f)
	}
	n := 30
	s.ProvisionTimeout = &n
	if d, f := s.ProvisionWait(true); d != 30*time.Second || f {
		t.Fatal(d, f)
	}
	n = -1
	if _, f := s.ProvisionWait(false); !f {
		t.Fatal("negative waits forever")
	}
}

func TestAllowedClusters(t *testing.T) {
	hosts := []string{"alpha", "beta", "gamma"}
	for _, v := range []any{nil, "all"} {
		cfg := config.New(map[string]any{"slurm": map[string]any{"allowed_clusters": v}})
		if kept, warn := AllowedClusters(cfg, hosts); !reflect.DeepEqual(kept, hosts) || warn != nil {
			t.Fatalf("%v: %v %v", v, kept, warn)
		}
	}
	if kept, warn := AllowedClusters(config.New(nil), hosts); !reflect.DeepEqual(kept, hosts) || warn != nil {
		t.Fatalf("unset: %v %v", kept, warn)
	}
	cfg := config.New(map[string]any{"slurm": map[string]any{"allowed_clusters": []any{"gamma", "nope", "alpha", "gamma"}}})
	kept, warn := AllowedClusters(cfg, hosts)
	if !reflect.DeepEqual(kept, []string{"gamma", "alpha"}) {
		t.Fatalf("kept %v", kept)
	}
	if !reflect.DeepEqual(warn, []string{`slurm.allowed_clusters: "nope" is not a Host in ~/.slurm/config; ignoring it.`}) {
		t.Fatalf("warn %q", warn)
	}
	// The workspace's value wins once the caller views the config from it.
	ws := config.New(map[string]any{
		"slurm":      map[string]any{"allowed_clusters": []any{"alpha"}},
		"workspaces": map[string]any{"team": map[string]any{"slurm": map[string]any{"allowed_clusters": []any{"beta"}}}},
	}).ForWorkspace("team")
	if kept, _ := AllowedClusters(ws, hosts); !reflect.DeepEqual(kept, []string{"beta"}) {
		t.Fatalf("workspace: %v", kept)
	}
}

func TestCheckPartitions(t *testing.T) {
	s, err := ResolveSettings(layeredConfig(), "mycluster", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	parts, _ := ParsePartitions(fixture(t, "partitions-mixed.txt"))
	warn := s.CheckPartitions(parts)
	want := []string{
		`slurm gpu_partition_map[H100] names "h100", which is not a partition of Slurm cluster "mycluster".`,
		`slurm gpu_partition_map[H100] names "h100-long", which is not a partition of Slurm cluster "mycluster".`,
	}
	if !reflect.DeepEqual(warn, want) {
		t.Fatalf("got %q", warn)
	}
	s.CPUPartition = []string{"batch"}
	if w := s.CheckPartitions(parts); len(w) != 3 || !strings.Contains(w[0], `cpu_partition "batch"`) {
		t.Fatalf("got %q", w)
	}
}
