package backend

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/state"
)

// Autostop on clusters whose head cannot call back into this API server
// (SSH node pools: the head is another machine) is carried out here: the
// head agent decides that the cluster is idle and says so (autostopping);
// the server sees it on its next sweep and tears the cluster down. Local
// clusters call back directly and are left alone.

// AutostopSweep checks every UP cluster with autostop set whose head
// cannot call back, and tears down those whose agent says autostop fired.
// It is idempotent: a cluster already gone is skipped.
func (b *Backend) AutostopSweep(ctx context.Context, log io.Writer) {
	cs, err := b.Store.ListClusters(ctx, state.ClusterFilter{})
	if err != nil {
		fmt.Fprintf(log, "autostop sweep: %v\n", err)
		return
	}
	for _, c := range cs {
		if c.Status != state.ClusterUp || c.Autostop < 0 {
			continue
		}
		h, err := HandleOf(c)
		if err != nil || h.Info == nil || !isSSH(h) {
			continue
		}
		runners, err := b.runners(h)
		if err != nil {
			continue
		}
		var rep agentapi.StatusReport
		if err := b.agentCall(ctx, runners[0], nil, &rep, "status"); err != nil || rep.Autostop == nil || !rep.Autostop.Autostopping {
			continue
		}
		fmt.Fprintf(log, "autostop: cluster %s has been idle for %d minutes; tearing it down\n", c.Name, c.Autostop)
		if err := b.Down(ctx, c.Name, User{Hash: c.UserHash, Name: c.UserName}, true, false, log); err != nil {
			fmt.Fprintf(log, "autostop: tearing down %s: %v\n", c.Name, err)
		}
	}
}

// RunAutostopSweeps sweeps every interval until ctx ends.
func (b *Backend) RunAutostopSweeps(ctx context.Context, interval time.Duration, log io.Writer) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.AutostopSweep(ctx, log)
		}
	}
}
