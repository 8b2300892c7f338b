package replicaset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/state"
)

// The member lifecycle both sets share: a member is PENDING until its
// launch attempt begins (PROVISIONING), goes back to PENDING with a
// growing gap when an attempt fails (FAILED_PROVISION when retrying
// cannot help), is PREEMPTED when its cluster is lost, and is dropped
// once its cluster is down. Each step is one conditional update of the
// set's row through Set.Move, so a controller killed anywhere and run
// again takes the step again or finds it taken.

// Fields are the lifecycle fields every member record has.
type Fields struct {
	Status, Reason string
	Attempt, Tries int
	NextTryAt      float64
	// Disowned says the member's cluster name is taken by a cluster the
	// set did not make: that cluster is never adopted or torn down as
	// the member's.
	Disowned bool
	// CleanedUp says a failed member has no cluster left of its own to
	// tear down.
	CleanedUp bool
}

// Set is one replica set as the lifecycle steps see it; SkyServe
// implements it over a service's row, pools over a pool's.
type Set interface {
	// Noun names a member in notes: "Replica", "Worker".
	Noun() string
	// Move applies edit to member id's fields if its status is still one
	// of from, in one conditional update of the set's row; ok is false
	// when the member is gone or moved on (or the set's own rules refuse).
	Move(ctx context.Context, id int, from []string, edit func(f *Fields)) (ok bool, err error)
	// Remove drops member id from the set's row if its status is one of
	// from, and its log with it.
	Remove(ctx context.Context, id int, from []string) error
	// Down tears member id's cluster down if it exists.
	Down(ctx context.Context, id int, cluster string) error
	// Note writes one line to the set's controller log.
	Note(format string, args ...any)
	// Poke asks the set's controller to plan again.
	Poke()
}

// retryNow is how soon a step whose update found the member moved on
// runs again, to see where it is now.
const retryNow = 10 * time.Millisecond

// Key is member id's key on a member controller: "<set>/<id>".
func Key(set string, id int) string { return set + "/" + strconv.Itoa(id) }

// ParseKey splits a member key; the error is terminal (a key that does
// not parse never will).
func ParseKey(key string) (set string, id int, err error) {
	i := strings.LastIndexByte(key, '/')
	if i >= 0 {
		if id, err = strconv.Atoi(key[i+1:]); err == nil {
			return key[:i], id, nil
		}
	}
	return "", 0, controller.Terminal(fmt.Errorf("member key %q is not <name>/<id>", key))
}

// Begin starts a launch attempt of a PENDING member once its retry gap
// is over: PROVISIONING, with the attempt counted (its job is tagged
// with it). ok says the attempt is on; otherwise the controller comes
// back after res.
func Begin(ctx context.Context, s Set, id int, f Fields, now float64) (res controller.Result, ok bool, err error) {
	if f.Status != api.ReplicaPending {
		return controller.Result{}, f.Status == api.ReplicaProvisioning, nil
	}
	if wait := f.NextTryAt - now; wait > 0 {
		return controller.Result{RequeueAfter: time.Duration(wait * float64(time.Second))}, false, nil
	}
	ok, err = s.Move(ctx, id, []string{api.ReplicaPending}, func(f *Fields) {
		f.Status = api.ReplicaProvisioning
		f.Attempt++
	})
	if err != nil || !ok {
		return controller.Result{RequeueAfter: retryNow}, false, err
	}
	return controller.Result{}, true, nil
}

// Failed records a failed launch attempt of member id: PENDING again
// after gap(tries), or FAILED_PROVISION when final says retrying cannot
// help (the set's controller is told: its newest version may be broken).
func Failed(ctx context.Context, s Set, id int, cause error, final bool, gap func(tries int) time.Duration, now float64) (controller.Result, error) {
	why := firstLine(cause.Error())
	var wait time.Duration
	ok, err := s.Move(ctx, id, []string{api.ReplicaProvisioning}, func(f *Fields) {
		f.Tries++
		wait = gap(f.Tries)
		f.Status, f.NextTryAt, f.Reason = api.ReplicaPending, now+wait.Seconds(), why
		if final {
			// A failed launch leaves no cluster behind (Launch tore it down).
			f.Status, f.CleanedUp = api.ReplicaFailedProvision, true
		}
	})
	if err != nil || !ok {
		return controller.Result{RequeueAfter: retryNow}, err
	}
	if final {
		s.Note("%s %d: launch failed (%s); not retried.", s.Noun(), id, why)
		s.Poke()
		return controller.Result{}, nil
	}
	s.Note("%s %d: launch failed (%s); retrying in %s.", s.Noun(), id, why, wait.Round(time.Second))
	return controller.Result{RequeueAfter: wait}, nil
}

// Foreign refuses a member whose cluster name is taken by a cluster the
// set did not make (a user's, another set's): it is FAILED_PROVISION
// and Disowned.
func Foreign(ctx context.Context, s Set, id int, why string) (controller.Result, error) {
	_, err := s.Move(ctx, id, []string{api.ReplicaProvisioning}, func(f *Fields) {
		f.Status, f.Reason, f.Disowned, f.CleanedUp = api.ReplicaFailedProvision, why, true, true
	})
	s.Note("%s %d: %s.", s.Noun(), id, why)
	s.Poke()
	return controller.Result{}, err
}

// Made says whether cluster c is one the set made: managed, and created
// with the set's command.
func Made(c *state.Cluster, command string) bool {
	return c.IsManaged && c.LastCreationCommand == command
}

// Lost marks member id, whose cluster is gone, PREEMPTED; the set's
// controller launches another in its place.
func Lost(ctx context.Context, s Set, id int, from, why string) (controller.Result, error) {
	return Mark(ctx, s, id, from, api.ReplicaPreempted, why)
}

// Mark moves member id from status from to status, saying why, and
// tells the set's controller (a member out of the ready set changes its
// plan).
func Mark(ctx context.Context, s Set, id int, from, status, why string) (controller.Result, error) {
	ok, err := s.Move(ctx, id, []string{from}, func(f *Fields) {
		f.Status, f.Reason = status, why
	})
	if err != nil || !ok {
		return controller.Result{RequeueAfter: retryNow}, err
	}
	s.Note("%s %d is %s: %s.", s.Noun(), id, status, why)
	s.Poke()
	return controller.Result{RequeueAfter: retryNow}, nil
}

// Launched records that member id's launch attempt submitted its job:
// record is one conditional update of the set's row (PROVISIONING to
// STARTING), saying whether it took and whether the member (or the
// whole set, state.ErrNotFound) is gone. A member gone while its launch
// ran leaves nobody else knowing of its cluster: that is torn down now.
// One that moved on (retired) is its next step's to tear down.
func Launched(ctx context.Context, s Set, id int, cluster string, record func() (took, gone bool, err error)) (bool, controller.Result, error) {
	took, gone, err := record()
	if errors.Is(err, state.ErrNotFound) {
		gone, err = true, nil
	}
	switch {
	case err != nil:
		return false, controller.Result{}, err
	case gone:
		return false, controller.Result{}, s.Down(ctx, id, cluster)
	case !took:
		return false, controller.Result{RequeueAfter: retryNow}, nil
	}
	return true, controller.Result{}, nil
}

// Retire moves member id from status from to SHUTTING_DOWN, saying
// why; its next steps drain it and tear its cluster down (Step).
func Retire(ctx context.Context, s Set, id int, from, why string) (controller.Result, error) {
	_, err := s.Move(ctx, id, []string{from}, func(f *Fields) {
		f.Status, f.Reason = api.ReplicaShuttingDown, why
	})
	return controller.Result{RequeueAfter: retryNow}, err
}

// Drop tears member id's cluster down and removes the member if its
// status is still one of from. With force a cluster that would not go
// does not keep the member (the user purges).
func Drop(ctx context.Context, s Set, id int, cluster string, from []string, force bool) (controller.Result, error) {
	if err := s.Down(ctx, id, cluster); err != nil && !force {
		return controller.Result{}, err
	}
	if err := s.Remove(ctx, id, from); err != nil {
		return controller.Result{}, err
	}
	s.Note("%s %d removed.", s.Noun(), id)
	s.Poke()
	return controller.Result{}, nil
}

// CleanUp tears failed member id's cluster down; the member stays
// listed with why it failed, cleaned up, or FAILED_CLEANUP saying why
// its cluster would not go.
func CleanUp(ctx context.Context, s Set, id int, status, cluster string) (controller.Result, error) {
	derr := s.Down(ctx, id, cluster)
	_, err := s.Move(ctx, id, []string{status}, func(f *Fields) {
		f.CleanedUp = true
		if derr != nil {
			f.Status, f.Reason = api.ReplicaFailedCleanup, firstLine(derr.Error())
		}
	})
	s.Poke()
	return controller.Result{}, err
}

// firstLine is the reason a note and a member record show for an error:
// its first line, at most 300 bytes.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// Cloud is what a set's members are launched through: the state, the
// backend acting as the set's owner, and the optimizer's plan.
type Cloud struct {
	Store   *state.Store
	Backend *backend.Backend
	Plan    func(ctx context.Context, body api.LaunchBody, log io.Writer) (backend.Planner, error)
	Owner   backend.User
}

// Attempt is one launch attempt of a member, as its set words it.
type Attempt struct {
	ID, Attempt int
	// Body launches the member: its cluster, the set's creation command
	// and the tag of the attempt's job.
	Body api.LaunchBody
	// Foreign is why the member fails when a cluster of its name is not
	// one the set made.
	Foreign string
	// Job names the job a launch submits ("job", "setup job"), Announce
	// is the log's line for a launch, and Log the member's log.
	Job, Announce string
	Log           io.Writer
}

// Launch carries out a launch attempt (after Begin): a cluster of the
// member's name that the set did not make refuses it (Foreign); the job
// this attempt submitted before a restart is adopted; otherwise the
// member is launched. A failed launch leaves no cluster behind and is
// retried or not (Failed). launched records the job the member runs.
func Launch(ctx context.Context, s Set, c Cloud, a Attempt, launched func(jobID int) (controller.Result, error),
	gap func(tries int) time.Duration, now func() float64) (controller.Result, error) {
	cluster := a.Body.ClusterName
	if cl, err := c.Store.GetCluster(ctx, cluster); err == nil && !Made(cl, a.Body.Command) {
		return Foreign(ctx, s, a.ID, a.Foreign)
	}
	if job, err := c.Backend.TaggedJob(ctx, cluster, c.Owner, a.Body.Managed.Tag); err == nil && job != nil {
		fmt.Fprintf(a.Log, "Found %s %d of attempt %d on %s, submitted before a restart: following it.\n", a.Job, job.JobID, a.Attempt, cluster)
		return launched(job.JobID)
	}
	fmt.Fprintln(a.Log, a.Announce)
	plan, err := c.Plan(ctx, a.Body, a.Log)
	var res *api.LaunchResult
	if err == nil {
		res, err = c.Backend.Launch(ctx, a.Body, c.Owner, plan, a.Log)
	}
	if err != nil {
		if ctx.Err() != nil {
			return controller.Result{}, ctx.Err()
		}
		fmt.Fprintf(a.Log, "Launch failed: %s\n", err)
		_ = s.Down(ctx, a.ID, cluster)
		return Failed(ctx, s, a.ID, err, backend.Precheck(err), gap, now())
	}
	return launched(res.JobID)
}
