package core

import (
	"bytes"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/skygo/skygo/internal/task"
)

// redactingLog wraps a request log so that a task's secret values never
// reach it, even when the job prints them. It works a line at a time so a
// secret split across two writes is still caught.
type redactingLog struct {
	mu  sync.Mutex
	w   io.Writer
	fix func(string) string
	buf []byte
}

func newRedactingLog(w io.Writer, secrets map[string]string) io.Writer {
	return newRequestLog(w, secrets, nil)
}

// newRequestLog is newRedactingLog that also writes the client's paths
// where the lines name the uploaded copies of them (shown maps a copy's
// path to the client's), so the log speaks of the user's own files.
func newRequestLog(w io.Writer, secrets, shown map[string]string) io.Writer {
	if len(secrets) == 0 && len(shown) == 0 {
		return w
	}
	vals := make([]string, 0, len(secrets))
	for _, v := range secrets {
		vals = append(vals, v)
	}
	r := task.NewRedactor(vals...)
	// Longest first: the replacer tries its pairs in order, and
	// ".../mounts/1" must not take the start of ".../mounts/10".
	froms := make([]string, 0, len(shown))
	for from := range shown {
		froms = append(froms, from)
	}
	sort.Slice(froms, func(i, j int) bool { return len(froms[i]) > len(froms[j]) })
	pairs := make([]string, 0, 2*len(shown))
	for _, from := range froms {
		pairs = append(pairs, from, shown[from])
	}
	paths := strings.NewReplacer(pairs...)
	return &redactingLog{w: w, fix: func(s string) string { return r.Redact(paths.Replace(s)) }}
}

func (l *redactingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	i := bytes.LastIndexByte(l.buf, '\n')
	if i < 0 {
		if len(l.buf) < 64<<10 {
			return len(p), nil
		}
		i = len(l.buf) - 1 // an endless line: flush what we have
	}
	if _, err := io.WriteString(l.w, l.fix(string(l.buf[:i+1]))); err != nil {
		return 0, err
	}
	l.buf = append(l.buf[:0], l.buf[i+1:]...)
	return len(p), nil
}

// Close flushes a last partial line.
func (l *redactingLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		_, err := io.WriteString(l.w, l.fix(string(l.buf)))
		l.buf = nil
		return err
	}
	return nil
}

func closeLog(w io.Writer) {
	if c, ok := w.(*redactingLog); ok {
		_ = c.Close()
	}
}
