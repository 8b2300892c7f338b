package lb

import (
	"strings"
	"testing"
	"time"
)

func TestLogIsRateLimited(t *testing.T) {
	var buf syncBuf
	l := newRateLog(&buf)
	for i := 0; i < 1000; i++ {
		l.printf("replica %d refused", i)
	}
	if n := strings.Count(buf.String(), "\n"); n != logBurst {
		t.Fatalf("%d lines for 1000 at once, want the burst of %d", n, logBurst)
	}
	time.Sleep(time.Second / logRate * 2)
	l.printf("later")
	last := buf.String()[strings.LastIndex(strings.TrimSuffix(buf.String(), "\n"), "\n")+1:]
	if !strings.Contains(last, "later (980 lines suppressed before this one)") {
		t.Fatalf("last line %q", last)
	}
	newRateLog(nil).printf("to nowhere") // a nil writer discards
}
