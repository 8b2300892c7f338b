package replicaset

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
)

// stepSet is a memSet whose hooks record which step was taken.
type stepSet struct {
	*memSet
	drain time.Duration
	took  []string
}

func (s *stepSet) Launch(context.Context, int) (controller.Result, error) {
	s.took = append(s.took, "launch")
	return controller.Result{}, nil
}

func (s *stepSet) Watch(context.Context, int) (controller.Result, error) {
	s.took = append(s.took, "watch")
	return controller.Result{}, nil
}

func (s *stepSet) Drain(context.Context, int) time.Duration {
	s.took = append(s.took, "drain")
	return s.drain
}

func (s *stepSet) CleanUp(ctx context.Context, id int) (controller.Result, error) {
	s.took = append(s.took, "cleanup")
	return CleanUp(ctx, s, id, s.members[id].Status, "c-1")
}

func TestStep(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		status    string
		cleanedUp bool
		drain     time.Duration
		want      []string
		gone      bool
		wait      time.Duration
	}{
		{status: api.ReplicaPending, want: []string{"launch"}},
		{status: api.ReplicaProvisioning, want: []string{"launch"}},
		{status: api.ReplicaStarting, want: []string{"watch"}},
		{status: api.ReplicaNotReady, want: []string{"watch"}},
		{status: api.ReplicaReady, want: []string{"watch"}},
		{status: api.ReplicaShuttingDown, drain: time.Second, want: []string{"drain"}, wait: time.Second},
		{status: api.ReplicaShuttingDown, want: []string{"drain"}, gone: true},
		{status: api.ReplicaPreempted, gone: true},
		{status: api.ReplicaFailed, want: []string{"cleanup"}},
		{status: api.ReplicaFailedProbing, want: []string{"cleanup"}},
		{status: api.ReplicaFailed, cleanedUp: true},
		{status: api.ReplicaFailedProvision, cleanedUp: true},
	} {
		s := &stepSet{memSet: newSet(Fields{Status: tc.status, CleanedUp: tc.cleanedUp}), drain: tc.drain}
		res, err := Step(ctx, s, Stepped{ID: 1, Status: tc.status, Cluster: "c-1", CleanedUp: tc.cleanedUp})
		if err != nil || res.RequeueAfter != tc.wait || !slices.Equal(s.took, tc.want) || (s.members[1] == nil) != tc.gone {
			t.Errorf("%s (cleaned up %v): res %+v err %v took %v member %+v", tc.status, tc.cleanedUp, res, err, s.took, s.members[1])
		}
		if tc.gone && !slices.Equal(s.downs, []string{"c-1"}) {
			t.Errorf("%s: dropped without its cluster torn down: %v", tc.status, s.downs)
		}
	}
}

func TestCleanUp(t *testing.T) {
	ctx := context.Background()
	s := newSet(Fields{Status: api.ReplicaFailed, Reason: "its run ended FAILED"})
	if _, err := CleanUp(ctx, s, 1, api.ReplicaFailed, "c-1"); err != nil {
		t.Fatal(err)
	}
	if f := s.members[1]; f.Status != api.ReplicaFailed || !f.CleanedUp || f.Reason != "its run ended FAILED" || s.pokes != 1 {
		t.Fatalf("cleaned up: %+v pokes %d", f, s.pokes)
	}
	// A cluster that would not go: FAILED_CLEANUP saying why, and not
	// tried again.
	s = newSet(Fields{Status: api.ReplicaFailed})
	s.downErr = errors.New("cloud says no\ndetail")
	if _, err := CleanUp(ctx, s, 1, api.ReplicaFailed, "c-1"); err != nil {
		t.Fatal(err)
	}
	if f := s.members[1]; f.Status != api.ReplicaFailedCleanup || !f.CleanedUp || f.Reason != "cloud says no" {
		t.Fatalf("would not go: %+v", f)
	}
}

// TestFailedToProvisionIsCleanedUp: a member whose launch failed for
// good, or whose cluster is another's, has no cluster of its own left to
// tear down.
func TestFailedToProvisionIsCleanedUp(t *testing.T) {
	ctx := context.Background()
	s := newSet(Fields{Status: api.ReplicaProvisioning}, Fields{Status: api.ReplicaProvisioning})
	if _, err := Failed(ctx, s, 1, errors.New("no such instance type"), true, gap, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Foreign(ctx, s, 2, "not ours"); err != nil {
		t.Fatal(err)
	}
	for id, f := range s.members {
		if !f.CleanedUp {
			t.Errorf("member %d: %+v", id, f)
		}
	}
}
