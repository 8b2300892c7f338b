package replicaset

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/state"
)

// memSet is a set kept in memory: the lifecycle's whole contract with a
// user (Move is a compare-and-set on the member's status).
type memSet struct {
	members map[int]*Fields
	downErr error
	downs   []string
	notes   []string
	pokes   int
}

func newSet(fs ...Fields) *memSet {
	s := &memSet{members: map[int]*Fields{}}
	for i := range fs {
		s.members[i+1] = &fs[i]
	}
	return s
}

func (s *memSet) Noun() string { return "Member" }

func (s *memSet) Move(_ context.Context, id int, from []string, edit func(*Fields)) (bool, error) {
	f := s.members[id]
	if f == nil || !slices.Contains(from, f.Status) {
		return false, nil
	}
	c := *f
	edit(&c)
	*f = c
	return true, nil
}

func (s *memSet) Remove(_ context.Context, id int, from []string) error {
	if f := s.members[id]; f != nil && slices.Contains(from, f.Status) {
		delete(s.members, id)
	}
	return nil
}

func (s *memSet) Down(_ context.Context, id int, cluster string) error {
	s.downs = append(s.downs, cluster)
	return s.downErr
}

func (s *memSet) Note(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

func (s *memSet) Poke() { s.pokes++ }

func gap(tries int) time.Duration { return time.Duration(tries) * time.Minute }

func TestBegin(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		f          Fields
		wantOK     bool
		wantWait   time.Duration
		wantStatus string
		wantTry    int
	}{
		{"pending, due: provisioning, attempt counted", Fields{Status: api.ReplicaPending, NextTryAt: 100}, true, 0, api.ReplicaProvisioning, 1},
		{"pending, gap not over: wait", Fields{Status: api.ReplicaPending, NextTryAt: 130, Attempt: 2}, false, 30 * time.Second, api.ReplicaPending, 2},
		{"provisioning (a cut-off attempt): go on", Fields{Status: api.ReplicaProvisioning, Attempt: 3}, true, 0, api.ReplicaProvisioning, 3},
		{"anything else: nothing", Fields{Status: api.ReplicaReady, Attempt: 1}, false, 0, api.ReplicaReady, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSet(tc.f)
			res, ok, err := Begin(ctx, s, 1, tc.f, 100)
			if err != nil || ok != tc.wantOK || res.RequeueAfter != tc.wantWait {
				t.Fatalf("got ok %v res %+v err %v", ok, res, err)
			}
			if f := s.members[1]; f.Status != tc.wantStatus || f.Attempt != tc.wantTry {
				t.Fatalf("member %+v", f)
			}
		})
	}
	// Another controller moved it first: no attempt here, a quick look again.
	s := newSet(Fields{Status: api.ReplicaProvisioning})
	res, ok, err := Begin(ctx, s, 1, Fields{Status: api.ReplicaPending}, 100)
	if ok || err != nil || res.RequeueAfter != retryNow || s.members[1].Attempt != 0 {
		t.Fatalf("moved member: ok %v res %+v err %v %+v", ok, res, err, s.members[1])
	}
}

func TestFailed(t *testing.T) {
	ctx := context.Background()
	cause := errors.New("no capacity\nmore detail")
	s := newSet(Fields{Status: api.ReplicaProvisioning, Tries: 1})
	res, err := Failed(ctx, s, 1, cause, false, gap, 100)
	if err != nil || res.RequeueAfter != 2*time.Minute {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if f := s.members[1]; f.Status != api.ReplicaPending || f.Tries != 2 || f.NextTryAt != 220 || f.Reason != "no capacity" {
		t.Fatalf("retry: member %+v", f)
	}
	if s.pokes != 0 || s.notes[0] != "Member 1: launch failed (no capacity); retrying in 2m0s." {
		t.Fatalf("retry: pokes %d notes %q", s.pokes, s.notes)
	}

	s = newSet(Fields{Status: api.ReplicaProvisioning})
	res, err = Failed(ctx, s, 1, cause, true, gap, 100)
	if err != nil || res != (controller.Result{}) || s.members[1].Status != api.ReplicaFailedProvision || s.pokes != 1 {
		t.Fatalf("final: %+v %v %+v pokes %d", res, err, s.members[1], s.pokes)
	}
	if s.notes[0] != "Member 1: launch failed (no capacity); not retried." {
		t.Fatalf("final: notes %q", s.notes)
	}

	s = newSet(Fields{Status: api.ReplicaShuttingDown})
	if res, err = Failed(ctx, s, 1, cause, false, gap, 100); err != nil || res.RequeueAfter != retryNow || s.members[1].Status != api.ReplicaShuttingDown {
		t.Fatalf("shut down meanwhile: %+v %v %+v", res, err, s.members[1])
	}
}

func TestForeignLostMark(t *testing.T) {
	ctx := context.Background()
	s := newSet(Fields{Status: api.ReplicaProvisioning}, Fields{Status: api.ReplicaReady}, Fields{Status: api.ReplicaReady})
	if _, err := Foreign(ctx, s, 1, "a cluster named x already exists"); err != nil {
		t.Fatal(err)
	}
	if f := s.members[1]; f.Status != api.ReplicaFailedProvision || !f.Disowned || f.Reason != "a cluster named x already exists" {
		t.Fatalf("foreign: %+v", f)
	}
	if res, err := Lost(ctx, s, 2, api.ReplicaReady, "its cluster was lost"); err != nil || res.RequeueAfter != retryNow {
		t.Fatalf("lost: %+v %v", res, err)
	}
	if f := s.members[2]; f.Status != api.ReplicaPreempted || f.Reason != "its cluster was lost" {
		t.Fatalf("lost: %+v", f)
	}
	// From a status it is no longer in: nothing moves.
	if _, err := Mark(ctx, s, 3, api.ReplicaStarting, api.ReplicaFailed, "x"); err != nil || s.members[3].Status != api.ReplicaReady {
		t.Fatalf("mark from a stale status moved it: %+v", s.members[3])
	}
	want := []string{"Member 1: a cluster named x already exists.", "Member 2 is PREEMPTED: its cluster was lost."}
	if !slices.Equal(s.notes, want) || s.pokes != 2 {
		t.Fatalf("notes %q pokes %d", s.notes, s.pokes)
	}
}

func TestDrop(t *testing.T) {
	ctx := context.Background()
	s := newSet(Fields{Status: api.ReplicaShuttingDown})
	if _, err := Drop(ctx, s, 1, "c-1", []string{api.ReplicaShuttingDown}, false); err != nil || s.members[1] != nil {
		t.Fatalf("drop: %v %+v", err, s.members)
	}
	if !slices.Equal(s.downs, []string{"c-1"}) || s.notes[0] != "Member 1 removed." || s.pokes != 1 {
		t.Fatalf("drop: downs %v notes %q pokes %d", s.downs, s.notes, s.pokes)
	}

	s = newSet(Fields{Status: api.ReplicaShuttingDown})
	s.downErr = errors.New("cloud says no")
	if _, err := Drop(ctx, s, 1, "c-1", []string{api.ReplicaShuttingDown}, false); err == nil || s.members[1] == nil {
		t.Fatalf("a cluster that would not go keeps its member: %v %+v", err, s.members)
	}
	if _, err := Drop(ctx, s, 1, "c-1", []string{api.ReplicaShuttingDown}, true); err != nil || s.members[1] != nil {
		t.Fatalf("forced: %v %+v", err, s.members)
	}
}

func TestKeys(t *testing.T) {
	set, id, err := ParseKey(Key("web-a", 12))
	if err != nil || set != "web-a" || id != 12 {
		t.Fatalf("round trip: %q %d %v", set, id, err)
	}
	for _, k := range []string{"web", "web/x", "/"} {
		if _, _, err := ParseKey(k); err == nil {
			t.Errorf("%q parsed", k)
		}
	}
}

func TestMade(t *testing.T) {
	cmd := "sky serve up -n web"
	for _, tc := range []struct {
		c    state.Cluster
		want bool
	}{
		{state.Cluster{IsManaged: true, LastCreationCommand: cmd}, true},
		{state.Cluster{IsManaged: false, LastCreationCommand: cmd}, false},
		{state.Cluster{IsManaged: true, LastCreationCommand: "sky launch"}, false},
	} {
		if got := Made(&tc.c, cmd); got != tc.want {
			t.Errorf("%+v: %v", tc.c, got)
		}
	}
}

// TestLaunchRefusesAForeignCluster: a cluster of the member's name that
// the set did not make fails the member, disowned, before the backend is
// asked anything (this Cloud has none).
func TestLaunchRefusesAForeignCluster(t *testing.T) {
	ctx := context.Background()
	st, err := state.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateCluster(ctx, &state.Cluster{Name: "web-1", UserName: "alice", Status: state.ClusterUp}, "test"); err != nil {
		t.Fatal(err)
	}
	s := newSet(Fields{Status: api.ReplicaProvisioning, Attempt: 1})
	var log strings.Builder
	a := Attempt{ID: 1, Attempt: 1, Job: "job", Log: &log, Foreign: "web-1 is not ours", Announce: "Launching.",
		Body: api.LaunchBody{ClusterName: "web-1", Command: "sky serve up -n web", Managed: &api.ManagedLaunch{Tag: "t"}}}
	launched := func(int) (controller.Result, error) { t.Fatal("launched"); return controller.Result{}, nil }
	if _, err := Launch(ctx, s, Cloud{Store: st}, a, launched, gap, func() float64 { return 0 }); err != nil {
		t.Fatal(err)
	}
	if f := s.members[1]; f.Status != api.ReplicaFailedProvision || !f.Disowned || f.Reason != "web-1 is not ours" {
		t.Fatalf("member %+v", f)
	}
	if log.Len() != 0 || len(s.downs) != 0 {
		t.Fatalf("a foreign cluster was launched on or torn down: log %q downs %v", log.String(), s.downs)
	}
}

func TestRetire(t *testing.T) {
	ctx := context.Background()
	s := newSet(Fields{Status: api.ReplicaProvisioning}, Fields{Status: api.ReplicaReady})
	if _, err := Retire(ctx, s, 1, api.ReplicaProvisioning, "its version is gone"); err != nil {
		t.Fatal(err)
	}
	if f := s.members[1]; f.Status != api.ReplicaShuttingDown || f.Reason != "its version is gone" {
		t.Fatalf("retired: %+v", f)
	}
	// Moved on meanwhile: left where it is.
	if _, err := Retire(ctx, s, 2, api.ReplicaProvisioning, "x"); err != nil || s.members[2].Status != api.ReplicaReady {
		t.Fatalf("moved member retired: %v %+v", err, s.members[2])
	}
}

// TestLaunched: what recording a launched member does when the set or
// the member went, or the member moved on, while the launch ran.
func TestLaunched(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		took, gone bool
		err        error
		wantTook   bool
		wantDown   bool
		wantWait   time.Duration
		wantErr    bool
	}{
		{name: "recorded", took: true, wantTook: true},
		{name: "the set went: its cluster goes now", err: state.ErrNotFound, wantDown: true},
		{name: "the member went: its cluster goes now", gone: true, wantDown: true},
		{name: "retired meanwhile: its next step drops it", wantWait: retryNow},
		{name: "the store failed", err: errors.New("disk full"), wantErr: true},
	} {
		s := newSet(Fields{Status: api.ReplicaProvisioning})
		took, res, err := Launched(ctx, s, 1, "c-1", func() (bool, bool, error) { return tc.took, tc.gone, tc.err })
		if took != tc.wantTook || (err != nil) != tc.wantErr || res.RequeueAfter != tc.wantWait || (len(s.downs) > 0) != tc.wantDown {
			t.Errorf("%s: took %v res %+v err %v downs %v", tc.name, took, res, err, s.downs)
		}
	}
}
