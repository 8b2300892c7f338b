package jobs

import (
	"testing"
	"time"

	"github.com/skygo/skygo/internal/state"
)

func TestSchedulerSkipsOnlyAfterAnExhaustivePassOverTheSameRows(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	fp := state.ManagedFingerprint{Count: 10001, MaxID: 10001, Versions: 10005}
	seen := schedMemo{fingerprint: fp, scannedAt: t0, exhaustive: true}
	withDeadline := seen
	withDeadline.deadline = float64(t0.Unix()) + 5
	for _, c := range []struct {
		name string
		memo schedMemo
		fp   state.ManagedFingerprint
		at   time.Time
		want bool
	}{
		{"first pass (no memo)", schedMemo{}, fp, at(0), true},
		{"nothing changed", seen, fp, at(1), false},
		{"nothing changed, just before a full pass is due", seen, fp, at(29.9), false},
		{"a full pass is due however quiet", seen, fp, at(30), true},
		{"clock went back", seen, fp, at(-1), true},
		{"a job was added", seen, state.ManagedFingerprint{Count: 10002, MaxID: 10002, Versions: 10006}, at(1), true},
		{"a job (a dependency) changed", seen, state.ManagedFingerprint{Count: 10001, MaxID: 10001, Versions: 10006}, at(1), true},
		{"a job was removed", seen, state.ManagedFingerprint{Count: 10000, MaxID: 10001, Versions: 10004}, at(1), true},
		{"the last pass ran out of slots", schedMemo{fingerprint: fp, scannedAt: t0}, fp, at(1), true},
		{"before a passed-over job's scheduling deadline", withDeadline, fp, at(4), false},
		{"a passed-over job's scheduling deadline came", withDeadline, fp, at(5), true},
	} {
		if got := c.memo.mustScan(c.fp, c.at); got != c.want {
			t.Errorf("%s: mustScan = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSchedMemoKeepsTheSoonestDeadline(t *testing.T) {
	var m schedMemo
	for _, d := range []float64{0, 50, 20, 0, 30} {
		m.noteDeadline(&state.ManagedJob{SchedulingDeadline: d})
	}
	if m.deadline != 20 {
		t.Fatalf("deadline = %v, want 20 (the soonest; 0 means none)", m.deadline)
	}
}
