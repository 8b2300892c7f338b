package replicaset

import (
	"context"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
)

// The member controller: one key per member ("<set>/<id>"), one step of
// the member's life per reconcile, chosen by its status. The steps that
// are the same for both sets (watching for a lost cluster, draining,
// dropping) are this package's; what differs comes from the set's hooks
// (Members): how a member is launched, what a running member is judged
// by, how long a retired one drains, how a failed one is cleaned up.

// Members is a set whose members the member controller steps.
type Members interface {
	Set
	// Launch runs a launch attempt of a PENDING or PROVISIONING member
	// (Begin, then Launch).
	Launch(ctx context.Context, id int) (controller.Result, error)
	// Watch looks at a STARTING, NOT_READY or READY member (Watch).
	Watch(ctx context.Context, id int) (controller.Result, error)
	// Drain says how much longer a SHUTTING_DOWN member waits before its
	// cluster goes (0: it goes now).
	Drain(ctx context.Context, id int) time.Duration
	// CleanUp tears a failed member's cluster down; the member stays
	// listed with why it failed.
	CleanUp(ctx context.Context, id int) (controller.Result, error)
}

// Stepped is a member as the member controller sees it.
type Stepped struct {
	ID              int
	Status, Cluster string
	// CleanedUp says a failed member's cluster is gone.
	CleanedUp bool
	// Force says a cluster that will not go does not keep its member
	// (the user purges).
	Force bool
}

// Step takes the next step of member m: launch it, watch it, drain and
// drop it once retired, drop it once lost, clean a failed one up.
func Step(ctx context.Context, s Members, m Stepped) (controller.Result, error) {
	switch ph := PhaseOf(m.Status); {
	case ph == Pending || ph == Provisioning:
		return s.Launch(ctx, m.ID)
	case ph.Live():
		return s.Watch(ctx, m.ID)
	case ph == Draining:
		if wait := s.Drain(ctx, m.ID); wait > 0 {
			return controller.Result{RequeueAfter: wait}, nil
		}
		return Drop(ctx, s, m.ID, m.Cluster, []string{m.Status}, m.Force)
	case m.Status == api.ReplicaPreempted:
		return Drop(ctx, s, m.ID, m.Cluster, []string{m.Status}, m.Force)
	case api.ReplicaFailedStatus(m.Status) && !m.CleanedUp:
		return s.CleanUp(ctx, m.ID)
	}
	return controller.Result{}, nil
}

// Reconcile is the member controller's reconcile of key: open reads
// member id of set (nil: the set or the member is gone, or the set's
// own steps own it now), and Step takes its next step.
func Reconcile(ctx context.Context, key string, open func(ctx context.Context, set string, id int) (Members, *Stepped, error)) (controller.Result, error) {
	set, id, err := ParseKey(key)
	if err != nil {
		return controller.Result{}, err
	}
	s, m, err := open(ctx, set, id)
	if err != nil || m == nil {
		return controller.Result{}, err
	}
	return Step(ctx, s, *m)
}
