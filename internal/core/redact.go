package core

import (
	"bytes"
	"io"
	"sync"

	"github.com/skygo/skygo/internal/task"
)

// redactingLog wraps a request log so that a task's secret values never
// reach it, even when the job prints them. It works a line at a time so a
// secret split across two writes is still caught.
type redactingLog struct {
	mu  sync.Mutex
	w   io.Writer
	r   *task.Redactor
	buf []byte
}

func newRedactingLog(w io.Writer, secrets map[string]string) io.Writer {
	if len(secrets) == 0 {
		return w
	}
	vals := make([]string, 0, len(secrets))
	for _, v := range secrets {
		vals = append(vals, v)
	}
	return &redactingLog{w: w, r: task.NewRedactor(vals...)}
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
	if _, err := io.WriteString(l.w, l.r.Redact(string(l.buf[:i+1]))); err != nil {
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
		_, err := io.WriteString(l.w, l.r.Redact(string(l.buf)))
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
