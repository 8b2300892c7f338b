package server

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/upload"
)

// maxManifest bounds a manifest body: a million entries of a few hundred
// bytes each.
const maxManifest = 256 << 20

// uploadMetrics count what clients sent and what dedup spared them; a
// test (or an operator) reads them on /metrics.
type uploadMetrics struct {
	blobs   prometheus.Counter // blobs received whole
	bytes   prometheus.Counter // chunk bytes received
	reused  prometheus.Counter // blobs of a manifest the store already had
	trees   prometheus.Counter // commits
	removed prometheus.Counter // trees, blobs and partials collected
}

func newUploadMetrics(reg prometheus.Registerer) *uploadMetrics {
	c := func(name, help string) prometheus.Counter {
		m := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(m)
		return m
	}
	return &uploadMetrics{
		blobs:   c("skygo_upload_blobs_received_total", "File contents (blobs) clients uploaded in full."),
		bytes:   c("skygo_upload_bytes_received_total", "Bytes of file content received in upload chunks."),
		reused:  c("skygo_upload_blobs_reused_total", "Blobs of upload manifests the server already had, so they were not sent."),
		trees:   c("skygo_upload_commits_total", "Upload manifests committed into a tree."),
		removed: c("skygo_upload_gc_removed_total", "Upload trees, blobs and partial blobs removed for age."),
	}
}

func (s *Server) uploadRoutes(mux *http.ServeMux) {
	s.handle(mux, "GET "+api.PathUploadLimits, s.wrap(func(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
		return s.uploads.Limits(), nil
	}))
	s.handle(mux, "POST "+api.PathUpload, s.wrap(s.handleUploadNeeds))
	s.handle(mux, "GET "+api.PathUploadBlob, s.wrap(s.handleBlobHave))
	s.handle(mux, "PUT "+api.PathUploadBlob, s.wrap(s.handleBlobChunk))
	s.handle(mux, "PUT "+api.PathUploadBatch, s.wrap(s.handleUploadBatch))
	s.handle(mux, "POST "+api.PathUploadCommit, s.wrap(s.handleUploadCommit))
}

func decodeManifest(r *http.Request) (api.UploadManifest, error) {
	var m api.UploadManifest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxManifest)).Decode(&m); err != nil {
		return m, errf(http.StatusBadRequest, "upload manifest: %v", err)
	}
	return m, nil
}

// uploadErr maps the store's refusals to their status.
func uploadErr(err error) error {
	var ce *upload.ClientError
	if errors.As(err, &ce) {
		return errf(ce.Status, "%s", ce.Msg)
	}
	return err
}

func (s *Server) handleUploadNeeds(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	m, err := decodeManifest(r)
	if err != nil {
		return nil, err
	}
	needs, have, err := s.uploads.Needs(u.ID, m)
	if err != nil {
		return nil, uploadErr(err)
	}
	s.upMetrics.reused.Add(float64(have))
	return needs, nil
}

func blobQuery(r *http.Request) (sha string, size, offset int64, err error) {
	q := r.URL.Query()
	sha = q.Get("sha256")
	for _, f := range []struct {
		name string
		v    *int64
	}{{"size", &size}, {"offset", &offset}} {
		raw := q.Get(f.name)
		if raw == "" {
			continue
		}
		n, perr := strconv.ParseInt(raw, 10, 64)
		if perr != nil || n < 0 {
			return "", 0, 0, errf(http.StatusBadRequest, "%s=%q: want a non-negative integer", f.name, raw)
		}
		*f.v = n
	}
	return sha, size, offset, nil
}

func (s *Server) handleBlobHave(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	sha, size, _, err := blobQuery(r)
	if err != nil {
		return nil, err
	}
	res, err := s.uploads.Have(u.ID, sha, size)
	return res, uploadErr(err)
}

func (s *Server) handleBlobChunk(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	sha, size, offset, err := blobQuery(r)
	if err != nil {
		return nil, err
	}
	mode := uint64(0o644)
	if raw := r.URL.Query().Get("mode"); raw != "" {
		if mode, err = strconv.ParseUint(raw, 8, 32); err != nil || mode > 0o777 {
			return nil, errf(http.StatusBadRequest, "mode=%q: want octal permission bits such as 644", raw)
		}
	}
	body := &countingReader{r: r.Body}
	res, err := s.uploads.WriteChunk(u.ID, sha, size, offset, uint32(mode), body)
	s.upMetrics.bytes.Add(float64(body.n))
	var ce *upload.ClientError
	if errors.As(err, &ce) && ce.Status == http.StatusConflict {
		s.writeJSON(w, http.StatusConflict, api.UploadChunkResult{Have: ce.Have})
		return nil, nil
	}
	if err != nil {
		return nil, uploadErr(err)
	}
	if res.Complete && body.n > 0 {
		s.upMetrics.blobs.Inc()
	}
	return res, nil
}

func (s *Server) handleUploadBatch(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	body := &countingReader{r: r.Body}
	defer func() { s.upMetrics.bytes.Add(float64(body.n)) }()
	tr := tar.NewReader(body)
	var res api.UploadBatchResult
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return nil, errf(http.StatusBadRequest, "upload batch: %v", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil, errf(http.StatusBadRequest, "upload batch entry %q: only regular entries", hdr.Name)
		}
		stored, err := s.uploads.WriteWhole(u.ID, hdr.Name, hdr.Size, uint32(hdr.Mode)&0o777, tr)
		if err != nil {
			return nil, uploadErr(err)
		}
		if stored {
			res.Stored++
			s.upMetrics.blobs.Inc()
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (s *Server) handleUploadCommit(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	m, err := decodeManifest(r)
	if err != nil {
		return nil, err
	}
	res, err := s.uploads.Commit(u.ID, m)
	if err != nil {
		return nil, uploadErr(err)
	}
	s.upMetrics.trees.Inc()
	s.log.Info("upload committed", "user", u.Name, "upload_id", res.ID, "files", res.Files, "bytes", res.Bytes)
	return res, nil
}

// reconcileUploads removes the uploads older than the store's MaxAge
// (one key: the store), so it does not grow without bound.
func (s *Server) reconcileUploads(ctx context.Context, _ string) (controller.Result, error) {
	n, err := s.uploads.GC(time.Now())
	s.upMetrics.removed.Add(float64(n))
	if err != nil {
		return controller.Result{}, fmt.Errorf("collecting old uploads: %w", err)
	}
	if n > 0 {
		s.log.Info("collected old uploads", "removed", n, "max_age", s.uploads.MaxAge.String())
	}
	return controller.Result{}, nil
}

// ParseByteSize reads an upload limit: a number of bytes, or one with a
// unit (500MB, 4GiB, 10G).
func ParseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}}
	mult := int64(1)
	num := s
	for _, u := range units {
		if len(s) > len(u.suffix) && s[len(s)-len(u.suffix):] == u.suffix {
			mult, num = u.mult, s[:len(s)-len(u.suffix)]
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%q is not a size; want bytes or a number with KiB/MiB/GiB (e.g. 4GiB)", s)
	}
	return int64(f * float64(mult)), nil
}
