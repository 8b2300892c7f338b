package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/task"
)

// The client side of `sky jobs launch / queue / cancel / logs`: each
// builds its api.Jobs* body, sends it through Factory.call and prints the
// result in SkyPilot's words (cli-output.md §Managed jobs, §sky jobs
// queue; managed-jobs.md). The controller itself runs in the API server.

// envManagedJobID is set on the nodes of a managed job: a job launched
// from inside one joins its job group unless --no-job-group.
const envManagedJobID = "SKYPILOT_MANAGED_JOB_ID"

// stdoutForIDs returns a Factory whose output goes to stderr, for -o
// id|json: stdout then carries nothing but the IDs a script reads. The
// copy shares the client and the request config.
func (f *Factory) stdoutForIDs() *Factory {
	io := *f.IO
	io.Out = f.IO.ErrOut
	// Whether stderr is a terminal is not known here; plain is safe.
	io.IsTTY, io.Color = false, false
	g := *f
	g.IO = &io
	return &g
}

// prepareManagedJob loads the DAG of a `sky jobs launch` command line
// and builds its request body; it returns the loader's warnings to print.
func prepareManagedJob(f *Factory, opts *JobsLaunchOptions, lookup func(string) (string, bool)) (api.JobsLaunchBody, []string, error) {
	// -n names the job, not every task of a pipeline: the loader's
	// override is kept off and the names are filled here.
	in := *opts.Task
	in.Name = ""
	dag, err := prepareTask(f, &in)
	if err != nil {
		return api.JobsLaunchBody{}, nil, err
	}
	name := task.ManagedJobName(dag, opts.Task.Name)
	if name == "" {
		name = generatedClusterName()
	}
	task.NameTasks(dag, name, opts.Task.Name)
	b, err := jobsLaunchBody(dag, opts, name, lookup)
	return b, dag.Warnings, err
}

// jobsLaunchBody turns the loaded DAG and the command line into the body
// of jobs.launch (uploads not yet done). lookup reads the caller's
// environment, for the job group a job launched inside one joins.
func jobsLaunchBody(dag *task.DAG, opts *JobsLaunchOptions, name string, lookup func(string) (string, bool)) (api.JobsLaunchBody, error) {
	b := api.JobsLaunchBody{Name: name, Pool: opts.Pool, DependsOn: opts.DependsOn, EnvVars: api.ClientEnv()}
	if dag.IsJobGroup() && opts.Pool != "" {
		return b, flagErrorf("a job group (execution: parallel) cannot run on a pool: drop -p/--pool %s", opts.Pool)
	}
	if opts.NumJobs > 1 {
		b.NumJobs = opts.NumJobs
	}
	b.JobGroup = opts.JobGroup
	if b.JobGroup == "" && !opts.NoJobGroup {
		if v, ok := lookup(envManagedJobID); ok && strings.TrimSpace(v) != "" {
			b.JobGroup = strings.TrimSpace(v)
		}
	}
	secrets, err := task.FillJobsLaunch(dag, &b, launchChecks)
	if err != nil {
		return b, err
	}
	argv := os.Args[1:]
	b.Command = task.RedactCommandLine("sky "+strings.Join(argv, " "), secrets...)
	return b, nil
}

// launchChecks are the checks a task passes before the CLI sends it.
func launchChecks(t *task.Task) error {
	if err := task.ValidateForLaunch(t); err != nil {
		return err
	}
	return task.CheckRunnable(t)
}

func jobsLaunchRun(f *Factory, opts *JobsLaunchOptions) error {
	out := f
	if opts.Output != "" {
		out = f.stdoutForIDs()
	}
	io := out.IO
	body, warnings, err := prepareManagedJob(f, opts, f.LookupEnv)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(io.ErrOut, io.Yellow("Warning: ")+w)
	}
	name := body.Name
	printEntrypoint(io, opts.Task)
	if !opts.Yes {
		fmt.Fprintln(io.Out, io.Yellow(fmt.Sprintf("Managed job '%s' will be launched on (estimated):", name)))
		for _, spec := range body.Tasks {
			if err := sendOp(out, apiop.Optimize, api.OptimizeBody{LaunchBody: api.LaunchBody{Task: spec, ClusterName: name, EnvVars: body.EnvVars}}, callOptions{Stream: true}); err != nil {
				return err
			}
		}
		if err := io.Confirm(fmt.Sprintf("Launching a managed job '%s'. Proceed?", name), false); err != nil {
			return err
		}
	}
	for i := range body.Tasks {
		if err := out.uploadTaskFiles(io, &body.Tasks[i], true); err != nil {
			return err
		}
	}
	var res api.JobsLaunchResult
	if err := callOp(out, apiop.JobsLaunch, body, &res, callOptions{Async: opts.Async, Stream: true}); err != nil {
		return err
	}
	if opts.Async {
		return nil
	}
	switch opts.Output {
	case "id":
		for _, id := range res.JobIDs {
			fmt.Fprintln(f.IO.Out, id)
		}
	case "json":
		ids := res.JobIDs
		if ids == nil {
			ids = []int{}
		}
		if err := printJSON(f.IO.Out, struct {
			JobIDs []int `json:"job_ids"`
		}{ids}); err != nil {
			return err
		}
	}
	if len(res.JobIDs) == 0 {
		return fmt.Errorf("the API server accepted managed job '%s' but returned no job ID; see `sky jobs queue`", name)
	}
	var exit error
	if !opts.Detach && len(res.JobIDs) == 1 {
		id := res.JobIDs[0]
		var lr api.JobsLogsResult
		lb := api.JobsLogsBody{JobID: id, Follow: true}
		if err := callOp(out, apiop.JobsLogs, lb, &lr, callOptions{Stream: true, CancelOnStop: true}); err != nil {
			return err
		}
		printManagedFinished(io, id, lr.Status)
		if lr.ExitCode != 0 {
			exit = &ExitError{Code: lr.ExitCode}
		}
	}
	printManagedUsefulCommands(io, res.JobIDs)
	return exit
}

// printManagedFinished is the line after a followed managed job's log.
func printManagedFinished(s *IOStreams, id int, status string) {
	if status == "" {
		status = "UNKNOWN"
	}
	fmt.Fprintln(s.Out, s.Green(fmt.Sprintf("✓ Managed job finished: %d (status: %s).", id, status)))
}

// printManagedUsefulCommands is the block after `sky jobs launch`, with
// -d too. Scripts read "Managed Job ID:" on the line after the heading.
func printManagedUsefulCommands(s *IOStreams, ids []int) {
	if len(ids) > 1 {
		fmt.Fprintf(s.Out, "Jobs submitted with IDs: %s.\n", joinInts(ids, ","))
	}
	fmt.Fprintln(s.Out)
	fmt.Fprintln(s.Out, s.Bold("📋 Useful Commands"))
	if len(ids) == 1 {
		id := ids[0]
		tree(s, s.Cyan("Managed Job ID: ")+strconv.Itoa(id), [][2]string{
			{"To cancel the job:\t\t", fmt.Sprintf("sky jobs cancel %d", id)},
			{"To stream job logs:\t\t", fmt.Sprintf("sky jobs logs %d", id)},
			{"To stream controller logs:\t", fmt.Sprintf("sky jobs logs --controller %d", id)},
			{"To view all managed jobs:\t", "sky jobs queue"},
		})
		return
	}
	tree(s, s.Cyan("Managed Job IDs: ")+joinInts(ids, ","), [][2]string{
		{"To cancel the jobs:\t\t", "sky jobs cancel " + joinInts(ids, " ")},
		{"To stream a job's logs:\t", "sky jobs logs JOB_ID"},
		{"To view all managed jobs:\t", "sky jobs queue"},
	})
}

func joinInts(ids []int, sep string) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, sep)
}

// jobsQueueBody is the request of `sky jobs queue`; now anchors --since.
func jobsQueueBody(opts *JobsQueueOptions, now time.Time) api.JobsQueueBody {
	b := api.JobsQueueBody{SkipFinished: opts.SkipFinished, AllUsers: opts.AllUsers, Statuses: opts.Statuses,
		Infra: opts.Infra, Verbose: opts.Verbose}
	if !opts.All {
		b.Limit = opts.Limit
	}
	// Unix()+fraction, not UnixNano(): a date after 2262 (--after
	// 2999-01-01) overflows nanoseconds.
	epoch := func(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }
	if opts.Since > 0 {
		b.After = epoch(now.Add(-opts.Since))
	}
	if !opts.After.IsZero() {
		b.After = epoch(opts.After)
	}
	if !opts.Before.IsZero() {
		b.Before = epoch(opts.Before)
	}
	return b
}

func jobsQueueRun(f *Factory, opts *JobsQueueOptions) error {
	io := opts.IO
	if opts.Output != "json" {
		fmt.Fprintln(io.Out, io.Cyan("Fetching managed job statuses..."))
	}
	b := jobsQueueBody(opts, f.Now())
	if opts.Output == "json" {
		// Printed as the records come: the whole array is never held.
		out := newJSONArrayWriter(io.Out)
		err := queueStream(f, b, out)
		if err == nil {
			return out.close()
		}
		if !errors.Is(err, client.ErrNoOpStream) {
			return err
		}
		if err := queuePages(f, b, func(page api.JobsQueueResult) error {
			for i := range page.Jobs {
				if err := out.add(&page.Jobs[i]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		return out.close()
	}
	var res api.JobsQueueResult
	first := true
	if err := queuePages(f, b, func(page api.JobsQueueResult) error {
		if first {
			res, first = page, false
		} else {
			res.Jobs = append(res.Jobs, page.Jobs...)
		}
		return nil
	}); err != nil {
		return err
	}
	heading := io.Bold(io.Cyan("Managed jobs"))
	if opts.SkipFinished {
		heading += " (showing in-progress jobs only)"
	}
	fmt.Fprintln(io.Out, heading)
	if err := writeManagedJobs(io, res, managedTableOptions{Verbose: opts.Verbose, AllUsers: opts.AllUsers}, f.Now()); err != nil {
		return err
	}
	if shown := countJobs(res.Jobs); res.Total > shown {
		fmt.Fprintf(io.Out, "Showing the latest %d of %d managed jobs; use -a/--all or -l/--limit N to see more.\n", shown, res.Total)
	}
	return nil
}

// queueStream prints the records of the queue b selects as the server
// streams them (POST /jobs/queue/stream): each is decoded by no one
// here, only indented, and the server neither stores nor re-encodes a
// page of them, which over 10,000 jobs made the paged listing several
// times slower. client.ErrNoOpStream: the server is older, and nothing
// was printed.
func queueStream(f *Factory, b api.JobsQueueBody, out *jsonArrayWriter) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, caught, stop := stopContext(context.Background(), nil)
	defer stop()
	err = client.StreamOp(ctx, c, apiop.JobsQueue, b, out.addJSON, client.WithConfig(f.requestConfig))
	if sig := caught(); sig != nil {
		return signalExit(sig)
	}
	return err
}

// queuePage is how many jobs one request of a long `sky jobs queue`
// (--all, or a --limit above it) asks for: the server then never builds,
// stores and sends the whole queue as one result, and this process never
// holds it.
const queuePage = 1000

// nextQueuePage decides the request after a page: want is the jobs
// asked for (0: all), fetched those received so far (this page
// included), asked and got this page's limit and jobs. A page shorter
// than its limit was the last.
func nextQueuePage(want, fetched, asked, got int) (limit int, more bool) {
	if asked == 0 || got < asked || (want > 0 && fetched >= want) {
		return 0, false
	}
	limit = queuePage
	if want > 0 {
		limit = min(limit, want-fetched)
	}
	return limit, true
}

// queuePages reads the queue b selects, newest first, a page at a time
// below the last job of the page before, and hands each page to each in
// order. The next page's request runs on the server while each handles
// this one. A query by infra is one request (the server filters it after
// reading the jobs, so a page would read every job below its cursor).
func queuePages(f *Factory, b api.JobsQueueBody, each func(api.JobsQueueResult) error) error {
	want := b.Limit
	if b.Infra == "" && (want == 0 || want > queuePage) {
		b.Limit = queuePage
	}
	var page api.JobsQueueResult
	if err := callOp(f, apiop.JobsQueue, b, &page, callOptions{}); err != nil {
		return err
	}
	fetched := 0
	for {
		got := countJobs(page.Jobs)
		fetched += got
		var next chan pageOrError
		if limit, more := nextQueuePage(want, fetched, b.Limit, got); more && got > 0 {
			nb := b
			nb.Limit, nb.BelowJobID = limit, lowestJobID(page.Jobs)
			next = make(chan pageOrError, 1)
			go func() {
				var r pageOrError
				r.err = callOp(f, apiop.JobsQueue, nb, &r.page, callOptions{Background: true})
				next <- r
			}()
			b = nb
		}
		if err := each(page); err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		r := <-next
		if r.err != nil {
			return r.err
		}
		page = r.page
		if low := b.BelowJobID; len(page.Jobs) > 0 && maxJobID(page.Jobs) >= low {
			// A server from before the cursor answers the first page again.
			return fmt.Errorf("the API server returned jobs from %d on when asked for those below %d: it does not page the queue; upgrade it (`sky api stop; sky api start`), or pass --limit %d or less", maxJobID(page.Jobs), low, queuePage)
		}
	}
}

func maxJobID(recs []api.ManagedJobRecord) int {
	high := 0
	for _, r := range recs {
		high = max(high, r.JobID)
	}
	return high
}

type pageOrError struct {
	page api.JobsQueueResult
	err  error
}

func lowestJobID(recs []api.ManagedJobRecord) int {
	low := 0
	for _, r := range recs {
		if low == 0 || r.JobID < low {
			low = r.JobID
		}
	}
	return low
}

// jsonArrayWriter prints a JSON array one element at a time, byte for
// byte as printJSON prints the whole slice.
type jsonArrayWriter struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
	n   int
}

func newJSONArrayWriter(w io.Writer) *jsonArrayWriter {
	a := &jsonArrayWriter{w: bufio.NewWriterSize(w, 64<<10)}
	a.enc = json.NewEncoder(&a.buf)
	a.enc.SetIndent("  ", "  ")
	a.enc.SetEscapeHTML(false)
	return a
}

func (a *jsonArrayWriter) add(v any) error {
	a.buf.Reset()
	if err := a.enc.Encode(v); err != nil {
		return err
	}
	a.sep()
	_, err := a.w.Write(bytes.TrimSuffix(a.buf.Bytes(), []byte("\n")))
	return err
}

// addJSON adds an element given as compact JSON, encoded as encoding/json
// encodes it with HTML escaping off: it comes out as add would print the
// value it decodes to.
func (a *jsonArrayWriter) addJSON(v []byte) error {
	a.buf.Reset()
	if err := json.Indent(&a.buf, v, "  ", "  "); err != nil {
		return fmt.Errorf("the API server sent a record that is not JSON: %w", err)
	}
	a.sep()
	_, err := a.w.Write(a.buf.Bytes())
	return err
}

func (a *jsonArrayWriter) sep() {
	sep := ",\n  "
	if a.n == 0 {
		sep = "[\n  "
	}
	a.n++
	a.w.WriteString(sep)
}

func (a *jsonArrayWriter) close() error {
	if a.n == 0 {
		a.w.WriteString("[]\n")
	} else {
		a.w.WriteString("\n]\n")
	}
	return a.w.Flush()
}

// statusManagedJobs is the managed-jobs section of `sky status`, as
// SkyPilot prints it under the clusters: the latest few in-progress jobs
// (or "No in-progress managed jobs."), then the hint naming `sky jobs
// queue`. It never fails the status: an error is the section's text.
func statusManagedJobs(f *Factory, opts *StatusOptions) {
	const shownInStatus = 5
	io := opts.IO
	fmt.Fprintln(io.Out)
	fmt.Fprintln(io.Out, io.Bold(io.Cyan("Managed jobs")))
	var res api.JobsQueueResult
	b := api.JobsQueueBody{SkipFinished: true, AllUsers: opts.AllUsers, Limit: shownInStatus, Verbose: opts.Verbose}
	if err := callOp(f, apiop.JobsQueue, b, &res, callOptions{Background: opts.background}); err != nil {
		fmt.Fprintf(io.Out, "Failed to query managed jobs: %v\n", err)
		return
	}
	if err := writeManagedJobs(io, res, managedTableOptions{Verbose: opts.Verbose, AllUsers: opts.AllUsers}, f.Now()); err != nil {
		fmt.Fprintf(io.Out, "Failed to show managed jobs: %v\n", err)
		return
	}
	fmt.Fprintln(io.Out)
	fmt.Fprintln(io.Out, managedInProgressHint(max(res.Total, countJobs(res.Jobs)), shownInStatus))
}

// managedInProgressHint is the hint that ends the managed-jobs section
// of `sky status`.
func managedInProgressHint(total, shown int) string {
	info := ""
	switch {
	case total == 1:
		info = "1 managed job is in progress"
	case total > 1:
		info = fmt.Sprintf("%d managed jobs are in progress", total)
	}
	if total > shown {
		info += fmt.Sprintf(" (%d latest ones shown)", shown)
	}
	if info != "" {
		info += ". "
	}
	return "* " + info + "To see all managed jobs: " + "sky jobs queue"
}

// managedCancelWhat names what `sky jobs cancel` cancels, for its prompt.
func managedCancelWhat(opts *JobsCancelOptions) string {
	var what string
	switch {
	case opts.AllUsers:
		what = "all managed jobs FOR ALL USERS"
	case opts.All:
		what = "all managed jobs"
	case opts.Pool != "":
		what = fmt.Sprintf("managed jobs with pool '%s'", opts.Pool)
	case opts.Name != "":
		what = fmt.Sprintf("managed job '%s'", opts.Name)
	case len(opts.JobIDs) == 1:
		what = fmt.Sprintf("managed job with ID %d", opts.JobIDs[0])
	default:
		what = "managed jobs with IDs " + joinInts(opts.JobIDs, ",")
	}
	if opts.Task != "" {
		what = fmt.Sprintf("task '%s' of %s", opts.Task, what)
	}
	return what
}

func jobsCancelRun(f *Factory, opts *JobsCancelOptions) error {
	if err := opts.IO.Confirm(fmt.Sprintf("Cancelling %s. Proceed?", managedCancelWhat(opts)), opts.Yes); err != nil {
		return err
	}
	b := api.JobsCancelBody{JobIDs: opts.JobIDs, Name: opts.Name, Pool: opts.Pool, All: opts.All, AllUsers: opts.AllUsers,
		Task: opts.Task, Graceful: opts.Graceful.Graceful}
	if opts.Graceful.set {
		t := opts.Graceful.Timeout
		b.GracefulTimeout = &t
	}
	var res api.JobsCancelResult
	if err := callOp(f, apiop.JobsCancel, b, &res, callOptions{}); err != nil {
		return err
	}
	msg := res.Message
	if msg == "" {
		msg = "No job to cancel."
	}
	fmt.Fprintln(opts.IO.Out, msg)
	return nil
}

// defaultFollowTail is what `sky jobs logs` shows of a followed log when
// --tail is not given: enough to orient, not a multi-GB replay.
const defaultFollowTail = 1000

func jobsLogsRun(f *Factory, opts *JobsLogsOptions) error {
	if opts.SyncDown {
		return jobsSyncDown(f, opts)
	}
	b := api.JobsLogsBody{JobID: opts.JobID, Name: opts.Name, Task: opts.Task, Follow: opts.Follow,
		Controller: opts.Controller, Tail: max(opts.Tail, 0)}
	if opts.Output == "json" {
		// The timeline so far, as data: a script that wants to wait
		// follows the log instead.
		b.Events, b.Follow, b.Tail = true, false, 0
		var res api.JobsLogsResult
		if err := callOp(f, apiop.JobsLogs, b, &res, callOptions{CancelOnStop: true}); err != nil {
			return err
		}
		ev := res.Events
		if ev == nil {
			ev = []api.ManagedEvent{}
		}
		if err := printJSON(opts.IO.Out, ev); err != nil {
			return err
		}
		if res.ExitCode == 102 {
			return &ExitError{Code: res.ExitCode}
		}
		return nil
	}
	if opts.Tail < 0 && opts.Follow {
		b.Tail = defaultFollowTail
		fmt.Fprintf(opts.IO.ErrOut, "Showing the last %d lines of the log; pass --tail 0 for all of it.\n", defaultFollowTail)
	}
	var res api.JobsLogsResult
	if err := callOp(f, apiop.JobsLogs, b, &res, callOptions{Stream: true, CancelOnStop: true}); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &ExitError{Code: res.ExitCode}
	}
	return nil
}

// jobsSyncDown is `sky jobs logs --sync-down`: the selected jobs' logs
// (or their controller logs) are fetched as `sky logs --sync-down`
// fetches a cluster job's, into ~/sky_logs/managed_jobs (or
// ~/sky_logs/jobs_controller), one line per job saying where.
func jobsSyncDown(f *Factory, opts *JobsLogsOptions) error {
	b := api.JobsDownloadBody{Name: opts.Name, Controller: opts.Controller}
	if opts.JobID > 0 {
		b.JobIDs = []int{opts.JobID}
	}
	var res api.LogsDownload
	if err := callOp(f, apiop.JobsDownloadLogs, b, &res, callOptions{}); err != nil {
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
	root, suffix := filepath.Join(home, "sky_logs", "managed_jobs"), ""
	if opts.Controller {
		root, suffix = filepath.Join(home, "sky_logs", "jobs_controller"), " (controller)"
	}
	if len(res.Jobs) == 0 {
		fmt.Fprintln(opts.IO.Out, "No managed job logs to download.")
		return nil
	}
	for _, j := range res.Jobs {
		dir, err := writeJobLogs(context.Background(), c, res.RequestID, root, j)
		if err != nil {
			return err
		}
		// Coloured even when piped, like `sky logs --sync-down`: scripts
		// cut the path out up to the reset code.
		fmt.Fprintf(opts.IO.Out, "\x1b[36mJob %d logs%s: %s\x1b[0m\n", j.JobID, suffix, dir)
	}
	return nil
}
