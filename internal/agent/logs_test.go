package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/ux"
)

// runLog writes a run.log as the daemon leaves it and returns its path.
func runLog(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.log")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func finishedRow(id int, st agentapi.Status, codes, pids []int) *jobRow {
	start, end := 1.0, 2.0
	return &jobRow{Job: agentapi.Job{JobID: id, NumNodes: len(codes), Status: st, StartAt: &start, EndAt: &end,
		ReturnCodes: codes, Pids: pids}}
}

func stream(t *testing.T, path string, tail int, r *jobRow) (string, agentapi.Status) {
	t.Helper()
	var out bytes.Buffer
	st, err := streamJob(context.Background(), &out, path, tail, false, func() (*jobRow, error) { return r, nil })
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), st
}

var waiting2, started2 = jobStartLines(2)

// The job stream of a finished job: the driver's start lines, the ranks'
// lines, SkyPilot's words for the driver's own lines, the closing line.
func TestStreamJobInSkyPilotsWords(t *testing.T) {
	head, worker := ux.Cyan+"(head, rank=0, pid=7)"+ux.Reset+" ", ux.Cyan+"(worker1, rank=1, pid=8)"+ux.Reset+" "
	cases := []struct {
		name string
		row  *jobRow
		log  []string
		want []string
	}{{
		name: "succeeded",
		row:  finishedRow(1, agentapi.StatusSucceeded, []int{0, 0}, []int{7, 8}),
		log:  []string{head + "hi\n", worker + "hi\n", "Job 1 finished (status: SUCCEEDED).\n"},
		want: []string{waiting2, started2, head + "hi", worker + "hi", ux.Finishing("Job finished (status: SUCCEEDED).")},
	}, {
		// The driver writes the failure lines in SkyPilot's words
		// (daemon.go); the stream passes them through as they are.
		name: "run failed",
		row:  finishedRow(2, agentapi.StatusFailed, []int{137, 3}, []int{7, 8}),
		log: []string{head + "x\n",
			"ERROR: " + ux.Red + "Job 2 failed with return code list:" + ux.Reset + " [137, 3] (A Worker failed with return code 3, SkyPilot cleaned up the processes on other nodes with return code 137)\n",
			"Job 2 finished (status: FAILED).\n"},
		want: []string{waiting2, started2, head + "x",
			"ERROR: " + ux.Red + "Job 2 failed with return code list:" + ux.Reset + " [137, 3] (A Worker failed with return code 3, SkyPilot cleaned up the processes on other nodes with return code 137)",
			ux.Finishing("Job finished (status: FAILED).")},
	}, {
		name: "setup failed",
		row:  finishedRow(3, agentapi.StatusFailedSetup, []int{0, 7}, []int{7, 8}),
		log: []string{"setup out\n",
			"ERROR: " + ux.Red + "Job 3's setup failed. Failed workers: (pid=8, returncode=7). See error logs above for more details." + ux.Reset + "\n"},
		want: []string{waiting2, started2, "setup out",
			"ERROR: " + ux.Red + "Job 3's setup failed. Failed workers: (pid=8, returncode=7). See error logs above for more details." + ux.Reset,
			ux.Finishing("Job finished (status: FAILED_SETUP).")},
	}, {
		name: "cancelled",
		row:  finishedRow(4, agentapi.StatusCancelled, []int{137, 137}, nil),
		log:  []string{head + "x\n", "Job 4 was cancelled.\n"},
		want: []string{waiting2, started2, head + "x", ux.Finishing("Job finished (status: CANCELLED).")},
	}, {
		name: "last line without newline",
		row:  finishedRow(5, agentapi.StatusSucceeded, []int{0, 0}, nil),
		log:  []string{head + "no newline"},
		want: []string{waiting2, started2, head + "no newline", ux.Finishing("Job finished (status: SUCCEEDED).")},
	}}
	for _, c := range cases {
		got, st := stream(t, runLog(t, c.log...), 0, c.row)
		if want := strings.Join(c.want, "\n") + "\n"; got != want {
			t.Errorf("%s:\ngot  %q\nwant %q", c.name, got, want)
		}
		if st != c.row.Status {
			t.Errorf("%s: status %s, want %s", c.name, st, c.row.Status)
		}
	}
}

// A pending job has only the waiting line; without follow, no closing
// line while it runs.
func TestStreamJobNotStarted(t *testing.T) {
	r := &jobRow{Job: agentapi.Job{JobID: 1, NumNodes: 2, Status: agentapi.StatusPending}}
	got, st := stream(t, filepath.Join(t.TempDir(), "run.log"), 0, r)
	if got != waiting2+"\n" || st != agentapi.StatusPending {
		t.Errorf("pending job: %q (%s), want only the waiting line", got, st)
	}
	start := 1.0
	r = &jobRow{Job: agentapi.Job{JobID: 1, NumNodes: 2, Status: agentapi.StatusRunning, StartAt: &start}}
	got, _ = stream(t, runLog(t, "a\n"), 0, r)
	if want := waiting2 + "\n" + started2 + "\na\n"; got != want {
		t.Errorf("running job: %q, want %q", got, want)
	}
}

// --tail counts the stream's lines, start lines included; the closing
// line comes on top.
func TestStreamJobTail(t *testing.T) {
	r := finishedRow(1, agentapi.StatusSucceeded, []int{0, 0}, nil)
	log := []string{"a\n", "b\n", "c\n", "Job 1 finished (status: SUCCEEDED).\n"}
	end := ux.Finishing("Job finished (status: SUCCEEDED).") + "\n"
	for _, c := range []struct {
		tail int
		want string
	}{
		{2, "b\nc\n" + end},
		{4, started2 + "\na\nb\nc\n" + end},
		{9, waiting2 + "\n" + started2 + "\na\nb\nc\n" + end},
	} {
		if got, _ := stream(t, runLog(t, log...), c.tail, r); got != c.want {
			t.Errorf("tail %d:\ngot  %q\nwant %q", c.tail, got, c.want)
		}
	}
}
