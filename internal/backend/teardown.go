package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/state"
)

// errInterrupted is the cause of a launch's context that a `sky down` of
// its cluster cancelled.
var errInterrupted = errors.New("interrupted by `sky down`")

// launchRun is a launch in progress on this server, from the moment it
// holds its cluster's lock until it lets go of it (its job submitted, or
// failed): what `sky down` interrupts.
type launchRun struct {
	user   string
	cancel context.CancelCauseFunc
}

// startLaunch records that a launch of cluster name by user holds the
// cluster's lock; the returned func forgets it.
func (b *Backend) startLaunch(name, user string, cancel context.CancelCauseFunc) func() {
	run := &launchRun{user: user, cancel: cancel}
	b.mu.Lock()
	if b.launches == nil {
		b.launches = map[string]*launchRun{}
	}
	b.launches[name] = run
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		if b.launches[name] == run {
			delete(b.launches, name)
		}
		b.mu.Unlock()
	}
}

// interruptLaunch cancels the launch of cluster name in progress on this
// server, if any and if user may take the cluster down (its owner, or any
// user with allUsers, as loadCluster decides), and says whether it did.
// The launch then stops at its next step, lets go of the lock, and the
// teardown that waits for it removes what it made.
func (b *Backend) interruptLaunch(name, user string, allUsers bool) bool {
	b.mu.Lock()
	run := b.launches[name]
	b.mu.Unlock()
	if run == nil || (!allUsers && user != "" && run.user != "" && run.user != user) {
		return false
	}
	run.cancel(errInterrupted)
	return true
}

// interruptedError is what an interrupted launch returns in place of the
// step's own error (a cancelled context, a killed command).
func interruptedError(ctx context.Context, name string, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), errInterrupted) {
		return err
	}
	return &ClusterError{Type: "ClusterNotUpError", Msg: fmt.Sprintf("The launch of cluster %q was interrupted by `sky down %s`; what it had made is torn down.", name, name)}
}

// sweepLockWait bounds how long the sweeper waits for another server's
// hold on a cluster before looking again later.
const sweepLockWait = 2 * time.Second

// SweepNames lists what the sweeper is to look at: the clusters that have
// something left on an infrastructure of this machine (infra.Remnants)
// and no record, and the recorded clusters whose teardown began and did
// not finish (its server died, or it failed). Each is looked at again
// under the cluster's lock before anything is done (ReapOrphan).
func (b *Backend) SweepNames(ctx context.Context) ([]string, error) {
	set := map[string]bool{}
	var errs []error
	if b.Infras != nil {
		for _, in := range b.Infras.All() {
			rem, ok := in.(infra.Remnants)
			if !ok {
				continue
			}
			names, err := rem.Remnants()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, n := range names {
				set[n] = true
			}
		}
	}
	cs, err := b.Store.ListClusters(ctx, state.ClusterFilter{})
	if err != nil {
		return nil, err
	}
	recorded := map[string]bool{}
	for _, c := range cs {
		h, err := HandleOf(c)
		recorded[c.Name] = err == nil && h.Terminating
	}
	remnants := make([]string, 0, len(set))
	for n := range set {
		remnants = append(remnants, n)
	}
	return toSweep(remnants, recorded), errors.Join(errs...)
}

// toSweep decides which clusters the sweeper looks at, from the names
// with remains on this machine and the recorded clusters (true: its
// teardown began). A recorded cluster is its record's operations' (down,
// refresh) unless its teardown began and no one is finishing it; a
// remnant no record holds is left over.
func toSweep(remnants []string, recorded map[string]bool) []string {
	set := map[string]bool{}
	for _, n := range remnants {
		if _, ok := recorded[n]; !ok {
			set[n] = true
		}
	}
	for n, terminating := range recorded {
		if terminating {
			set[n] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ReapOrphan finishes what a teardown left: the remains on this
// machine's infrastructures of cluster name when no record holds them, or
// the whole teardown of a recorded cluster marked Terminating whose
// teardown no one is carrying out. It says whether it did anything, and
// returns ErrBusy when an operation holds the cluster (the next sweep
// looks again).
//
// Why this never reaps a cluster being made or used: every operation that
// creates a cluster's resources (a launch, a start) holds the cluster's
// lock from before it writes the cluster's record (recordLaunch, before
// any provisioning) until it lets go, and a teardown holds it until the
// record is gone, after the resources. So under the lock, "no record"
// means no one is making or using this cluster: what is on the machine
// under its name is left over (a teardown whose failure was ignored, a
// --purge, a record lost), and nothing will be made under
// that name until a launch takes the lock after this returns. A record
// marked Terminating under the lock is a teardown that was cut short or
// failed: no launch reuses such a cluster, so finishing it takes nothing
// from anyone. The same holds right after a crash: a launch cut short
// left its record behind (INIT, not Terminating), which its own retry or
// `sky down` handles; the sweeper leaves it alone.
func (b *Backend) ReapOrphan(ctx context.Context, name string, log io.Writer) (bool, error) {
	unlock, err := b.tryLock(ctx, name, sweepLockWait)
	if err != nil {
		return false, err
	}
	defer unlock()
	c, err := b.Store.GetCluster(ctx, name)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return false, err
	}
	// A record of another infrastructure (a name reused elsewhere after a
	// lost teardown here) does not hold what is here.
	var recorded string
	if c != nil {
		h, herr := HandleOf(c)
		if herr != nil {
			return false, herr
		}
		if h.Terminating {
			fmt.Fprintf(log, "Finishing the teardown of cluster %s that was cut short.\n", name)
			if err := b.downLocked(ctx, c, h, false, log); err != nil {
				return false, err
			}
			return true, nil
		}
		id, perr := infra.ParseID(h.Infra)
		if perr != nil {
			return false, nil // not ours to judge
		}
		recorded = id.Kind
	}
	if b.Infras == nil {
		return false, nil
	}
	reaped := false
	var errs []error
	for _, in := range b.Infras.All() {
		rem, ok := in.(infra.Remnants)
		if !ok || in.Kind() == recorded {
			continue
		}
		names, err := rem.Remnants()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !contains(names, name) {
			continue
		}
		if err := rem.Reap(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("reaping what is left of cluster %s on %s: %w", name, in.Kind(), err))
			continue
		}
		reaped = true
		fmt.Fprintf(log, "Reaped what was left of cluster %s on %s (no cluster record held it).\n", name, in.Kind())
	}
	return reaped, errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
