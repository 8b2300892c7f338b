package lb

import (
	"sort"
	"sync/atomic"
)

// window is how many seconds of request counts the load balancer keeps:
// the autoscaler's QPS window is at most a few minutes, and a controller
// that was away for a while can still read what it missed.
const window = 600

// counts is a ring of per-second request counters. Each slot packs the
// unix second it counts (high 32 bits) and the count (low 32 bits) into
// one word, so a request is counted with one atomic add and a slot is
// taken over by a newer second with one compare-and-swap: no lock on the
// hot path, and a reader never sees a count attributed to the wrong
// second.
type counts struct {
	slots [window]atomic.Uint64
}

func (c *counts) hit(sec int64) {
	s := &c.slots[sec%window]
	if v := s.Add(1); int64(v>>32) == sec {
		return
	}
	// The slot held an older second (the add above landed on a second
	// outside the window, which readers ignore): claim it.
	for {
		old := s.Load()
		var next uint64
		if int64(old>>32) == sec {
			next = old + 1
		} else {
			next = uint64(sec)<<32 | 1
		}
		if s.CompareAndSwap(old, next) {
			return
		}
	}
}

// snapshot returns [second, count] pairs for the window ending at now,
// oldest first, zero seconds left out.
func (c *counts) snapshot(now int64) [][2]int64 {
	out := make([][2]int64, 0, 64)
	for i := range c.slots {
		v := c.slots[i].Load()
		sec, n := int64(v>>32), int64(v&0xffffffff)
		if n == 0 || sec > now || sec <= now-window {
			continue
		}
		out = append(out, [2]int64{sec, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
