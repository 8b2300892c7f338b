package cli

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// execCmd runs one command built with a capturing runF and returns the
// error of the run.
func execCmd(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	cmd.SetArgs(rewriteArgs(args))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

func TestLaunchEntrypoint(t *testing.T) {
	yamlPath := writeFile(t, "task.yaml", "run: echo hi\n")
	scriptPath := writeFile(t, "script.sh", "#!/bin/sh\necho hi\n")
	tests := []struct {
		name    string
		args    []string
		want    entrypoint
		cluster string
		detach  bool
		wantErr string
	}{
		{name: "dash dash command", args: []string{"-c", "x", "--", "echo", "hi"}, want: entrypoint{Command: "echo hi"}, cluster: "x"},
		{name: "quoted command", args: []string{"echo hi"}, want: entrypoint{Command: "echo hi"}},
		{name: "command flags after dash dash stay the command's", args: []string{"-c", "x", "--", "python", "train.py", "-c", "cfg", "-d"}, want: entrypoint{Command: "python train.py -c cfg -d"}, cluster: "x"},
		{name: "yaml file", args: []string{yamlPath, "-d"}, want: entrypoint{YAMLPath: yamlPath}, detach: true},
		{name: "-no-d undoes -d", args: []string{"-d", "-no-d", yamlPath}, want: entrypoint{YAMLPath: yamlPath}},
		{name: "existing non-yaml file is a command", args: []string{scriptPath}, want: entrypoint{Command: scriptPath}},
		{name: "no entrypoint", args: []string{"-c", "x"}, want: entrypoint{}, cluster: "x"},
		{name: "missing yaml", args: []string{"nope.yaml"}, wantErr: "task YAML nope.yaml not found"},
		{name: "bad cluster name", args: []string{"-c", "1bad", "echo"}, wantErr: "invalid cluster name"},
		{name: "resize needs num-nodes", args: []string{"-c", "x", "--resize"}, wantErr: "--resize needs"},
		{name: "docker is gone", args: []string{"--docker", "echo"}, wantErr: "sky local up"},
		{name: "bad wait-for", args: []string{"-i", "5", "--wait-for", "never", "echo"}, wantErr: `invalid value "never" for --wait-for`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			io, _, _ := testIO("", false)
			var got *LaunchOptions
			err := execCmd(t, newLaunchCmd(testFactory(io, nil), func(o *LaunchOptions) error { got = o; return nil }), tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Task.Entry != tc.want {
				t.Errorf("entrypoint = %+v, want %+v", got.Task.Entry, tc.want)
			}
			if got.Cluster != tc.cluster || got.Detach != tc.detach {
				t.Errorf("cluster, detach = %q, %v; want %q, %v", got.Cluster, got.Detach, tc.cluster, tc.detach)
			}
		})
	}
}

func TestExecClusterAndEntrypoint(t *testing.T) {
	tests := []struct {
		args        []string
		cluster     string
		command     string
		wantErrPart string
	}{
		{args: []string{"dev", "--", "python", "x.py", "--lr", "1"}, cluster: "dev", command: "python x.py --lr 1"},
		{args: []string{"-c", "dev", "echo", "hi"}, cluster: "dev", command: "echo hi"},
		{args: []string{"dev"}, wantErrPart: "missing ENTRYPOINT"},
		{args: []string{}, wantErrPart: "missing CLUSTER"},
	}
	for _, tc := range tests {
		io, _, _ := testIO("", false)
		var got *ExecOptions
		err := execCmd(t, newExecCmd(testFactory(io, nil), func(o *ExecOptions) error { got = o; return nil }), tc.args...)
		if tc.wantErrPart != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrPart) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.wantErrPart)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got.Cluster != tc.cluster || got.Task.Entry.Command != tc.command {
			t.Errorf("%v: got cluster %q command %q", tc.args, got.Cluster, got.Task.Entry.Command)
		}
	}
}

func TestResourceFlagOverrides(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    resourceOverrides
		wantErr string
	}{
		{name: "nothing given", args: nil, want: resourceOverrides{}},
		{name: "values", args: []string{"--cloud", "aws", "--gpus", "A100:8", "--cpus", "4+", "--disk-size", "100", "--ports", "8080", "--ports", "9000-9010"},
			want: resourceOverrides{
				Cloud:        fieldOverride{Set: true, Value: "aws"},
				Accelerators: fieldOverride{Set: true, Value: "A100:8"},
				Cpus:         fieldOverride{Set: true, Value: "4+"},
				DiskSize:     fieldOverride{Set: true, Value: "100"},
				Ports:        fieldOverride{Set: true, Value: "8080,9000-9010"},
			}},
		{name: "none resets", args: []string{"--cloud", "none", "--region", "None", "--image-id", "NONE", "--instance-type", "none", "--priority", "none", "--disk-tier", "none"},
			want: resourceOverrides{
				Cloud:        fieldOverride{Set: true, Reset: true},
				Region:       fieldOverride{Set: true, Reset: true},
				ImageID:      fieldOverride{Set: true, Reset: true},
				InstanceType: fieldOverride{Set: true, Reset: true},
				Priority:     fieldOverride{Set: true, Reset: true},
				DiskTier:     fieldOverride{Set: true, Reset: true},
			}},
		{name: "spot pair, last wins", args: []string{"--use-spot", "--no-use-spot"}, want: resourceOverrides{UseSpot: ptr(false)}},
		{name: "spot on", args: []string{"--use-spot"}, want: resourceOverrides{UseSpot: ptr(true)}},
		{name: "infra with cloud", args: []string{"--infra", "aws", "--region", "us-east-1"}, wantErr: "--infra cannot be combined"},
		{name: "bad disk tier", args: []string{"--disk-tier", "fast"}, wantErr: "--disk-tier"},
		{name: "priority range", args: []string{"--priority", "5000"}, wantErr: "between -1000 and 1000"},
		{name: "zero disk", args: []string{"--disk-size", "0"}, wantErr: "--disk-size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			io, _, _ := testIO("", false)
			var got *LaunchOptions
			err := execCmd(t, newLaunchCmd(testFactory(io, nil), func(o *LaunchOptions) error { got = o; return nil }), tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Task.Res, tc.want) {
				t.Errorf("overrides =\n%+v\nwant\n%+v", got.Task.Res, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The overrides reach the parsed resources: values replace the YAML's, and
// "none" removes the YAML's value, in the base and in every any_of item.
func TestApplyResourceOverrides(t *testing.T) {
	section := map[string]any{
		"infra":        "aws/us-east-1",
		"accelerators": "V100:1",
		"image_id":     "ami-123",
		"any_of":       []any{map[string]any{"use_spot": true, "cpus": "8"}, map[string]any{"cpus": "4"}},
	}
	o := resourceOverrides{
		Region:   fieldOverride{Set: true, Value: "us-west-2"},
		ImageID:  fieldOverride{Set: true, Reset: true},
		Cpus:     fieldOverride{Set: true, Value: "16+"},
		Priority: fieldOverride{Set: true, Value: "10"},
		UseSpot:  ptr(false),
	}
	r, err := applyResourceOverrides(section, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Infra.Cloud != "aws" || r.Infra.Region != "us-west-2" {
		t.Errorf("infra = %+v, want aws/us-west-2 (cloud kept from YAML)", r.Infra)
	}
	if r.ImageID != nil {
		t.Errorf("image_id = %+v, want cleared by none", r.ImageID)
	}
	if r.Priority == nil || *r.Priority != 10 {
		t.Errorf("priority = %v, want 10", r.Priority)
	}
	cands, _ := r.Candidates()
	if len(cands) != 2 {
		t.Fatalf("candidates = %d, want 2", len(cands))
	}
	for i, c := range cands {
		if c.CPUs == nil || c.CPUs.String() != "16+" {
			t.Errorf("candidate %d cpus = %v, want 16+ from the flag", i, c.CPUs)
		}
		if c.Spot() {
			t.Errorf("candidate %d is spot, want --no-use-spot to win", i)
		}
	}
	if _, ok := section["image_id"]; !ok {
		t.Error("the caller's section was modified")
	}

	if r, err := applyResourceOverrides(section, resourceOverrides{}); r != nil || err != nil {
		t.Errorf("no flags: got %v, %v; want nil, nil", r, err)
	}
	_, err = applyResourceOverrides(nil, resourceOverrides{Cpus: fieldOverride{Set: true, Value: "four"}})
	var fe *FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "resources.cpus") {
		t.Errorf("bad --cpus: err = %v, want a usage error naming resources.cpus", err)
	}
}

func TestEnvArgs(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "HOMEDIR" {
			return "/home/me", true
		}
		return "", false
	}
	got, err := parseEnvArgs("--env", []string{"A=1", "B=x=y", "HOMEDIR", "EMPTY="}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []envVar{{"A", "1"}, {"B", "x=y"}, {"HOMEDIR", "/home/me"}, {"EMPTY", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"1X=2", "MISSING", "A-B=3"} {
		if _, err := parseEnvArgs("--env", []string{bad}, lookup); err == nil {
			t.Errorf("--env %s: no error", bad)
		}
	}
	_, err = parseEnvArgs("--secret", []string{"bad key=hunter2-secret"}, lookup)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("--secret error must not show the value: %v", err)
	}
}

func TestJobsQueueStatusFlag(t *testing.T) {
	tests := []struct {
		args     []string
		statuses []string
		skip     bool
		wantErr  string
	}{
		{args: []string{"-s"}, skip: true},
		{args: []string{"-s", "failed,FAILED_SETUP"}, statuses: []string{"FAILED", "FAILED_SETUP"}},
		{args: []string{"--status=RUNNING"}, statuses: []string{"RUNNING"}},
		{args: []string{"-s", "BOGUS"}, wantErr: "invalid --status"},
		{args: []string{"--since", "7d", "--after", "2026-01-13"}, wantErr: "--since and --after"},
		{args: []string{"--since", "soon"}, wantErr: "invalid --since"},
	}
	for _, tc := range tests {
		io, _, _ := testIO("", false)
		var got *JobsQueueOptions
		err := execCmd(t, newJobsQueueCmd(testFactory(io, nil), func(o *JobsQueueOptions) error { got = o; return nil }), tc.args...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !reflect.DeepEqual(got.Statuses, tc.statuses) || got.SkipFinished != tc.skip {
			t.Errorf("%v: statuses %v skip %v", tc.args, got.Statuses, got.SkipFinished)
		}
	}
}

func TestParseSince(t *testing.T) {
	for in, want := range map[string]string{"30m": "30m0s", "48h": "48h0m0s", "7d": "168h0m0s", "2w": "336h0m0s", "90": "1m30s"} {
		d, err := parseSince(in)
		if err != nil || d.String() != want {
			t.Errorf("parseSince(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
}

func TestOutputFlag(t *testing.T) {
	for in, want := range map[string]string{"json": "json", "JSON": "json", "Table": "table"} {
		if got, err := parseOutput(in); err != nil || got != want {
			t.Errorf("parseOutput(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := parseOutput("yaml"); err == nil {
		t.Error("parseOutput(yaml): no error")
	}
}
