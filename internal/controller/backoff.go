package controller

import "time"

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
