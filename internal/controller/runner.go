package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Runner starts a server's controllers together and stops them together
// within the server's shutdown bound.
type Runner struct {
	cs []*Controller

	mu     sync.Mutex
	cancel context.CancelFunc
	done   []chan struct{} // done[i] closes when cs[i].Run has returned
}

// NewRunner holds cs until Start.
func NewRunner(cs ...*Controller) *Runner {
	return &Runner{cs: cs}
}

// Start runs every controller in its own goroutine until ctx is cancelled or
// Stop is called. It fails, starting none, if it was called before, if a
// controller already runs, or if two controllers share a name (their
// metrics would merge).
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("controller runner: Start called twice")
	}
	names := map[string]bool{}
	for _, c := range r.cs {
		if names[c.o.Name] {
			return fmt.Errorf("controller runner: two controllers named %q", c.o.Name)
		}
		names[c.o.Name] = true
		if c.started.Load() {
			return fmt.Errorf("controller runner: controller %s already runs", c.o.Name)
		}
	}
	ctx, r.cancel = context.WithCancel(ctx)
	for _, c := range r.cs {
		done := make(chan struct{})
		r.done = append(r.done, done)
		go func() {
			defer close(done)
			if err := c.Run(ctx); err != nil {
				c.log.Error("controller did not start", "err", err)
			}
		}()
	}
	return nil
}

// Stop cancels every controller and waits until each has returned, which
// is when none of their reconciles runs any more. If ctx ends first, Stop
// returns an error naming the controllers still waiting for a reconcile
// that ignores its context. Stop without Start does nothing.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	var running []string
	for i, d := range done {
		select {
		case <-d:
		case <-ctx.Done():
			select {
			case <-d:
			default:
				running = append(running, r.cs[i].o.Name)
			}
		}
	}
	if len(running) > 0 {
		return fmt.Errorf("controllers still reconciling: %s: %w", strings.Join(running, ", "), ctx.Err())
	}
	return nil
}
