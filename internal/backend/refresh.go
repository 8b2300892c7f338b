package backend

import (
	"context"
	"fmt"
	"sync"
	"time"

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
