package serve

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/replicaset"
	"github.com/skygo/skygo/internal/state"
)

// TestJudgeProbe: the readiness rule by the time of the look. A replica
// never READY fails once initial_delay_seconds passed since its launch
// (during its setup too); a READY one is NOT_READY while its probe
// fails and fails once the probe failed for the threshold timeout.
func TestJudgeProbe(t *testing.T) {
	pr := api.ProbeSpec{InitialDelaySeconds: 100, ConsecutiveFailureThresholdTimeout: 30}
	const launched = 1000.0
	starting := probeLook{Status: api.ReplicaStarting, LaunchedAt: launched}
	inSetup := starting
	inSetup.InSetup = true
	passed := starting
	passed.Passed = true
	ready := probeLook{Status: api.ReplicaReady, LaunchedAt: launched, ReadyAt: 1050, Passed: true}
	failing := ready
	failing.Passed = false
	notReady := failing
	notReady.Status, notReady.FailingSince = api.ReplicaNotReady, 1200
	backUp := notReady
	backUp.Passed = true
	for _, c := range []struct {
		name      string
		look      probeLook
		now       float64
		want      probeStep
		wantSince float64
	}{
		{"in setup, within the initial delay", inSetup, launched + 100, probeKeep, 0},
		{"in setup, past the initial delay", inSetup, launched + 100.5, probeFailInitialDelay, 0},
		{"never ready, failing within the initial delay", starting, launched + 99, probeKeep, 0},
		{"never ready, failing past the initial delay", starting, launched + 101, probeFailInitialDelay, 0},
		{"first pass: READY", passed, launched + 500, probeReady, 0},
		{"READY and passing: as it is", ready, 5000, probeKeep, 0},
		{"READY, first failure (past the initial delay, which no longer applies): NOT_READY from now", failing, 1200, probeNotReady, 1200},
		{"NOT_READY, failing 29 s", notReady, 1229, probeKeep, 1200},
		{"NOT_READY, failing 30 s: failed", notReady, 1230, probeFailProbing, 1200},
		{"NOT_READY, passing again: READY", backUp, 1229, probeReady, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			step, since := judgeProbe(c.look, pr, c.now)
			if step != c.want || since != c.wantSince {
				t.Fatalf("judgeProbe at %v = %d (since %v), want %d (since %v)", c.now, step, since, c.want, c.wantSince)
			}
		})
	}
	pr.ConsecutiveFailureThresholdTimeout = 0
	if step, _ := judgeProbe(failing, pr, 1200); step != probeFailProbing {
		t.Fatalf("a zero threshold timeout: the first failure is %d, want failed at once", step)
	}
}

// TestDrained: a retired replica goes once the load balancer has a ready
// set without it and it serves nothing, or once the drain limit passed
// since it was retired, whatever it still serves.
func TestDrained(t *testing.T) {
	const retired, limit = 1000.0, 30 * time.Second
	for _, c := range []struct {
		name      string
		pushedOut bool
		inFlight  int64
		now       float64
		want      bool
	}{
		{"pushed out, idle", true, 0, retired, true},
		{"pushed out, serving", true, 2, retired + 29, false},
		{"still in the ready set", false, 0, retired + 29.9, false},
		{"serving at the limit", true, 1, retired + 30, true},
		{"never pushed out, past the limit", false, 5, retired + 31, true},
	} {
		if got := drained(c.pushedOut, c.inFlight, retired, c.now, limit); got != c.want {
			t.Errorf("%s: drained %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRetireTimesTheDrainFromTheClock: a replica retired through the
// member lifecycle or terminated by its user records the Env's clock as
// when it was retired, from which its drain limit runs.
func TestRetireTimesTheDrainFromTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := state.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := time.Unix(1_800_000_000, 0)
	e := &Env{Home: t.TempDir(), Store: st, Clock: func() time.Time { return clock }}
	s := &state.Service{RowMeta: state.RowMeta{Name: "svc", UserHash: "h", UserName: "alice"}, Latest: 1,
		Versions: map[int]*state.ServiceVersion{1: fixed(2)},
		Replicas: []*state.Replica{rep(1, 1, api.ReplicaReady), rep(2, 1, api.ReplicaReady)}}
	if err := st.CreateService(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := replicaset.Retire(ctx, e.replicaSet(s), 1, api.ReplicaReady, "scaled down"); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(7 * time.Second)
	if err := e.TerminateReplica(ctx, api.ServeTerminateReplicaBody{Name: "svc", ReplicaID: 2}, api.User{ID: "h", Name: "alice"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetService(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Replica(1); r.Status != api.ReplicaShuttingDown || r.RetiredAt != 1_800_000_000 {
		t.Errorf("retired replica: %s at %v, want SHUTTING_DOWN at the clock's 1800000000", r.Status, r.RetiredAt)
	}
	if r := got.Replica(2); r.Status != api.ReplicaShuttingDown || r.RetiredAt != 1_800_000_007 {
		t.Errorf("terminated replica: %s at %v, want SHUTTING_DOWN at the clock's 1800000007", r.Status, r.RetiredAt)
	}
}
