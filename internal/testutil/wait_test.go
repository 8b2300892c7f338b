package testutil

import (
	"testing"
	"time"
)

func TestWaitFor(t *testing.T) {
	n := 0
	if !WaitFor(time.Minute, time.Millisecond, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("a condition true on its third check: WaitFor checked %d times", n)
	}
	n = 0
	if WaitFor(0, time.Millisecond, func() bool { n++; return false }) || n != 1 {
		t.Errorf("a zero timeout: WaitFor checked %d times, want one check and false", n)
	}
}
