package backend

import (
	"context"
	"io"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/testutil"
)

// A server crash right after the nodes came up leaves the row that
// provisionWithFailover returns: INIT, "starting agents". While a launch
// holds the cluster, a refresh leaves it (that launch is not cut off);
// once nobody does, a refresh starts the agents and the cluster is UP.
func TestRefreshFinishesCutOffAgentStart(t *testing.T) {
	b := newTestBackend(t, 2)
	b.Sky = testutil.SkyBinary(t)
	ctx := context.Background()
	res, _ := resources.Parse(map[string]any{})
	user := User{Name: "u", Hash: "h"}
	if _, _, err := b.provisionWithFailover(ctx, "c1", api.TaskSpec{NumNodes: 2}, res, user,
		localPlanner(func(int) {}), api.LaunchBody{}, nil, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Down(context.Background(), "c1", user, false, true, io.Discard) })
	row := func() (*state.Cluster, string) {
		c, err := b.Store.GetCluster(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		h, err := HandleOf(c)
		if err != nil {
			t.Fatal(err)
		}
		return c, h.Reason
	}
	if c, reason := row(); c.Status != state.ClusterInit || reason != reasonStartingAgents {
		t.Fatalf("after provisioning: %s (%s), want INIT (%s)", c.Status, reason, reasonStartingAgents)
	}

	unlock, err := b.lock(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := row()
	if _, err := b.Refresh(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c, reason := row(); c.Status != state.ClusterInit || reason != reasonStartingAgents {
		t.Errorf("refresh while a launch holds the cluster: %s (%s), want it left INIT (%s)", c.Status, reason, reasonStartingAgents)
	}
	unlock()

	c, _ = row()
	nc, err := b.Refresh(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if nc == nil || nc.Status != state.ClusterUp {
		t.Fatalf("refresh of a cut-off agent start returned %+v, want the cluster UP", nc)
	}
	// UP because the agents answer, not only because the row says so: a
	// further refresh asks the head agent and keeps it.
	if nc, err = b.Refresh(ctx, nc); err != nil || nc.Status != state.ClusterUp {
		t.Errorf("second refresh: %+v, %v; want UP", nc, err)
	}
}
