package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Log layout of one job under ~/sky_logs/<run_timestamp>/ (runtime.md):
// run.log holds every rank's output with a "(head, rank=0, pid=N) " style
// prefix plus the driver's status lines; tasks/run.log (single-node job)
// or tasks/<rank>-<head|workerN>.log hold each rank's raw output;
// setup-<node>.log holds detached setup output per node.

// jobLog is the shared run.log of one job.
type jobLog struct {
	dir string
	mu  sync.Mutex
	run *os.File
}

func openJobLog(dir string) (*jobLog, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tasks"), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "run.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &jobLog{dir: dir, run: f}, nil
}

// driverLine writes one status line of the driver itself.
func (l *jobLog) driverLine(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.run, format+"\n", args...)
}

func (l *jobLog) close() { l.run.Close() }

// rankFileName is the per-rank log of a job with numNodes nodes.
func rankFileName(numNodes, rank, node int) string {
	if numNodes == 1 {
		return "run.log"
	}
	return fmt.Sprintf("%d-%s.log", rank, nodeName(node))
}

func nodeName(node int) string {
	if node == 0 {
		return "head"
	}
	return "worker" + strconv.Itoa(node)
}

// rankWriter splits one rank's output into lines, writing each raw to the
// rank's own file and prefixed to run.log. When expectHeader is set the
// first line is exec-rank's pid header, which completes the prefix.
type rankWriter struct {
	log          *jobLog
	file         *os.File
	label        func(pid int) string
	prefix       string
	buf          []byte
	expectHeader bool
	pidSeen      func(pid int)
}

func (w *rankWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) == 0 {
		w.buf = w.buf[:0:0]
	}
	return len(p), nil
}

func (w *rankWriter) setPid(pid int) {
	w.prefix = w.label(pid)
	if w.pidSeen != nil {
		w.pidSeen(pid)
	}
}

func (w *rankWriter) emit(line []byte) {
	if w.expectHeader {
		w.expectHeader = false
		if rest, ok := bytes.CutPrefix(line, []byte(pidHeader)); ok {
			pid, _ := strconv.Atoi(string(bytes.TrimSpace(rest)))
			w.setPid(pid)
			return
		}
	}
	if w.file != nil {
		_, _ = w.file.Write(line)
	}
	w.log.mu.Lock()
	_, _ = w.log.run.WriteString(w.prefix)
	_, _ = w.log.run.Write(line)
	w.log.mu.Unlock()
}

// flush writes a last unterminated line.
func (w *rankWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(append(w.buf, '\n'))
		w.buf = nil
	}
}

// tailOffset is the offset where the last n lines of f start (0 for n ≤ 0).
func tailOffset(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil || n <= 0 {
		return 0, err
	}
	size := st.Size()
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	pos := size
	seen := 0
	// A final newline ends the last line; it does not start a new one.
	skipLast := true
	for pos > 0 {
		read := int64(chunk)
		if pos < read {
			read = pos
		}
		pos -= read
		if _, err := f.ReadAt(buf[:read], pos); err != nil && err != io.EOF {
			return 0, err
		}
		for i := read - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				continue
			}
			if skipLast && pos+i == size-1 {
				skipLast = false
				continue
			}
			seen++
			if seen == n {
				return pos + i + 1, nil
			}
		}
		skipLast = false
	}
	return 0, nil
}

// copyLog writes path to w from the last tail lines (all when tail ≤ 0).
// With follow it keeps reading until done() reports the job finished and
// the file is drained; a missing file is waited for while following.
func copyLog(ctx context.Context, w io.Writer, path string, tail int, follow bool, done func() bool) error {
	var f *os.File
	for {
		var err error
		f, err = os.Open(path)
		if err == nil {
			break
		}
		if !follow || !os.IsNotExist(err) {
			return err
		}
		if done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer f.Close()
	off, err := tailOffset(f, tail)
	if err != nil {
		return err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	for {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		// Check done before the last read so nothing written just
		// before the job ended is lost.
		finished := done()
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if finished {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
