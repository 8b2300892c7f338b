package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/state"
)

var syscallEADDRINUSE = syscall.EADDRINUSE

// streamPoll is how often a followed log is checked for new bytes.
const streamPoll = 100 * time.Millisecond

// handleStream is GET /api/stream: a request's log (by id or prefix; the
// caller's latest request when none is given), the server log
// (server_logs=true, admins only), or a file under ~/sky_logs (log_path).
// With follow (the default) it ends when the request is final and the log
// is drained.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	q := r.URL.Query()
	ctx := r.Context()
	tail := -1
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, errf(http.StatusBadRequest, "tail=%q: want an integer", v)
		}
		if n >= 0 {
			tail = n
		}
	}
	follow := true
	if v := q.Get("follow"); v != "" {
		follow = parseBool(v)
	}
	id, logPath := q.Get("request_id"), q.Get("log_path")
	if id != "" && logPath != "" {
		return nil, errf(http.StatusBadRequest, "give request_id or log_path, not both")
	}
	var path string
	finished := func() bool { return true }
	// ended wakes the follow loop when a request this process runs ends,
	// so the client sees its end at once instead of at the next poll (nil,
	// which never fires, for everything else).
	var ended <-chan struct{}
	// gone is set when the stream ends because its client went away, not
	// because the log is complete; leave then tells the executor.
	gone := false
	leave := func(bool) {}
	defer func() { leave(gone) }()
	switch {
	case parseBool(q.Get("server_logs")):
		if !s.isAdmin(u) {
			return nil, errf(http.StatusForbidden, "Forbidden: only admins can read the server log")
		}
		path = s.paths.Log
		if !follow {
			break
		}
		finished = func() bool { return ctx.Err() != nil }
	case logPath != "":
		// The server's ~/sky_logs belongs to no one request or user (a
		// SkyPilot installed beside keeps its logs there): on a shared
		// server only admins read it by path.
		if s.authEnabled() && !s.isAdmin(u) {
			return nil, errf(http.StatusForbidden, "Forbidden: only admins can read the server's log files by path")
		}
		p, err := s.skyLogPath(logPath)
		if err != nil {
			return nil, err
		}
		path = p
	default:
		var rec *api.Request
		var err error
		if id != "" {
			rec, err = s.lookup(ctx, u, id)
		} else {
			f := state.RequestFilter{AllStatuses: true, Limit: 1}
			if !s.isAdmin(u) || s.authEnabled() {
				f.UserID = u.ID
			}
			var recs []*api.Request
			recs, err = s.store.ListRequests(ctx, f)
			if err == nil && len(recs) == 0 {
				err = fmt.Errorf("no requests yet: %w", state.ErrNotFound)
			}
			if err == nil {
				rec = recs[0]
			}
		}
		if err != nil {
			return nil, err
		}
		id = rec.RequestID
		path = filepath.Join(s.paths.RequestLogs, id+".log")
		w.Header().Set(api.HeaderStreamRequestID, id)
		finished = func() bool {
			if s.exec.jobFor(id) != nil {
				return false
			}
			rec, err := s.store.GetRequest(context.WithoutCancel(ctx), id)
			return err != nil || rec.Status.Final()
		}
		if follow {
			leave = s.exec.followRequest(id)
			if j := s.exec.jobFor(id); j != nil {
				ended = j.done
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errf(http.StatusNotFound, "log %s not found", filepath.Base(path))
		}
		return nil, err
	}
	defer f.Close()
	if tail >= 0 {
		off, err := tailOffset(f, tail)
		if err != nil {
			return nil, err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		// Decide "finished" before draining, so bytes written just before
		// the request ended are still sent.
		done := !follow || finished()
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					gone = true
					return nil, nil
				}
			}
			if err != nil {
				break
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
		if done {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			gone = true // the peer closed the connection (or the server is stopping)
			return nil, nil
		case <-ended:
			ended = nil // the next pass drains and returns
		case <-time.After(streamPoll):
		}
	}
}

// skyLogPath resolves log_path (relative to ~/sky_logs) and refuses
// anything that escapes that tree.
func (s *Server) skyLogPath(p string) (string, error) {
	root := filepath.Clean(s.paths.SkyLogs)
	full := filepath.Clean(filepath.Join(root, strings.TrimPrefix(p, "~/sky_logs/")))
	if filepath.IsAbs(p) && !strings.HasPrefix(p, "~") {
		full = filepath.Clean(p)
	}
	if full != root && !strings.HasPrefix(full, root+string(filepath.Separator)) {
		return "", errf(http.StatusBadRequest, "Unauthorized log path %s: only files under ~/sky_logs can be streamed", p)
	}
	if real, err := filepath.EvalSymlinks(full); err == nil && real != full && !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", errf(http.StatusBadRequest, "Unauthorized log path %s: it links outside ~/sky_logs", p)
	}
	return full, nil
}

// tailOffset is the byte offset where the last n lines of f begin. A final
// line without a newline counts as a line.
func tailOffset(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if n == 0 {
		return size, nil
	}
	const chunk = 32 << 10
	buf := make([]byte, chunk)
	pos := size
	newlines := 0
	// A trailing newline ends the last line rather than starting a new one.
	if size > 0 {
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, size-1); err == nil && b[0] == '\n' {
			pos = size - 1
		}
	}
	for pos > 0 {
		start := max(pos-chunk, 0)
		part := buf[:pos-start]
		if _, err := f.ReadAt(part, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := len(part) - 1; i >= 0; i-- {
			if part[i] == '\n' {
				newlines++
				if newlines == n {
					return start + int64(i) + 1, nil
				}
			}
		}
		pos = start
	}
	return 0, nil
}
