package backend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// Refreshed is the outcome of refreshing one cluster: the row as it now
// is (nil when the cluster turned out to be gone), or the error that kept
// it from being refreshed, in which case Cluster is the row as it was.
type Refreshed struct {
	Cluster *state.Cluster
	Err     error
}

// RefreshAll refreshes clusters in parallel, at most workers at a time,
// each bounded by timeout, and returns the outcomes in the input order.
// One cluster that hangs or fails costs at most timeout and never delays
// the others beyond holding one worker.
func (b *Backend) RefreshAll(ctx context.Context, cs []*state.Cluster, workers int, timeout time.Duration) []Refreshed {
	out := make([]Refreshed, len(cs))
	if workers < 1 {
		workers = 1
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = b.refreshOne(ctx, c, timeout)
		}()
	}
	wg.Wait()
	return out
}

func (b *Backend) refreshOne(ctx context.Context, c *state.Cluster, timeout time.Duration) Refreshed {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	nc, err := b.Refresh(ctx, c)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %s (showing the last known status): %w", timeout, err)
		}
		return Refreshed{Cluster: c, Err: err}
	}
	return Refreshed{Cluster: nc}
}

// nodesSay is what a status refresh makes of a cluster's nodes.
type nodesSay int

const (
	// nodesGone: no node is left; the record goes.
	nodesGone nodesSay = iota
	// nodesStopped: every node is stopped; the cluster is STOPPED.
	nodesStopped
	// nodesUp: every node is up; the head agent decides the rest.
	nodesUp
	// nodesPartial: some are not up (or a STOPPED cluster's came up
	// behind SkyGo's back); the cluster is INIT, saying how many are.
	nodesPartial
)

// readNodes decides what the nodes an infrastructure reports of a
// cluster (whose record says status) mean, with the reason of a
// partial cluster.
func readNodes(nodes []provision.NodeState, status state.ClusterStatus) (nodesSay, string) {
	up, stopped := 0, 0
	for _, n := range nodes {
		switch n.Status {
		case provision.NodeUp:
			up++
		case provision.NodeStopped:
			stopped++
		}
	}
	switch {
	case len(nodes) == 0:
		return nodesGone, ""
	case stopped == len(nodes):
		return nodesStopped, ""
	case up == len(nodes) && status != state.ClusterStopped:
		return nodesUp, ""
	}
	return nodesPartial, fmt.Sprintf("%d of %d nodes are up", up, len(nodes))
}
