package backend

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// MaxDownloadBytes bounds what one `sky logs --sync-down` gathers: each
// node's files arrive whole in memory before they are written out.
const MaxDownloadBytes = 256 << 20

// DownloadLogs copies the log directory of each job (the latest when ids
// is empty) from every node into dir/<run_timestamp>/: the head's whole
// directory, and the per-rank files each worker wrote there. The head's
// files win a name clash, as it holds the job's run.log.
func (b *Backend) DownloadLogs(ctx context.Context, name string, user User, ids []int, dir string) ([]api.JobLogs, error) {
	c, h, err := b.loadCluster(ctx, name, user.Hash, user.Admin)
	if err != nil {
		return nil, err
	}
	if c.Status != state.ClusterUp {
		return nil, &ClusterError{Type: "ClusterNotUpError", Msg: fmt.Sprintf("Cluster %q is %s; its logs can be downloaded only while it is UP.", name, c.Status)}
	}
	runners, err := b.runners(h)
	if err != nil {
		return nil, err
	}
	jobs, err := b.Queue(ctx, name, user, true, false)
	if err != nil {
		return nil, err
	}
	var picked []agentapi.Job
	if len(ids) == 0 {
		if len(jobs) == 0 {
			return nil, &ClusterError{Type: "JobNotFound", Msg: fmt.Sprintf("No job found on cluster '%s'.", name)}
		}
		picked = jobs[:1]
	}
	for _, id := range ids {
		found := false
		for _, j := range jobs {
			if j.JobID == id {
				picked, found = append(picked, j), true
				break
			}
		}
		if !found {
			return nil, &ClusterError{Type: "JobNotFound", Msg: fmt.Sprintf("Job %d not found (see `sky queue`).", id)}
		}
	}
	var out []api.JobLogs
	total := 0
	for _, j := range picked {
		runTS := path.Base(j.LogPath)
		jl := api.JobLogs{JobID: j.JobID, RunTimestamp: runTS}
		dest := filepath.Join(dir, filepath.Base(filepath.Clean("/"+runTS)))
		files := map[string]bool{}
		// Workers first, so the head's copy of a shared name is kept.
		for i := len(runners) - 1; i >= 0; i-- {
			src := provision.QuoteHomePath("~/sky_logs/" + runTS)
			if i == 0 {
				src = provision.QuoteHomePath(j.LogPath)
			}
			res, err := runners[i].Run(ctx, "cd "+src+" 2>/dev/null && tar -cf - .", provision.RunOptions{})
			if err != nil {
				return nil, fmt.Errorf("read the logs of job %d on %s: %w", j.JobID, runners[i].NodeIP(), err)
			}
			if res.ExitCode != 0 {
				continue // this node holds no files of the job
			}
			n, err := untarTo(dest, files, res.Stdout)
			if err != nil {
				return nil, fmt.Errorf("read the logs of job %d on %s: %w", j.JobID, runners[i].NodeIP(), err)
			}
			if total += n; total > MaxDownloadBytes {
				return nil, &ClusterError{Type: "ValueError", Msg: fmt.Sprintf("the logs are larger than %d MiB; download fewer jobs at a time, or read them with `sky logs --tail N`", MaxDownloadBytes>>20)}
			}
		}
		for f := range files {
			jl.Files = append(jl.Files, f)
		}
		slices.Sort(jl.Files)
		out = append(out, jl)
	}
	return out, nil
}

// untarTo writes the regular files of a tar stream under dir (a later
// stream's file replaces an earlier one's), notes their names in files,
// and returns their total size.
func untarTo(dir string, files map[string]bool, data []byte) (int, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	total := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if name == "." || name == ".." || strings.HasPrefix(name, "../") || path.IsAbs(name) {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return total, err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return total, err
		}
		n, err := io.Copy(f, io.LimitReader(tr, MaxDownloadBytes+1))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return total, err
		}
		files[name] = true
		total += int(n)
	}
}
