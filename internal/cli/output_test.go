package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

func TestLogsHookParsing(t *testing.T) {
	tests := []struct {
		args    []string
		hook    string
		cluster string
		wantErr string
	}{
		{args: []string{"--hook", "stop", "c"}, hook: "stop", cluster: "c"},
		{args: []string{"c", "--hook", "down"}, hook: "down", cluster: "c"},
		{args: []string{"--hook=preemption", "c"}, hook: "preemption", cluster: "c"},
		{args: []string{"--hook", "c"}, hook: hookAuto, cluster: "c"},
		{args: []string{"--autostop", "c"}, hook: "stop", cluster: "c"},
		{args: []string{"--autostop", "--hook", "c"}, hook: "stop", cluster: "c"},
		{args: []string{"--autostop", "--hook=down", "c"}, wantErr: "--autostop means --hook stop"},
		{args: []string{"--hook=bogus", "c"}, wantErr: "choose one of stop, preemption, down"},
		{args: []string{"--hook", "stop", "c", "1"}, wantErr: "invalid job ID"},
		{args: []string{"c", "1", "2"}, wantErr: "Cannot stream logs of multiple jobs (IDs: 1, 2).\nPass -s/--sync-down to download the logs instead."},
	}
	for _, tc := range tests {
		io, _, _ := testIO("", false)
		var got *LogsOptions
		err := execCmd(t, newLogsCmd(testFactory(io, nil), func(o *LogsOptions) error { got = o; return nil }), tc.args...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("logs %v: err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("logs %v: %v", tc.args, err)
			continue
		}
		if got.Hook != tc.hook || got.Cluster != tc.cluster || len(got.JobIDs) != 0 {
			t.Errorf("logs %v: hook %q cluster %q jobs %v, want %q %q", tc.args, got.Hook, got.Cluster, got.JobIDs, tc.hook, tc.cluster)
		}
	}
}

func TestRenderRequests(t *testing.T) {
	io, out, _ := testIO("", false)
	f := testFactory(io, nil)
	if err := renderRequests(f, nil, false, 50); err != nil {
		t.Fatal(err)
	}
	if want := "ID  User  Name  Created  Status\n-   -     -     -        -\n"; out.String() != want {
		t.Errorf("empty list:\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	now := float64(f.Now().Unix())
	recs := []api.Request{{RequestID: "r1", UserName: "alice", Name: "sky.launch", CreatedAt: now - 120, Status: api.RequestRunning, ClusterName: "c"}}
	if err := renderRequests(f, recs, true, 1); err != nil {
		t.Fatal(err)
	}
	want := "ID  User   Name        Cluster  Created     Status\n" +
		"r1  alice  sky.launch  c        2 mins ago  RUNNING\n" +
		"\nShowing 1 requests. Use \"-l none\" or \"-l all\" to show all requests.\n"
	if out.String() != want {
		t.Errorf("verbose list at the limit:\n%q\nwant\n%q", out.String(), want)
	}
	for in, want := range map[string]int{"50": 50, "none": 0, "ALL": 0, "0": 0} {
		if n, err := parseRequestLimit(in); err != nil || n != want {
			t.Errorf("parseRequestLimit(%q) = %d, %v", in, n, err)
		}
	}
	if _, err := parseRequestLimit("-1"); err == nil {
		t.Error("a negative limit was accepted")
	}
}

// TestWriteJobLogsStaysInside: names from the server never leave the
// job's directory; they are refused before anything is fetched (the
// fetching itself is internal/e2e's TestLogsSyncDownProvisionHook).
func TestWriteJobLogsStaysInside(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	if _, err := writeJobLogs(ctx, nil, "r", root, api.JobLogs{JobID: 2, RunTimestamp: "t", Files: []string{"../../evil"}}); err == nil {
		t.Error("a name outside the job's directory was accepted")
	}
	if dir, _ := writeJobLogs(ctx, nil, "r", root, api.JobLogs{JobID: 3, RunTimestamp: "../../up"}); dir != filepath.Join(root, "up") {
		t.Errorf("run timestamp with dots went to %s", dir)
	}
}

func TestUntilLine(t *testing.T) {
	var buf bytes.Buffer
	stopped := false
	u := &untilLine{w: &buf, marker: "Job submitted, ID:", done: func() { stopped = true }}
	for _, chunk := range []string{"a\nb", "\nJob sub", "mitted, ID: 1\nafter\n"} {
		if _, err := u.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if buf.String() != "a\nb\n" || !stopped {
		t.Errorf("copied %q, stopped %v", buf.String(), stopped)
	}
}
