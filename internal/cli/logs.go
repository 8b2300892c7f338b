package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
)

// syncDownLogs is `sky logs --sync-down`: each job's log directory is
// written to ~/sky_logs/<run_timestamp> on this machine (the layout the
// job has on its node, runtime.md), one line per job saying where.
func syncDownLogs(f *Factory, opts *LogsOptions) error {
	var res api.LogsDownload
	b := api.LogsBody{ClusterName: opts.Cluster, JobIDs: opts.JobIDs}
	if err := callOp(f, apiop.DownloadLogs, b, &res, callOptions{}); err != nil {
		return err
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	home, err := homeDir()
	if err != nil {
		return err
	}
	for _, j := range res.Jobs {
		dir, err := writeJobLogs(context.Background(), c, res.RequestID, filepath.Join(home, "sky_logs"), j)
		if err != nil {
			return err
		}
		// Kept coloured when piped, as SkyPilot's logger line is: scripts
		// cut the path out up to the reset code.
		fmt.Fprintf(opts.IO.Out, "\x1b[36mJob %d logs: %s\x1b[0m\n", j.JobID, dir)
	}
	return nil
}

// writeJobLogs fetches one job's files from the request that gathered
// them into root/<run_timestamp> and returns that directory. Names come
// from the server, so each must stay inside it.
func writeJobLogs(ctx context.Context, c *client.Client, requestID, root string, j api.JobLogs) (string, error) {
	ts := filepath.Base(filepath.Clean("/" + j.RunTimestamp))
	if ts == "/" || ts == "." {
		ts = fmt.Sprintf("job-%d", j.JobID)
	}
	dir := filepath.Join(root, ts)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range j.Files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return "", fmt.Errorf("the server sent a log file named %q, outside the job's directory", name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		out, err := os.Create(p)
		if err != nil {
			return "", err
		}
		err = c.Download(ctx, requestID, ts+"/"+name, out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
	}
	return dir, nil
}

// provisionRequests are the requests whose log is a cluster's provision
// log: the launch that created it and the starts that brought it back.
var provisionRequests = map[string]bool{apiop.Launch.RequestName(): true, apiop.Start.RequestName(): true}

// provisionLog is `sky logs --provision`: the log of the cluster's
// latest launch or start request, up to the job it submitted (the rest
// is the job's, which `sky logs` shows).
func provisionLog(f *Factory, opts *LogsOptions) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx := context.Background()
	recs, err := c.Status(ctx, client.StatusOptions{ClusterName: opts.Cluster, AllStatus: true, AllUsers: true})
	if err != nil {
		return err
	}
	var rec *api.Request
	for i := range recs {
		if provisionRequests[recs[i].Name] {
			rec = &recs[i]
			break
		}
	}
	if rec == nil {
		return fmt.Errorf("no provision log of cluster '%s': this API server has no launch or start of it (see `sky status`)", opts.Cluster)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sw := newStreamWriter(f.IO.Out, f.IO.IsTTY)
	out := &untilLine{w: sw, marker: "Job submitted, ID:", done: cancel}
	so := client.StreamOptions{Follow: opts.Follow && !rec.Status.Final()}
	if opts.Tail > 0 {
		so.Tail = opts.Tail
	}
	_, err = c.Stream(ctx, rec.RequestID, out, so)
	if !out.stopped && len(out.buf) > 0 {
		_, _ = sw.Write(append(out.buf, '\n'))
	}
	sw.Close()
	if out.stopped {
		return nil
	}
	return err
}

// untilLine copies whole lines to w until one contains marker, then
// drops the rest and calls done.
type untilLine struct {
	w       io.Writer
	marker  string
	done    func()
	buf     []byte
	stopped bool
}

func (u *untilLine) Write(p []byte) (int, error) {
	if u.stopped {
		return len(p), nil
	}
	u.buf = append(u.buf, p...)
	for {
		i := bytes.IndexByte(u.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := u.buf[:i+1]
		if bytes.Contains(line, []byte(u.marker)) {
			u.stopped = true
			u.buf = nil
			u.done()
			return len(p), nil
		}
		if _, err := u.w.Write(line); err != nil {
			return 0, err
		}
		u.buf = u.buf[i+1:]
	}
}
