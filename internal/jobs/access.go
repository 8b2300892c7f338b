package jobs

import (
	"context"
	"fmt"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/state"
)

// Who may use a pool, and with what rights the controller acts on its
// workers.
//
// A pool is its owner's: its workers are clusters launched as the owner,
// and a job on one runs beside the owner's jobs, with the worker's files
// and whatever credentials its setup left there. SkyPilot's documents say
// nothing of one user's jobs on another's pool, so SkyGo treats a pool as
// it treats a cluster: the owner and the admins use it (submit jobs, see
// it, read its logs, resize it, tear it down); anybody else is told no
// more than that no such pool exists, so a pool's name tells nothing of
// its owner. Workspace rules (private workspaces, allowed_users) may
// narrow this, never widen it.

// errPoolHidden is a pool the user may not use: as far as they are told,
// it does not exist (errors.Is(err, state.ErrNotFound) holds).
var errPoolHidden = fmt.Errorf("the pool belongs to another user: %w", state.ErrNotFound)

// mayUsePool says whether u may use pool p; the error is errPoolHidden
// when not, so that callers answer as for a pool that does not exist.
func mayUsePool(u api.User, p *state.Pool) error {
	switch {
	case p == nil:
		return state.ErrNotFound
	case u.Role == state.RoleAdmin:
		return nil
	case u.ID != "" && u.ID == p.UserHash:
		return nil
	}
	return errPoolHidden
}

// usablePool reads pool name as u may see it: state.ErrNotFound (in the
// chain) when it does not exist or u may not use it.
func (e *Env) usablePool(ctx context.Context, u api.User, name string) (*state.Pool, error) {
	p, err := e.Store.GetPool(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := mayUsePool(u, p); err != nil {
		return nil, err
	}
	return p, nil
}

// actor is who the controller is on a task's cluster. A job's own
// cluster is its user's, so it acts as that user. A pool job runs on a
// worker of the pool's owner, which its user was admitted to at submit
// (mayUsePool): the controller acts there itself, for the job, with no
// ownership check as the job's user (who does not own the worker: such
// a check answers "belongs to user alice" on every look).
func (e *Env) actor(j *state.ManagedJob) backend.User {
	return backend.User{Name: j.UserName, Hash: j.UserHash, Controller: j.Pool != ""}
}

// fault sorts an error met on a task's cluster by what the controller
// does about it.
type fault int

const (
	// faultNoAnswer: the cluster may be there but did not answer (a
	// network blip, a busy or stopped agent); waited out for a while,
	// then the cluster counts as lost.
	faultNoAnswer fault = iota
	// faultGone: the cluster does not exist.
	faultGone
	// faultDenied: the cluster answered with a refusal of the
	// controller's rights (another user's cluster, a permission
	// error). Asking again gets the same answer, so it is never taken
	// for a cluster that did not answer: the job fails, saying why.
	faultDenied
)

// classify sorts err (not nil) from a task's cluster.
func classify(err error) fault {
	switch {
	case backend.IsPermission(err):
		return faultDenied
	case backend.IsNotFound(err):
		return faultGone
	}
	return faultNoAnswer
}

// deniedReason is the failure reason of a task the controller was
// refused on its cluster.
func deniedReason(cluster string, err error) string {
	return fmt.Sprintf("The controller was refused on cluster %s (%s); the job cannot be run or watched there, so it is not retried", cluster, firstLine(err.Error()))
}
