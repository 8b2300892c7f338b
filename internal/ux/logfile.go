package ux

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Controller logs (a managed job's, a pool's, a service's, a replica's)
// are files the controllers append to from many reconciles; these are
// their one writer.

// AppendLog appends lines to a controller log, dropping live status
// lines; a log that cannot be opened takes nothing.
func AppendLog(p string) io.WriteCloser {
	f, err := OpenAppend(p)
	if err != nil {
		return nopCloser{io.Discard}
	}
	return &logFile{f: f}
}

// OpenAppend opens p for appending (0600), creating it and its directory.
func OpenAppend(p string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
}

// logFile keeps a launch's output for a controller log without the
// live status lines a terminal would redraw in place.
type logFile struct {
	f   *os.File
	buf []byte
}

func (l *logFile) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := l.buf[:i+1]
		if _, ok := ParseStatus(strings.TrimRight(string(line), "\r\n")); !ok {
			if _, err := l.f.Write(line); err != nil {
				return len(p), err
			}
		}
		l.buf = l.buf[i+1:]
	}
}

func (l *logFile) Close() error {
	if len(l.buf) > 0 {
		_, _ = l.f.Write(append(l.buf, '\n'))
	}
	return l.f.Close()
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Note writes one timestamped line to the controller log at p.
func Note(p, format string, args ...any) {
	w := AppendLog(p)
	defer w.Close()
	fmt.Fprintf(w, "%s %s\n", time.Now().Format("2006-01-02 15:04:05.000"), fmt.Sprintf(format, args...))
}
