package jobs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

func testStore(t *testing.T) *state.Store {
	t.Helper()
	st, err := state.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestPoolStatusShowsOwnPools: a user's pool status lists their own
// pools, a named pool of another user is reported missing, and the
// admin sees every pool.
func TestPoolStatusShowsOwnPools(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	e := &Env{Store: st, Home: t.TempDir()}
	for _, p := range []*state.Pool{
		{RowMeta: state.RowMeta{Name: "ap", UserHash: "h-alice", UserName: "alice"}, SpecVersion: 1},
		{RowMeta: state.RowMeta{Name: "bp", UserHash: "h-bob", UserName: "bob"}, SpecVersion: 1},
	} {
		if err := st.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	names := func(recs []api.PoolRecord) string {
		var out []string
		for _, r := range recs {
			out = append(out, r.Name)
		}
		return strings.Join(out, ",")
	}
	bob := api.User{ID: "h-bob", Name: "bob", Role: state.RoleUser}
	admin := api.User{ID: "h-admin", Name: "admin", Role: state.RoleAdmin}
	recs, err := e.PoolStatus(ctx, api.PoolStatusBody{}, bob)
	if err != nil || names(recs) != "bp" {
		t.Errorf("bob's pool status: %q, %v; want only bp", names(recs), err)
	}
	_, hidden := e.PoolStatus(ctx, api.PoolStatusBody{Names: []string{"ap"}}, bob)
	_, missing := e.PoolStatus(ctx, api.PoolStatusBody{Names: []string{"ap"}}, api.User{ID: "h-carol", Name: "carol"})
	if hidden == nil || missing == nil || hidden.Error() != missing.Error() {
		t.Errorf("bob naming alice's pool: %v; another user naming it: %v; want the same missing-pool error", hidden, missing)
	}
	recs, err = e.PoolStatus(ctx, api.PoolStatusBody{}, admin)
	if err != nil || names(recs) != "ap,bp" {
		t.Errorf("the admin's pool status: %q, %v; want ap,bp", names(recs), err)
	}
}

// TestWorkerWithLeftoverTakesNoJob: a READY worker on which a cancelled
// job's run may still go is not offered to the next job.
func TestWorkerWithLeftoverTakesNoJob(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	e := &Env{Store: st, Home: t.TempDir()}
	p := &state.Pool{RowMeta: state.RowMeta{Name: "ap", UserHash: "h-alice", UserName: "alice"}, SpecVersion: 1,
		Workers: []*state.PoolWorker{
			{ID: 1, SpecVersion: 1, Status: api.WorkerReady, Cluster: "ap-1", Leftovers: []int{7}},
			{ID: 2, SpecVersion: 1, Status: api.WorkerReady, Cluster: "ap-2"},
		}}
	if err := st.CreatePool(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"ap-1", "ap-2"} {
		if err := st.CreateCluster(ctx, &state.Cluster{Name: c, UserHash: "h-alice", UserName: "alice", Status: state.ClusterUp}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	views, err := e.readyWorkers(ctx, p, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 1 || views[0].Cluster != "ap-2" {
		t.Errorf("workers offered: %+v; want only ap-2 (ap-1 has a leftover run)", views)
	}
}
