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
	"github.com/skygo/skygo/internal/controller"
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

// requestFilesDirs lists the requests that left files (the keys of
// reconcileRequestFiles).
func (s *Server) requestFilesDirs(context.Context) ([]string, error) {
	entries, err := os.ReadDir(s.paths.RequestFiles)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids, err
}

// reconcileRequestFiles removes a request's files once they are
// requestFilesMaxAge old, and looks again when they will be.
func (s *Server) reconcileRequestFiles(_ context.Context, id string) (controller.Result, error) {
	dir := filepath.Join(s.paths.RequestFiles, filepath.Base(id))
	info, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if left := requestFilesMaxAge - time.Since(info.ModTime()); left > 0 {
		return controller.Result{RequeueAfter: left}, nil
	}
	return controller.Result{}, os.RemoveAll(dir)
}

// collectors are the server's own reconcilers, beside the operations'
// (Options.Controllers): the removal of old uploads and of the files
// requests left for their clients.
func (s *Server) collectors(m *controller.Metrics) []*controller.Controller {
	uploads := controller.New(controller.ReconcilerFunc(s.reconcileUploads), controller.Options{
		Name: "upload-gc", Workers: 1, Logger: s.log, Metrics: m, Timeout: 10 * time.Minute,
		Resync:      func(context.Context) ([]string, error) { return []string{"uploads"}, nil },
		ResyncEvery: min(time.Hour, s.uploads.MaxAge/4),
	})
	files := controller.New(controller.ReconcilerFunc(s.reconcileRequestFiles), controller.Options{
		Name: "request-files-gc", Workers: 2, Logger: s.log, Metrics: m, Timeout: time.Minute,
		Resync: s.requestFilesDirs, ResyncEvery: requestFilesMaxAge / 6,
	})
	return []*controller.Controller{uploads, files}
}
