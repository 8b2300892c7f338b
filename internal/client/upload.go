package client

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/upload"
)

// UploadReport says what an upload sent: Files and Bytes are the whole
// tree, Sent and SentBytes what crossed the wire (the rest the server
// already had).
type UploadReport struct {
	ID        string
	Files     int
	Bytes     int64
	Sent      int
	SentBytes int64
	// Hashed counts the files read to hash them; the others were known
	// unchanged from the last upload.
	Hashed int
	Took   time.Duration
}

func (r UploadReport) String() string {
	return fmt.Sprintf("Uploaded %d files (%s) to the API server in %s: %d sent (%s), %d unchanged; %d hashed.",
		r.Files, upload.HumanBytes(r.Bytes), r.Took.Round(time.Millisecond), r.Sent, upload.HumanBytes(r.SentBytes), r.Files-r.Sent, r.Hashed)
}

// uploadWorkers is how many blobs travel at once: enough to hide the
// round trips of many small files, few enough not to thrash the disk.
const uploadWorkers = 8

// Upload sends the local sources of roots to the server and returns the
// id of the tree it assembled: the client scans the files (ignore rules
// applied) and hashes them, the server names the blobs it lacks, and only
// those are sent, in chunks that resume where a cut-off upload stopped.
func (c *Client) Upload(ctx context.Context, roots []upload.Root) (UploadReport, error) {
	start := time.Now()
	var limits api.UploadLimits
	if err := c.Do(ctx, http.MethodGet, api.PathUploadLimits, nil, &limits); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return UploadReport{}, fmt.Errorf("the API server at %s cannot receive files (it predates uploads); upgrade it to send a workdir or local file mounts", c.Endpoint)
		}
		return UploadReport{}, err
	}
	cache := upload.OpenHashCache(paths.UploadHashes(c.home))
	scan, err := upload.Scan(roots, limits.MaxBytes, cache)
	if err != nil {
		return UploadReport{}, err
	}
	// Only a cache: a launch does not fail for want of it.
	_ = cache.Save()
	var needs api.UploadNeeds
	if err := c.Do(ctx, http.MethodPost, api.PathUpload, scan.Manifest, &needs); err != nil {
		return UploadReport{}, err
	}
	rep := UploadReport{Files: scan.Files, Bytes: scan.Bytes, Hashed: scan.Hashed}
	if err := c.sendBlobs(ctx, scan, needs.Missing, limits.ChunkBytes, &rep); err != nil {
		return rep, err
	}
	var res api.UploadResult
	if err := c.Do(ctx, http.MethodPost, api.PathUploadCommit, scan.Manifest, &res); err != nil {
		return rep, err
	}
	rep.ID, rep.Took = res.ID, time.Since(start)
	return rep, nil
}

// sendBlobs uploads the missing blobs on a few workers. Sent counts the
// files whose content was sent (two files of one content count twice).
func (c *Client) sendBlobs(ctx context.Context, scan *upload.Scanned, missing []api.UploadBlob, chunk int64, rep *UploadReport) error {
	if len(missing) == 0 {
		return nil
	}
	perBlob := map[string]int{}
	for _, e := range scan.Manifest.Entries {
		if e.Type == api.EntryFile {
			perBlob[e.SHA256]++
		}
	}
	if chunk <= 0 {
		chunk = upload.DefaultChunkBytes
	}
	// Small blobs travel many to a request: one round trip per file
	// would cost more than the bytes. Large ones (and resumed ones) go by
	// chunks.
	var jobs [][]api.UploadBlob
	var batch []api.UploadBlob
	var batchBytes int64
	for _, b := range missing {
		if b.Have > 0 || b.Size > min(chunk, batchBlobMax) {
			jobs = append(jobs, []api.UploadBlob{b})
			continue
		}
		if len(batch) > 0 && (batchBytes+b.Size > batchMaxBytes || len(batch) >= batchMaxBlobs) {
			jobs = append(jobs, batch)
			batch, batchBytes = nil, 0
		}
		batch = append(batch, b)
		batchBytes += b.Size
	}
	if len(batch) > 0 {
		jobs = append(jobs, batch)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next = make(chan []api.UploadBlob)
	)
	for w := 0; w < min(uploadWorkers, len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range next {
				var n int64
				var err error
				if len(job) == 1 && (job[0].Have > 0 || job[0].Size > min(chunk, batchBlobMax)) {
					n, err = c.sendBlob(ctx, scan.Local[job[0].SHA256], job[0], chunk)
				} else {
					n, err = c.sendBatch(ctx, scan, job)
				}
				mu.Lock()
				rep.SentBytes += n
				if err != nil {
					errs = append(errs, err)
					cancel()
				} else {
					for _, b := range job {
						rep.Sent += perBlob[b.SHA256]
					}
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, job := range jobs {
		select {
		case next <- job:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return ctx.Err()
}

// Batches of small blobs: up to batchMaxBlobs files or batchMaxBytes,
// each at most batchBlobMax.
const (
	batchBlobMax  = 1 << 20
	batchMaxBytes = 8 << 20
	batchMaxBlobs = 512
)

// sendBatch sends small blobs in one PUT, as a tar stream read from the
// files as it goes; a failure that may pass is tried again whole (the
// server keeps what it stored and drops what it has).
func (c *Client) sendBatch(ctx context.Context, scan *upload.Scanned, blobs []api.UploadBlob) (int64, error) {
	var total int64
	for _, b := range blobs {
		total += b.Size
	}
	var err error
	for attempt := 0; attempt <= chunkRetries; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		var body bytes.Buffer
		if err = writeBatch(&body, scan, blobs); err != nil {
			return 0, err
		}
		var res api.UploadBatchResult
		var resp *http.Response
		resp, err = c.do(ctx, http.MethodPut, api.PathUploadBatch, nil, rawBody(body.Bytes()))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			if err == nil {
				return total, nil
			}
		}
		var ae *APIError
		if ctx.Err() != nil || (errors.As(err, &ae) && ae.Status < 500) {
			break
		}
	}
	return 0, fmt.Errorf("uploading %d files (the first %s): %w", len(blobs), scan.Local[blobs[0].SHA256], err)
}

// writeBatch is the tar stream of a batch: entries named by sha256 with
// the blob's size and mode, the content read from the local file.
func writeBatch(w io.Writer, scan *upload.Scanned, blobs []api.UploadBlob) error {
	tw := tar.NewWriter(w)
	for _, b := range blobs {
		p := scan.Local[b.SHA256]
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if int64(len(data)) != b.Size {
			return fmt.Errorf("%s changed while it was being uploaded (size %d, was %d); run the command again", p, len(data), b.Size)
		}
		if err := tw.WriteHeader(&tar.Header{Name: b.SHA256, Size: b.Size, Mode: int64(b.Mode), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// chunkRetries is how often one chunk is tried again after a failure
// that may be passing (a broken connection, a restarted server).
const chunkRetries = 3

// sendBlob sends one blob from b.Have on, chunk by chunk. After a failed
// chunk it asks the server how much arrived and resumes there. It
// returns the bytes sent.
func (c *Client) sendBlob(ctx context.Context, path string, b api.UploadBlob, chunk int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	off, sent, failures := b.Have, int64(0), 0
	buf := make([]byte, min(chunk, b.Size))
	for {
		n, err := f.ReadAt(buf[:min(chunk, b.Size-off)], off)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == b.Size-off) {
			return sent, fmt.Errorf("reading %s: %w", path, err)
		}
		q := url.Values{"sha256": {b.SHA256}, "size": {strconv.FormatInt(b.Size, 10)}, "offset": {strconv.FormatInt(off, 10)},
			"mode": {strconv.FormatUint(uint64(b.Mode), 8)}}
		res, err := c.putChunk(ctx, q, buf[:n])
		if err != nil {
			var ae *APIError
			if ctx.Err() != nil || (errors.As(err, &ae) && ae.Status != http.StatusConflict && ae.Status < 500) {
				return sent, fmt.Errorf("uploading %s: %w", path, err)
			}
			if failures++; failures > chunkRetries {
				return sent, fmt.Errorf("uploading %s: %w", path, err)
			}
			time.Sleep(time.Duration(failures) * 200 * time.Millisecond)
			var have api.UploadChunkResult
			if herr := c.doJSONQuery(ctx, http.MethodGet, api.PathUploadBlob, q, &have); herr != nil {
				continue
			}
			if have.Complete {
				return sent, nil
			}
			off = have.Have
			continue
		}
		sent += int64(n)
		if res.Complete {
			return sent, nil
		}
		if res.Have <= off {
			return sent, fmt.Errorf("uploading %s: the API server took no bytes at offset %d", path, off)
		}
		off = res.Have
	}
}

// putChunk sends one chunk; a 409 (the server has another offset) comes
// back as an *APIError for the caller to resume from.
func (c *Client) putChunk(ctx context.Context, q url.Values, data []byte) (api.UploadChunkResult, error) {
	var res api.UploadChunkResult
	resp, err := c.do(ctx, http.MethodPut, api.PathUploadBlob, q, rawBody(data))
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return res, fmt.Errorf("decode chunk answer: %w", err)
	}
	return res, nil
}

func (c *Client) doJSONQuery(ctx context.Context, method, path string, q url.Values, out any) error {
	resp, err := c.do(ctx, method, path, q, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// rawBody is a body sent as bytes (application/octet-stream), not JSON.
type rawBody []byte
