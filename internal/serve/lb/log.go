package lb

import (
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"time"
)

// rateLog writes timestamped lines to the load balancer's log, at most
// burst lines at once and rate lines a second after that: a dead replica
// under heavy traffic fails thousands of requests a second, and lb.log
// should say so without growing by as many lines.
type rateLog struct {
	mu         sync.Mutex
	w          io.Writer
	tokens     float64
	last       time.Time
	suppressed int
}

const (
	logRate  = 5
	logBurst = 20
)

func newRateLog(w io.Writer) *rateLog {
	return &rateLog{w: w, tokens: logBurst}
}

func (l *rateLog) printf(format string, args ...any) {
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() {
		l.tokens = min(logBurst, l.tokens+now.Sub(l.last).Seconds()*logRate)
	}
	l.last = now
	if l.tokens < 1 {
		l.suppressed++
		return
	}
	l.tokens--
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	if l.suppressed > 0 {
		msg += fmt.Sprintf(" (%d lines suppressed before this one)", l.suppressed)
		l.suppressed = 0
	}
	fmt.Fprintf(l.w, "%s %s\n", now.UTC().Format("2006-01-02 15:04:05.000"), msg)
}

// std adapts the log for the library code that wants a *log.Logger.
func (l *rateLog) std() *log.Logger {
	return log.New(logWriter{l}, "", 0)
}

type logWriter struct{ l *rateLog }

func (w logWriter) Write(p []byte) (int, error) {
	w.l.printf("%s", p)
	return len(p), nil
}
