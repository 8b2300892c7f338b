package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/task"
)

// callOptions says how a command waits for its request.
type callOptions struct {
	Async  bool // print the request id and return
	Stream bool // copy the request log to stdout while it runs
	// CancelOnStop is for requests whose only use is what this command
	// shows (log tails): a stop signal cancels the request instead of
	// leaving it running for nobody.
	CancelOnStop bool
}

// call submits op to the API server, streams its log when asked, and
// decodes the result. A stop signal (Ctrl-C, SIGTERM, SIGHUP) while it
// waits either cancels the request (CancelOnStop) or leaves it running
// and says how to re-attach, as SkyPilot does.
func (f *Factory) call(op string, body, result any, co callOptions) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	// A request only this command needs is cancelled the moment a signal
	// comes, while its stream is still open: it ends as cancelled by its
	// user, not by the hang-up the server would notice a moment later.
	var submitted atomic.Pointer[string]
	var cancelledOnStop atomic.Bool
	var onStop func()
	if co.CancelOnStop {
		onStop = func() {
			if id := submitted.Load(); id != nil {
				cancelFollowed(f.IO.ErrOut, c, *id)
				cancelledOnStop.Store(true)
			}
		}
	}
	ctx, caught, stop := stopContext(context.Background(), onStop)
	defer stop()
	id, err := c.Submit(ctx, op, body)
	if err != nil {
		if sig := caught(); sig != nil {
			return signalExit(sig)
		}
		return err
	}
	submitted.Store(&id)
	if co.Async {
		fmt.Fprintf(f.IO.Out, "Submitted request %s (sky.%s). Follow it with: sky api logs %s\n", id, op, id)
		return nil
	}
	stopped := func() error {
		<-ctx.Done() // onStop has returned
		switch {
		case !co.CancelOnStop:
			printContinues(f.IO, f.IO.ErrOut, c.Endpoint, id)
		case !cancelledOnStop.Load():
			// The signal came before the request id was known here.
			cancelFollowed(f.IO.ErrOut, c, id)
		}
		return signalExit(caught())
	}
	if co.Stream {
		var out io.Writer = f.IO.Out
		if f.IO.IsTTY {
			pw := newProgressWriter(f.IO.Out)
			defer pw.Close()
			out = pw
		}
		_, serr := c.Stream(ctx, id, out, client.StreamOptions{Follow: true})
		if caught() != nil {
			return stopped()
		}
		if serr != nil {
			return serr
		}
	}
	err = c.Wait(ctx, id, result)
	if caught() != nil {
		return stopped()
	}
	var re *client.RequestError
	if errors.As(err, &re) {
		return errors.New(re.Message)
	}
	return err
}

// taskSpec turns a loaded task into what the server runs: absolute paths,
// resources in canonical form, secrets revealed for transport (the server
// redacts them in its records).
func taskSpec(t *task.Task) (api.TaskSpec, error) {
	s := api.TaskSpec{Name: t.Name, NumNodes: t.NumNodes, Envs: t.Envs, Setup: t.Setup, Run: t.Run}
	if t.Resources != nil {
		s.Resources = t.Resources.ToMap()
	}
	if len(t.Secrets) > 0 {
		s.Secrets = map[string]string{}
		for k, v := range t.Secrets {
			s.Secrets[k] = v.Reveal()
		}
	}
	if w := t.Workdir; w != nil {
		if w.URL != "" {
			s.WorkdirGit, s.WorkdirRef = w.URL, w.Ref
		} else if w.Path != "" {
			p, err := absPath(w.Path)
			if err != nil {
				return s, err
			}
			s.Workdir = p
		}
	}
	for dst, fm := range t.FileMounts {
		if fm.Storage != nil || task.IsCloudURI(fm.Source) {
			return s, fmt.Errorf("file_mounts %s: bucket and cloud storage mounts are not available in this build yet; mount a local path instead", dst)
		}
		p, err := absPath(fm.Source)
		if err != nil {
			return s, err
		}
		if s.FileMounts == nil {
			s.FileMounts = map[string]string{}
		}
		s.FileMounts[dst] = p
	}
	if y, err := t.ToYAML(); err == nil {
		s.YAML = string(y)
	}
	return s, nil
}

func absPath(p string) (string, error) {
	if strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, p[2:])
	}
	return filepath.Abs(p)
}

// singleTask loads a task command line that must describe exactly one task.
func singleTask(in *taskInput) (*task.Task, error) {
	dag, err := prepareTask(in)
	if err != nil {
		return nil, err
	}
	if len(dag.Tasks) != 1 {
		return nil, fmt.Errorf("this YAML holds %d tasks (a pipeline or job group); run it with `sky jobs launch`", len(dag.Tasks))
	}
	t := dag.Tasks[0]
	if err := task.ValidateForLaunch(t); err != nil {
		return nil, err
	}
	return t, nil
}

// jobExit turns a job's final status into the CLI's exit code
// (runtime.md: 0 succeeded, 100 failed, 101 not finished, 103 cancelled).
func jobExit(status string) error {
	if status == "" {
		return nil
	}
	if code := agentapi.Status(status).ExitCode(); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

func generatedClusterName() string {
	u := os.Getenv("USER")
	if u == "" {
		u = "user"
	}
	var b strings.Builder
	for _, r := range strings.ToLower(u) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		b.WriteString("user")
	}
	return fmt.Sprintf("sky-%04x-%s", time.Now().UnixNano()&0xffff, b.String())
}

func launchRunRemote(f *Factory, opts *LaunchOptions) error {
	switch {
	case opts.Resize:
		return notAvailable("launch --resize", "resizing clusters")
	case opts.CloneFrom != "":
		return notAvailable("launch --clone-disk-from", "cloning cluster disks")
	}
	t, err := singleTask(opts.Task)
	if err != nil {
		return err
	}
	spec, err := taskSpec(t)
	if err != nil {
		return err
	}
	name := opts.Cluster
	if name == "" {
		name = generatedClusterName()
	}
	body := api.LaunchBody{Task: spec, ClusterName: name, Dryrun: opts.DryRun, Detach: opts.Detach,
		NoSetup: opts.NoSetup || opts.Fast, Fast: opts.Fast, Retry: opts.Retry, IdleMinutes: opts.Autostop.IdleMinutes,
		Down: opts.Autostop.Down, Command: "sky " + strings.Join(os.Args[1:], " ")}
	if !opts.DryRun {
		if err := opts.IO.Confirm(fmt.Sprintf("Launching on cluster '%s'.", name), opts.Yes); err != nil {
			return err
		}
	}
	var res api.LaunchResult
	if err := f.call("launch", body, &res, callOptions{Async: opts.Async, Stream: true}); err != nil {
		return err
	}
	if opts.Async || opts.DryRun {
		return nil
	}
	if res.JobID > 0 && opts.Detach {
		return nil
	}
	return jobExit(res.Status)
}

func execRunRemote(f *Factory, opts *ExecOptions) error {
	t, err := singleTask(opts.Task)
	if err != nil {
		return err
	}
	spec, err := taskSpec(t)
	if err != nil {
		return err
	}
	body := api.ExecBody{Task: spec, ClusterName: opts.Cluster, Detach: opts.Detach, Command: "sky " + strings.Join(os.Args[1:], " ")}
	var res api.LaunchResult
	if err := f.call("exec", body, &res, callOptions{Async: opts.Async, Stream: !opts.Detach}); err != nil {
		return err
	}
	if opts.Async {
		return nil
	}
	if opts.Detach {
		fmt.Fprintf(opts.IO.Out, "Job submitted, ID: %d\n", res.JobID)
		return nil
	}
	return jobExit(res.Status)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
