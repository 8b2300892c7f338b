package testutil

import "time"

// WaitFor is the tests' one bounded wait: it checks cond at once, then
// every `every`, until cond holds (true) or timeout has passed (false,
// after a last check). Tests wait for a condition with it rather than
// sleeping for a time that a loaded machine may not honour.
func WaitFor(timeout, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(every)
	defer t.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-t.C
	}
	return true
}
