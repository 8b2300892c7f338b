package jobs

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/state"
)

func TestSubmitLimitsFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		want SubmitLimits
	}{
		{"no config", nil, SubmitLimits{DefaultMaxArraySize, DefaultMaxPipelineTasks}},
		{"unset", config.New(map[string]any{"jobs": map[string]any{"bucket": "s3://b"}}), SubmitLimits{DefaultMaxArraySize, DefaultMaxPipelineTasks}},
		{"raised", config.New(map[string]any{"jobs": map[string]any{"max_array_size": 50000, "max_pipeline_tasks": 7}}), SubmitLimits{50000, 7}},
		{"zero means the default", config.New(map[string]any{"jobs": map[string]any{"max_array_size": 0}}), SubmitLimits{DefaultMaxArraySize, DefaultMaxPipelineTasks}},
	} {
		if got := SubmitLimitsFrom(tc.cfg); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestCheckSize(t *testing.T) {
	lim := SubmitLimits{MaxArraySize: 10, MaxPipelineTasks: 3}
	tasks := func(n int) []api.TaskSpec { return make([]api.TaskSpec, n) }
	for _, tc := range []struct {
		name string
		b    api.JobsLaunchBody
		says []string // nil: accepted
	}{
		{"one job", api.JobsLaunchBody{Tasks: tasks(1)}, nil},
		{"array at the limit", api.JobsLaunchBody{Tasks: tasks(1), NumJobs: 10}, nil},
		{"pipeline at the limit", api.JobsLaunchBody{Tasks: tasks(3), NumJobs: 10}, nil},
		{"array past the limit", api.JobsLaunchBody{Tasks: tasks(1), NumJobs: 11},
			[]string{"--num-jobs 11", "limit of 10 jobs per array", "jobs.max_array_size"}},
		{"a billion jobs", api.JobsLaunchBody{Tasks: tasks(1), NumJobs: 1_000_000_000},
			[]string{"--num-jobs 1000000000", "limit of 10", "jobs.max_array_size"}},
		{"pipeline past the limit", api.JobsLaunchBody{Tasks: tasks(4)},
			[]string{"4 tasks", "limit of 3 tasks", "jobs.max_pipeline_tasks"}},
	} {
		err := CheckSize(tc.b, lim)
		if tc.says == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tc.name, err, s)
			}
		}
	}
}

// cancelOn cancels a context when a line containing marker is written.
type cancelOn struct {
	marker string
	cancel context.CancelFunc
}

func (c cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.marker) {
		c.cancel()
	}
	return len(p), nil
}

// TestSubmitBoundsAndCancellation: Submit refuses an array past the
// server's limit before it records anything, reads the limit from the
// server's config, and a submission cancelled once its jobs are recorded
// ends them CANCELLED instead of leaving them to launch.
func TestSubmitBoundsAndCancellation(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, err := state.OpenSQLite(ctx, filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := &Env{Home: home, Store: st}
	u := api.User{ID: "u1", Name: "bob"}
	body := api.JobsLaunchBody{Tasks: []api.TaskSpec{{Run: "true"}}, NumJobs: 1_000_000_000}
	count := func() int {
		js, err := st.ListManagedJobs(ctx, state.ManagedFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(js)
	}
	if _, err := e.Submit(ctx, body, u, "default", io.Discard); err == nil || !strings.Contains(err.Error(), "limit of 10000 jobs per array") {
		t.Errorf("a billion jobs: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".sky"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".sky", "config.yaml"), []byte("jobs:\n  max_array_size: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body.NumJobs = 4
	if _, err := e.Submit(ctx, body, u, "default", io.Discard); err == nil || !strings.Contains(err.Error(), "limit of 3 jobs per array") {
		t.Errorf("4 jobs past a configured limit of 3: %v", err)
	}
	if n := count(); n != 0 {
		t.Fatalf("refused submissions recorded %d jobs", n)
	}
	body.NumJobs = 3
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := e.Submit(cctx, body, u, "default", cancelOn{"Launching managed job", cancel}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled submission: %v", err)
	}
	js, err := st.ListManagedJobs(ctx, state.ManagedFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 3 {
		t.Fatalf("%d jobs recorded, want the 3 of the array", len(js))
	}
	for _, j := range js {
		if j.ScheduleState != api.ScheduleDone || j.JobStatus() != api.ManagedCancelled {
			t.Errorf("job %d after a cancelled submission: %s %s, want DONE CANCELLED", j.JobID, j.ScheduleState, j.JobStatus())
		}
	}
}

func TestCheckDAGDocs(t *testing.T) {
	lim := SubmitLimits{MaxArraySize: 10, MaxPipelineTasks: 3}
	for _, tc := range []struct {
		name, yaml string
		ok         bool
	}{
		{"one task", "run: echo\n", true},
		{"header and three tasks, leading marker", "---\nname: p\n---\nrun: a\n---\nrun: b\n---\nrun: c\n", true},
		// Four tasks may be a header and three: CheckSize, after parsing, decides.
		{"header and four tasks", "name: p\n---\nrun: a\n---\nrun: b\n---\nrun: c\n---\nrun: d\n", true},
		{"header and five tasks", "name: p\n---\nrun: a\n---\nrun: b\n---\nrun: c\n---\nrun: d\n---\nrun: e\n", false},
		{"a marker inside a line is not one", "run: |\n  echo ---\n  echo '--- x'\n---\nrun: b\n", true},
		{"markers with comments and tags", "--- # a\nrun: a\n--- !t\nrun: b\n---\t\nrun: c\n---\nrun: d\n---\nrun: e\n", false},
		{"a million markers", strings.Repeat("---\n", 1_000_000), false},
		{"not markers", "----\nrun: a\n---x\n", true},
	} {
		err := CheckDAGDocs(tc.yaml, lim)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "jobs.max_pipeline_tasks") {
			t.Errorf("%s: %v does not name jobs.max_pipeline_tasks", tc.name, err)
		}
	}
}
