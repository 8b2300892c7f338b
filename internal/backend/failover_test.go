package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
)

// newTestBackend is a backend over a real SQLite store and a real local
// provisioner in temp dirs, with a machine of cpus CPUs.
func newTestBackend(t *testing.T, cpus float64) *Backend {
	t.Helper()
	dir := t.TempDir()
	st, err := state.OpenSQLite(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	in, err := local.Open(infra.Env{Home: dir, Settings: st})
	if err != nil {
		t.Fatal(err)
	}
	in.(*local.Infra).P.CPUs = cpus
	return &Backend{Home: dir, Store: st, Infras: infra.NewSet(in), RetryDelay: 10 * time.Millisecond}
}

// localPlanner always proposes the local infra unless it is blocked, as
// the optimizer would; onCall runs before each answer.
func localPlanner(onCall func(n int)) Planner {
	n := 0
	return func(_ context.Context, _ *resources.Resources, _ int, blocked []optimizer.Blocked) (*optimizer.Plan, error) {
		n++
		onCall(n)
		for _, b := range blocked {
			if b.Cloud == local.Kind {
				return nil, errors.New("no candidate left")
			}
		}
		return &optimizer.Plan{Tasks: []optimizer.TaskPlan{{Chosen: optimizer.Candidate{Cloud: local.Kind, NumNodes: 1}}}}, nil
	}
}

func TestFailoverWithoutRetryReportsEveryAttempt(t *testing.T) {
	b := newTestBackend(t, 1)
	res, _ := resources.Parse(map[string]any{"cpus": 2})
	var log bytes.Buffer
	_, _, err := b.provisionWithFailover(context.Background(), "c1", api.TaskSpec{NumNodes: 1}, res, User{Name: "u"},
		localPlanner(func(int) {}), api.LaunchBody{}, nil, nil, &log)
	if err == nil || !strings.Contains(err.Error(), "Provisioning attempts that failed") || !strings.Contains(err.Error(), "no capacity on local") {
		t.Fatalf("want the capacity failure listed, got %v\nlog:\n%s", err, log.String())
	}
	if _, err := b.Store.GetCluster(context.Background(), "c1"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a cluster that never came up must leave no record, got %v", err)
	}
}

func TestRetryUntilUpWaitsForCapacity(t *testing.T) {
	b := newTestBackend(t, 1)
	res, _ := resources.Parse(map[string]any{"cpus": 2})
	var log bytes.Buffer
	// Capacity appears on the third planning call (the second round).
	plan := localPlanner(func(n int) {
		if n == 3 {
			localOf(b).CPUs = 4
		}
	})
	c, h, err := b.provisionWithFailover(context.Background(), "c2", api.TaskSpec{NumNodes: 1}, res, User{Name: "u"},
		plan, api.LaunchBody{Retry: true}, nil, nil, &log)
	if err != nil {
		t.Fatalf("retry-until-up: %v\nlog:\n%s", err, log.String())
	}
	t.Cleanup(func() { _ = localOf(b).Terminate(context.Background(), "c2") })
	if c.Name != "c2" || h.Info == nil || len(h.Info.Nodes) != 1 {
		t.Fatalf("cluster not provisioned: %+v %+v", c, h)
	}
	if !strings.Contains(log.String(), "Retrying in 10ms") {
		t.Fatalf("the wait is not reported:\n%s", log.String())
	}
}

func TestRetryUntilUpStopsWhenCancelled(t *testing.T) {
	b := newTestBackend(t, 1)
	res, _ := resources.Parse(map[string]any{"cpus": 2})
	ctx, cancel := context.WithCancel(context.Background())
	plan := localPlanner(func(n int) {
		if n == 4 {
			cancel()
		}
	})
	_, _, err := b.provisionWithFailover(ctx, "c3", api.TaskSpec{NumNodes: 1}, res, User{Name: "u"},
		plan, api.LaunchBody{Retry: true}, nil, nil, &bytes.Buffer{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestRetryDelayDoublesToAMinute(t *testing.T) {
	b := &Backend{}
	for round, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 4: 40 * time.Second, 5: time.Minute, 9: time.Minute} {
		if got := b.retryDelay(round); got != want {
			t.Errorf("retryDelay(%d) = %s, want %s", round, got, want)
		}
	}
}

// localOf is the local provisioner of a test backend.
func localOf(b *Backend) *local.Provisioner {
	in, err := b.Infras.Get(infra.ID{Kind: local.Kind})
	if err != nil {
		panic(err)
	}
	return in.(*local.Infra).P
}

func TestAfterProvisionError(t *testing.T) {
	cand := optimizer.Candidate{Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge"}
	slurm := optimizer.Candidate{Cloud: "slurm", Region: "cluster-a", InstanceType: "gpu-node"}
	capacity := &provision.CapacityError{Where: "aws/us-east-1a", Msg: "InsufficientInstanceCapacity"}
	auth := &provision.AuthError{Where: "aws", Msg: "the security token included in the request is invalid"}
	for _, c := range []struct {
		name       string
		err        error
		cand       optimizer.Candidate
		byCapacity bool
		want       failoverStep
	}{
		{"out of capacity blocks that zone's instance type only", capacity, cand, false,
			failoverStep{next: true, capacity: true, block: optimizer.Blocked{Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge"}}},
		{"out of capacity, wrapped", fmt.Errorf("provision: %w", capacity), cand, false,
			failoverStep{next: true, capacity: true, block: optimizer.Blocked{Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge"}}},
		{"a capacity infra out of capacity blocks its place", &provision.CapacityError{Where: "slurm/cluster-a"}, slurm, true,
			failoverStep{next: true, capacity: true, block: optimizer.Blocked{Cloud: "slurm", Region: "cluster-a", InstanceType: "gpu-node"}}},
		{"refused credentials block the whole cloud", auth, cand, false,
			failoverStep{next: true, block: optimizer.Blocked{Cloud: "aws"}}},
		{"refused credentials of a capacity infra block that place only", fmt.Errorf("login: %w", &provision.AuthError{Where: "slurm/cluster-a"}), slurm, true,
			failoverStep{next: true, block: optimizer.Blocked{Cloud: "slurm", Region: "cluster-a"}}},
		{"a bad spec ends the launch", &provision.ConfigError{Where: "aws", Msg: "image not found"}, cand, false, failoverStep{}},
		{"any other error ends the launch", errors.New("connection reset"), cand, false, failoverStep{}},
	} {
		if got := afterProvisionError(c.err, c.cand, c.byCapacity); got != c.want {
			t.Errorf("%s: afterProvisionError = %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := afterUnusable(cand); got != (failoverStep{next: true, block: optimizer.Blocked{Cloud: "aws"}}) {
		t.Errorf("an infrastructure that cannot be used: %+v, want its every place blocked", got)
	}
}

func TestAfterPlanError(t *testing.T) {
	none := errors.New("no candidate left")
	two := []string{"no capacity on aws/us-east-1a", "authentication failed on gcp"}
	for _, c := range []struct {
		name             string
		retry            bool
		failures         []string
		capacityFailures int
		startOver        bool
		outOfCapacity    bool
		listed           bool
	}{
		{"nothing fits at all: the planner's error alone", false, nil, 0, false, false, false},
		{"nothing fits, --retry-until-up: nothing to wait for", true, nil, 0, false, false, false},
		{"every candidate out of capacity, --retry-until-up: start over", true, two[:1], 1, true, false, false},
		{"some out of capacity, --retry-until-up: start over", true, two, 1, true, false, false},
		{"out of capacity without -r: fails, as out of capacity", false, two, 1, false, true, true},
		{"only refused credentials, -r: nothing frees up", true, two[1:], 0, false, false, true},
	} {
		startOver, err := afterPlanError(none, c.retry, c.failures, c.capacityFailures)
		if startOver != c.startOver {
			t.Errorf("%s: startOver = %v, want %v", c.name, startOver, c.startOver)
			continue
		}
		if startOver {
			if err != nil {
				t.Errorf("%s: starting over with an error %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, none) || errors.Is(err, ErrOutOfCapacity) != c.outOfCapacity ||
			strings.Contains(err.Error(), "Provisioning attempts that failed") != c.listed {
			t.Errorf("%s: err = %q (out of capacity %v), want the planner's error, out of capacity %v, attempts listed %v",
				c.name, err, errors.Is(err, ErrOutOfCapacity), c.outOfCapacity, c.listed)
		}
		for _, f := range c.failures {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: %q is not listed in %q", c.name, f, err)
			}
		}
	}
}
