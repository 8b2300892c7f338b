package jobs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/state"
)

func TestMayUsePool(t *testing.T) {
	alices := &state.Pool{RowMeta: state.RowMeta{Name: "ap", UserHash: "h-alice", UserName: "alice"}}
	legacy := &state.Pool{RowMeta: state.RowMeta{Name: "old"}} // no owner recorded
	alice := api.User{ID: "h-alice", Name: "alice", Role: state.RoleUser}
	bob := api.User{ID: "h-bob", Name: "bob", Role: state.RoleUser}
	admin := api.User{ID: "h-admin", Name: "admin", Role: state.RoleAdmin}
	nameless := api.User{Name: "alice", Role: state.RoleUser} // a name alone proves nothing
	for _, c := range []struct {
		name   string
		u      api.User
		p      *state.Pool
		ok     bool
		hidden bool // refused as a pool that does not exist
	}{
		{"owner", alice, alices, true, false},
		{"another user", bob, alices, false, true},
		{"admin", admin, alices, true, false},
		{"same name, no id", nameless, alices, false, true},
		{"no owner recorded, user", bob, legacy, false, true},
		{"no owner recorded, admin", admin, legacy, true, false},
		{"no pool", alice, nil, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := mayUsePool(c.u, c.p)
			if (err == nil) != c.ok {
				t.Fatalf("mayUsePool = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				t.Errorf("refusal %v is not told as a missing pool", err)
			}
			if errors.Is(err, errPoolHidden) != c.hidden {
				t.Errorf("hidden = %v, want %v", errors.Is(err, errPoolHidden), c.hidden)
			}
		})
	}
}

func TestActorOnPoolWorkers(t *testing.T) {
	e := &Env{}
	own := e.actor(&state.ManagedJob{UserName: "bob", UserHash: "h-bob"})
	if own != (backend.User{Name: "bob", Hash: "h-bob"}) {
		t.Errorf("a job's own cluster: acts as %+v, want its user, checked as the owner", own)
	}
	pj := e.actor(&state.ManagedJob{UserName: "bob", UserHash: "h-bob", Pool: "ap"})
	if pj != (backend.User{Name: "bob", Hash: "h-bob", Controller: true}) {
		t.Errorf("a pool job's worker: acts as %+v, want the controller for bob's job", pj)
	}
}

func TestClassifyClusterErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want fault
	}{
		{"another user's cluster", &backend.ClusterError{Type: backend.TypeNotOwner, Msg: `Cluster "ap-1" belongs to user alice`}, faultDenied},
		{"wrapped owner error", fmt.Errorf("reading the jobs of worker ap-1: %w", &backend.ClusterError{Type: backend.TypeNotOwner}), faultDenied},
		{"file permission", &fs.PathError{Op: "open", Path: "/x", Err: os.ErrPermission}, faultDenied},
		{"no such cluster", &backend.ClusterError{Type: "ClusterDoesNotExist"}, faultGone},
		{"stopped cluster", &backend.ClusterError{Type: "ClusterNotUpError"}, faultNoAnswer},
		{"timeout", fmt.Errorf("agent queue on 10.0.0.2: %w", os.ErrDeadlineExceeded), faultNoAnswer},
		{"plain error", errors.New("connection refused"), faultNoAnswer},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := classify(c.err); got != c.want {
				t.Errorf("classify(%v) = %d, want %d", c.err, got, c.want)
			}
		})
	}
}

func TestCancelGiveUp(t *testing.T) {
	for tries, want := range map[int]bool{0: false, 1: false, cancelTries - 1: false, cancelTries: true, cancelTries + 5: true} {
		if got := cancelGiveUp(tries); got != want {
			t.Errorf("cancelGiveUp(%d) = %v, want %v", tries, got, want)
		}
	}
}
