package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
)

// requestFilesMaxAge is how long the files an op left for its client
// (op.Request.Files) stay: the client fetches them as soon as its request
// ends, so an hour covers a slow link and a retry.
const requestFilesMaxAge = time.Hour

// handleDownload serves one file an op left in its request's files
// directory: GET /api/download?request_id=ID&path=REL. Only the request's
// owner (or an admin) may fetch it, as for its log.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	q := r.URL.Query()
	rec, err := s.lookup(r.Context(), u, q.Get("request_id"))
	if err != nil {
		return nil, err
	}
	rel := filepath.Clean("/" + filepath.FromSlash(q.Get("path")))
	if rel == string(filepath.Separator) {
		return nil, errf(http.StatusBadRequest, "path: name a file of request %s", rec.RequestID)
	}
	root := filepath.Join(s.paths.RequestFiles, rec.RequestID)
	full := filepath.Join(root, rel)
	if !strings.HasPrefix(full, root+string(filepath.Separator)) {
		return nil, errf(http.StatusBadRequest, "path %q is outside request %s's files", q.Get("path"), rec.RequestID)
	}
	f, err := os.Open(full)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errf(http.StatusNotFound, "request %s left no file %s (files are kept %s)", rec.RequestID, q.Get("path"), requestFilesMaxAge)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errf(http.StatusNotFound, "request %s left no file %s", rec.RequestID, q.Get("path"))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f) // a client gone mid-file retries the whole file
	return nil, nil
}

// collectRequestFiles removes request files directories older than
// requestFilesMaxAge, now and then every interval until ctx ends.
func (s *Server) collectRequestFiles(ctx context.Context, interval time.Duration) {
	for {
		entries, _ := os.ReadDir(s.paths.RequestFiles)
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || time.Since(info.ModTime()) < requestFilesMaxAge {
				continue
			}
			if err := os.RemoveAll(filepath.Join(s.paths.RequestFiles, e.Name())); err != nil {
				s.log.Warn("removing old request files", "dir", e.Name(), "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
