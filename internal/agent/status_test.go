package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

func TestStatusMachine(t *testing.T) {
	const (
		ini, pend, setup, run = agentapi.StatusInit, agentapi.StatusPending, agentapi.StatusSettingUp, agentapi.StatusRunning
		ok, fail, failSetup   = agentapi.StatusSucceeded, agentapi.StatusFailed, agentapi.StatusFailedSetup
		driver, cancel        = agentapi.StatusFailedDriver, agentapi.StatusCancelled
	)
	all := []agentapi.Status{ini, pend, setup, run, driver, ok, fail, failSetup, cancel}
	allowed := map[[2]agentapi.Status]bool{}
	for _, p := range [][2]agentapi.Status{
		{ini, pend}, {ini, cancel}, {ini, driver},
		{pend, setup}, {pend, run}, {pend, cancel}, {pend, driver},
		{setup, run}, {setup, failSetup}, {setup, cancel}, {setup, driver},
		{run, ok}, {run, fail}, {run, cancel}, {run, driver},
	} {
		allowed[p] = true
	}
	for _, from := range all {
		for _, to := range all {
			if got := CanTransition(from, to); got != allowed[[2]agentapi.Status{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
		if from.Terminal() != (len(transitions[from]) == 0) {
			t.Errorf("%s: Terminal() = %v but has %d transitions", from, from.Terminal(), len(transitions[from]))
		}
	}
}

func TestFailureReason(t *testing.T) {
	tests := []struct {
		codes []int
		want  string
	}{
		{[]int{1}, "Job 4 failed with return code list: [1]"},
		{[]int{137, 3}, "Job 4 failed with return code list: [137, 3] (A Worker failed with return code 3, SkyPilot cleaned up the processes on other nodes with return code 137)"},
		{[]int{139, 0}, "Job 4 failed with return code list: [139, 0] (likely due to Segmentation Fault)"},
		// SkyPilot's note on the killed ranks replaces the segfault one.
		{[]int{139, 137}, "Job 4 failed with return code list: [139, 137] (A Worker failed with return code 139, SkyPilot cleaned up the processes on other nodes with return code 137)"},
	}
	for _, tt := range tests {
		if got := FailureReason(4, tt.codes); got != tt.want {
			t.Errorf("FailureReason(%v) =\n %q\nwant\n %q", tt.codes, got, tt.want)
		}
	}
}

func TestSetupFailureReason(t *testing.T) {
	const tail = ". See error logs above for more details."
	tests := []struct {
		codes, pids []int
		want        string
	}{
		{[]int{137, 1}, []int{100, 200}, "Job 7's setup failed. Failed workers: (pid=200, returncode=1)" + tail},
		{[]int{1, 0, 2}, []int{100, 200, 300}, "Job 7's setup failed. Failed workers: (pid=100, returncode=1), (pid=300, returncode=2)" + tail},
		// Only 137s: nothing failed by itself, so the killed one is named.
		{[]int{0, 137}, []int{100, 200}, "Job 7's setup failed. Failed workers: (pid=200, returncode=137)" + tail},
		// A setup that never started is named by the driver's pid.
		{[]int{137, 255}, []int{100, -1}, "Job 7's setup failed. Failed workers: (pid=9, returncode=255)" + tail},
	}
	for _, tt := range tests {
		if got := SetupFailureReason(7, tt.codes, tt.pids, 9); got != tt.want {
			t.Errorf("SetupFailureReason(%v, %v) =\n %q\nwant\n %q", tt.codes, tt.pids, got, tt.want)
		}
	}
}

func TestRunTimestampFormat(t *testing.T) {
	ts := time.Date(2024, 3, 5, 7, 8, 9, 123456789, time.Local)
	if got := runTimestamp(ts); got != "sky-2024-03-05-07-08-09-123456" {
		t.Fatalf("runTimestamp = %q", got)
	}
}

func TestTailOffset(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		content string
		n       int
		want    string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, "a\nb\nc\n"},
		{"", 3, ""},
		{strings.Repeat("x\n", 100000), 1, "x\n"},
	}
	for i, tt := range tests {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		f, _ := os.Open(path)
		off, err := tailOffset(f, tt.n)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := tt.content[off:]; got != tt.want {
			t.Errorf("case %d: tail %d = %q, want %q", i, tt.n, got, tt.want)
		}
	}
}

func TestRankWriterPrefixesLines(t *testing.T) {
	dir := t.TempDir()
	lg, err := openJobLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	rf, _ := os.Create(filepath.Join(dir, "tasks", "1-worker1.log"))
	var seen int
	w := &rankWriter{log: lg, file: rf, expectHeader: true, pidSeen: func(p int) { seen = p },
		label: func(pid int) string { return "(worker1, rank=1, pid=" + strconv.Itoa(pid) + ") " }}
	w.Write([]byte(pidHeader + "42\nhel"))
	w.Write([]byte("lo\npartial"))
	w.flush()
	lg.close()
	rf.Close()
	run, _ := os.ReadFile(filepath.Join(dir, "run.log"))
	raw, _ := os.ReadFile(filepath.Join(dir, "tasks", "1-worker1.log"))
	if seen != 42 {
		t.Errorf("pid seen = %d, want 42", seen)
	}
	// Ray's prefix, as SkyPilot's run.log has it: cyan.
	if want := "\x1b[36m(worker1, rank=1, pid=42)\x1b[0m hello\n\x1b[36m(worker1, rank=1, pid=42)\x1b[0m partial\n"; string(run) != want {
		t.Errorf("run.log = %q, want %q", run, want)
	}
	if want := "hello\npartial\n"; string(raw) != want {
		t.Errorf("rank log = %q, want %q", raw, want)
	}
}

// Setup output is "(setup pid=N)" in run.log on every node, whatever the
// rank's label, as in SkyPilot's detached setup.
func TestRankWriterPrefixesSetupLines(t *testing.T) {
	dir := t.TempDir()
	lg, err := openJobLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	for node, label := range []string{"(head, rank=0, pid=%d) ", "(worker1, rank=1, pid=%d) "} {
		f, _ := os.Create(filepath.Join(dir, setupLogName(node)))
		w := &rankWriter{log: lg, file: f, label: func(pid int) string { return fmt.Sprintf(label, pid) }}
		w.setPid(40 + node)
		w.Write([]byte(fmt.Sprintf("setup on %d\n", node)))
		f.Close()
	}
	lg.close()
	run, _ := os.ReadFile(filepath.Join(dir, "run.log"))
	if want := "\x1b[36m(setup pid=40)\x1b[0m setup on 0\n\x1b[36m(setup pid=41)\x1b[0m setup on 1\n"; string(run) != want {
		t.Errorf("run.log = %q, want %q", run, want)
	}
}
