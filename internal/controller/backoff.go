package controller

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is the wait before retry n (n >= 1) of a failing key: base doubled
// n-1 times, capped at ceiling, then scaled by a jitter r in [0, 1) to between
// half and all of that. The jitter spreads out keys that failed together
// (say, every cluster of a cloud that had an outage), so they do not all
// retry in the same instant; the lower half is kept so that the backoff
// still grows.
func backoff(n int, base, ceiling time.Duration, r float64) time.Duration {
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		if d > ceiling/2 { // doubling would pass the ceiling, or overflow
			d = ceiling
			break
		}
		d *= 2
	}
	d = min(d, ceiling)
	return d/2 + time.Duration(r*float64(d-d/2))
}

// LaunchBackoff is the wait before launch attempt tries+1 of a managed
// job, a pool worker or a service replica: SkyPilot's 60 s, ×1.6 per
// attempt, at most 5 × the first gap, ±40% jitter. initial, when it is
// positive, replaces the 60 s (the controllers' configured gap).
func LaunchBackoff(tries int, initial time.Duration) time.Duration {
	first := 60 * time.Second
	if initial > 0 {
		first = initial
	}
	d := float64(first)
	for i := 1; i < tries; i++ {
		d *= 1.6
	}
	d = min(d, float64(5*first))
	return Jitter(time.Duration(d), 0.4)
}

// Jitter spreads d by ±frac.
func Jitter(d time.Duration, frac float64) time.Duration {
	return time.Duration(float64(d) * (1 + frac*(2*rand.Float64()-1)))
}

// Poll calls done every interval until it reports true or fails, or ctx
// ends: an operation waiting for a controller to finish what it asked
// (a pool or a service torn down).
func Poll(ctx context.Context, every time.Duration, done func() (bool, error)) error {
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
