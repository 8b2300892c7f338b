package backend

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/state"
)

// Autostop on clusters whose head cannot call back into this API server
// (infrastructures marked infra.NoCallback: the head is another machine)
// is carried out by the server: the head agent decides that the cluster is
// idle and says so (autostopping); the server's autostop controller sees it
// and tears the cluster down. Clusters whose head calls back are left
// alone.

// ErrNotWatched says a cluster needs no server-side autostop watch now
// (not UP, no autostop set, or its head calls back itself).
var ErrNotWatched = errors.New("no server-side autostop watch")

// CheckAutostop looks at one cluster: when its head agent says autostop
// fired, the cluster is torn down. It returns ErrNotWatched when there is
// nothing to watch, so the caller can stop looking until the next resync.
// It is idempotent: a cluster already gone is nothing to watch.
func (b *Backend) CheckAutostop(ctx context.Context, name string, log io.Writer) error {
	c, err := b.Store.GetCluster(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return ErrNotWatched
	}
	if err != nil {
		return err
	}
	if c.Status != state.ClusterUp || c.Autostop < 0 {
		return ErrNotWatched
	}
	h, err := HandleOf(c)
	if err != nil || h.Info == nil {
		return ErrNotWatched
	}
	if in, _, err := b.plugin(h); err != nil {
		return ErrNotWatched
	} else if _, ok := in.(infra.NoCallback); !ok {
		return ErrNotWatched // the head calls the server back itself
	}
	runners, err := b.runners(h)
	if err != nil {
		return err
	}
	var rep agentapi.StatusReport
	if err := b.agentCall(ctx, runners[0], nil, &rep, "status"); err != nil {
		return err
	}
	if rep.Autostop == nil || !rep.Autostop.Autostopping {
		return nil
	}
	fmt.Fprintf(log, "autostop: cluster %s has been idle for %d minutes; tearing it down\n", c.Name, c.Autostop)
	if err := b.Down(ctx, c.Name, User{Hash: c.UserHash, Name: c.UserName}, true, false, log); err != nil {
		return fmt.Errorf("autostop: tearing down %s: %w", c.Name, err)
	}
	return nil
}
