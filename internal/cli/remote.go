package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/cliext"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/task"
)

// callOptions says how a command waits for its request.
type callOptions struct {
	Async  bool // print the request id and return
	Stream bool // copy the request log to stdout while it runs
	// Progress, when set, is the terminal's progress display the log goes
	// through; the caller owns it, so a stage line it wrote before the
	// call can be completed after it.
	Progress *progressWriter
	// Replay prints the request log once the request is over: the same
	// lines as Stream for a request too short to watch, without the wait
	// of following a log.
	Replay bool
	// CancelOnStop is for requests whose only use is what this command
	// shows (log tails): a stop signal cancels the request instead of
	// leaving it running for nobody.
	CancelOnStop bool
	// Background is for a call made beside the command's main one (the
	// sections of `sky status`): it leaves stop signals to the main call,
	// which says what happens to the requests.
	Background bool
}

// remoteError is a failed request's error with the type the server gave
// it (ClusterDoesNotExist, NotSupportedError, ...): commands react to the
// type as SkyPilot's client reacts to its exception classes.
type remoteError struct {
	Type string
	Msg  string
}

func (e *remoteError) Error() string { return e.Msg }

// errorType is the server's type of a failed request's error, "" for any
// other error.
func errorType(err error) string {
	var re *remoteError
	if errors.As(err, &re) {
		return re.Type
	}
	return ""
}

// call submits op to the API server, streams its log when asked, and
// decodes the result. A stop signal (Ctrl-C, SIGTERM, SIGHUP) while it
// waits either cancels the request (CancelOnStop) or leaves it running
// and says how to re-attach, as SkyPilot does.
// callOp runs the operation d describes with body and decodes its result
// into result. It and sendOp are how the command line sends a request:
// body and result are typed by the operation's descriptor
// (internal/apiop), the one place its name is written.
func callOp[B, R any](f *Factory, d op.Desc[B, R], body B, result *R, co callOptions) error {
	return call(f, d, body, result, co)
}

// callOpJSON is callOp for a command that prints the result as the
// server sent it (-o json): raw gets the result still encoded, with any
// field this client does not know.
func callOpJSON[B, R any](f *Factory, d op.Desc[B, R], body B, raw *json.RawMessage, co callOptions) error {
	return call(f, d, body, raw, co)
}

// sendOp runs the operation d describes with body, for a command that
// shows its log or its outcome but not its result.
func sendOp[B, R any](f *Factory, d op.Desc[B, R], body B, co callOptions) error {
	return call(f, d, body, nil, co)
}

// call submits the operation d describes and decodes its result into
// result (an *R, or the encoded result, or nil).
func call[B, R any](f *Factory, d op.Desc[B, R], body B, result any, co callOptions) error {
	return follow(f, d.RequestName(), func(ctx context.Context, c *client.Client, opts ...client.OpOption) (string, error) {
		return client.Submit(ctx, c, d, body, opts...)
	}, result, co)
}

// follow submits a request (submit, named requestName) with the command's
// config and follows it as co says, decoding its result into result.
func follow(f *Factory, requestName string, submit cliext.Submit, result any, co callOptions) error {
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
	var ctx context.Context = context.Background()
	caught, stop := func() os.Signal { return nil }, func() {}
	if !co.Background {
		ctx, caught, stop = stopContext(ctx, onStop)
	}
	defer stop()
	id, err := submit(ctx, c, client.WithConfig(f.requestConfig))
	if err != nil {
		if sig := caught(); sig != nil {
			return signalExit(sig)
		}
		return err
	}
	submitted.Store(&id)
	if co.Async {
		printAsyncHint(f.IO, requestName, id, c.Endpoint)
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
		var out io.Writer
		if co.Progress != nil {
			out = co.Progress
		} else {
			sw := newStreamWriter(f.IO.Out, f.IO.IsTTY)
			defer sw.Close()
			out = sw
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
	if co.Replay {
		out := newStreamWriter(f.IO.Out, f.IO.IsTTY)
		_, serr := c.Stream(ctx, id, out, client.StreamOptions{})
		out.Close()
		if serr != nil && err == nil {
			err = serr
		}
	}
	var re *client.RequestError
	if errors.As(err, &re) {
		return &remoteError{Type: re.Type, Msg: re.Message}
	}
	return err
}

// recordedCommand is the command line the server stores as the cluster's
// last use and shows in status and the request list: it must not carry
// the values given with --secret, nor those read from --secret-file or
// the YAML should the user have pasted one on the line.
func recordedCommand(args []string, secrets map[string]string) string {
	vals := make([]string, 0, len(secrets))
	for _, v := range secrets {
		vals = append(vals, v)
	}
	return task.RedactCommandLine("sky "+strings.Join(args, " "), vals...)
}

// singleTask loads a task command line that must describe exactly one task.
func singleTask(f *Factory, in *taskInput) (*task.Task, error) {
	dag, err := prepareTask(f, in)
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
	if err := task.CheckRunnable(t); err != nil {
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
	t, err := singleTask(f, opts.Task)
	if err != nil {
		return err
	}
	if a := opts.Autostop; a.WaitFor != "" && a.IdleMinutes == nil && !a.Down && (t.Resources == nil || t.Resources.Autostop == nil) {
		return flagErrorf("--wait-for sets what resets the autostop idle timer: give -i/--idle-minutes-to-autostop (or --down, or resources.autostop in the YAML) too")
	}
	spec, err := task.Spec(t)
	if err != nil {
		return err
	}
	name := opts.Cluster
	if name == "" {
		name = generatedClusterName()
	}
	body := api.LaunchBody{Task: spec, ClusterName: name, Dryrun: opts.DryRun, Detach: opts.Detach,
		NoSetup: opts.NoSetup, Fast: opts.Fast, Retry: opts.Retry, IdleMinutes: opts.Autostop.IdleMinutes,
		Down: opts.Autostop.Down, WaitFor: opts.Autostop.WaitFor, Command: recordedCommand(os.Args[1:], spec.Secrets), EnvVars: api.ClientEnv()}
	printEntrypoint(opts.IO, opts.Task)
	asked := false
	// --dryrun asks too (cli-output.md): the answer ends the dry run.
	if !opts.Yes {
		q, provisions, err := f.launchQuestion(name)
		if err != nil {
			return err
		}
		if provisions {
			// SkyPilot shows what it would provision, and its price,
			// before asking whether to.
			if err := sendOp(f, apiop.Optimize, api.OptimizeBody{LaunchBody: body}, callOptions{Stream: true}); err != nil {
				return err
			}
			body.PlanShown = true
		}
		if q != "" {
			asked = true
			if err := opts.IO.Confirm(q, false); err != nil {
				return err
			}
			if opts.DryRun && provisions {
				// The plan is out already; a second request would only
				// compute it again.
				fmt.Fprintln(opts.IO.Out, "Dryrun finished.")
				return nil
			}
		}
	}
	if !asked {
		// SkyPilot names the cluster here only when no prompt did.
		fmt.Fprintln(opts.IO.Out, opts.IO.Cyan("Running on cluster: ")+name)
	}
	if !opts.DryRun {
		if err := f.uploadTaskFiles(opts.IO, &body.Task, true); err != nil {
			return err
		}
	}
	var res api.LaunchResult
	if err := callOp(f, apiop.Launch, body, &res, callOptions{Async: opts.Async, Stream: true}); err != nil {
		return err
	}
	if opts.DryRun && res.Existing {
		printUsefulCommands(opts.IO, res.ClusterName, 0, res.SSH)
		return nil
	}
	if opts.Async || opts.DryRun {
		return nil
	}
	printUsefulCommands(opts.IO, res.ClusterName, res.JobID, res.SSH)
	if opts.Detach {
		return nil
	}
	return jobExit(res.Status)
}

// launchQuestion is what to ask before launching on cluster name, as
// SkyPilot asks it: before provisioning a new cluster, restarting a
// stopped one or reusing another user's; "" when the launch only reuses
// an UP cluster of the caller's, which needs no confirmation. provisions
// says the launch creates the cluster, so the optimizer's choice is worth
// showing first.
func (f *Factory) launchQuestion(name string) (q string, provisions bool, err error) {
	var own []api.ClusterRecord
	if err := callOp(f, apiop.Status, api.ClustersBody{ClusterNames: []string{name}}, &own, callOptions{}); err != nil {
		return "", false, err
	}
	if len(own) > 0 {
		if own[0].Status == "STOPPED" {
			return fmt.Sprintf("Restarting the stopped cluster '%s'. Proceed?", name), false, nil
		}
		return "", false, nil
	}
	var anyone []api.ClusterRecord
	if err := callOp(f, apiop.Status, api.ClustersBody{ClusterNames: []string{name}, AllUsers: true}, &anyone, callOptions{}); err != nil {
		return "", false, err
	}
	if len(anyone) == 0 {
		return fmt.Sprintf("Launching a new cluster '%s'. Proceed?", name), true, nil
	}
	if c := anyone[0]; c.Status == "STOPPED" {
		return fmt.Sprintf("Restarting the stopped cluster '%s' created by another user '%s'. Proceed?", name, c.UserName), false, nil
	}
	return fmt.Sprintf("Cluster '%s' was created by another user '%s'. Reusing the cluster. Proceed?", name, anyone[0].UserName), false, nil
}

func execRunRemote(f *Factory, opts *ExecOptions) error {
	t, err := singleTask(f, opts.Task)
	if err != nil {
		return err
	}
	spec, err := task.Spec(t)
	if err != nil {
		return err
	}
	body := api.ExecBody{Task: spec, ClusterName: opts.Cluster, Detach: opts.Detach, Command: recordedCommand(os.Args[1:], spec.Secrets)}
	printEntrypoint(opts.IO, opts.Task)
	fmt.Fprintln(opts.IO.Out, opts.IO.Cyan("Submitting job to cluster: ")+opts.Cluster)
	if err := f.uploadTaskFiles(opts.IO, &body.Task, false); err != nil {
		return err
	}
	var res api.LaunchResult
	// Detached, the request ends at the submit: its lines are printed
	// when it is over rather than followed.
	if err := callOp(f, apiop.Exec, body, &res, callOptions{Async: opts.Async, Stream: !opts.Detach, Replay: opts.Detach}); err != nil {
		return err
	}
	if opts.Async || opts.Detach {
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
