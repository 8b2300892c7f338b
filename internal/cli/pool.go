package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/task"
)

// `sky jobs pool apply/status/down/logs`: pools of worker clusters that
// managed jobs run on (`sky jobs launch --pool`), through the
// jobs.pool_* operations.

// PoolApplyOptions is everything `sky jobs pool apply` needs.
type PoolApplyOptions struct {
	IO      *IOStreams
	Config  []string
	Task    *taskInput // nil when only --workers is given
	Pool    string
	Mode    string
	Workers int // -1: not given
	Yes     bool
	Async   bool
}

func newPoolApplyCmd(f *Factory, runF func(*PoolApplyOptions) error) *cobra.Command {
	opts := &PoolApplyOptions{IO: f.IO}
	var (
		tf      taskFlags
		async   boolPair
		workers int
	)
	cmd := &cobra.Command{
		Use:   "apply [flags] [POOL_YAML]",
		Short: "Create or update a pool, or change its number of workers",
		Long: `Apply a pool YAML (a task with a pool: section) to create or update a
pool, or change the number of workers with --workers. One of POOL_YAML or
--workers is needed.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			var err error
			if opts.Mode, err = choice("--mode", opts.Mode, "rolling", "blue_green"); err != nil {
				return err
			}
			opts.Workers = -1
			if cmd.Flags().Changed("workers") {
				if workers < 0 {
					return flagErrorf("invalid --workers %d: want 0 or more", workers)
				}
				opts.Workers = workers
			}
			switch {
			case len(args) == 0 && opts.Workers < 0:
				return flagErrorf("give a POOL_YAML or --workers N")
			case len(args) == 0 && opts.Pool == "":
				return flagErrorf("--workers needs -p/--pool: the pool to resize")
			case len(args) == 1:
				entry, err := yamlEntrypoint(args[0])
				if err != nil {
					return err
				}
				if opts.Task, err = tf.resolve(entry, f.LookupEnv); err != nil {
					return err
				}
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return poolApplyRun(f, opts)
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.StringVarP(&opts.Pool, "pool", "p", "", "Pool name (default: generated)")
	fs.StringVar(&opts.Mode, "mode", "rolling", "How a running pool is updated: rolling or blue_green")
	fs.IntVar(&workers, "workers", 0, "Set the number of workers in the pool")
	addTaskFlags(cmd, &tf, taskFlagSet{})
	addAsyncFlag(cmd, &async)
	addYesFlag(cmd, &opts.Yes)
	return cmd
}

// PoolStatusOptions is everything `sky jobs pool status` needs.
type PoolStatusOptions struct {
	IO      *IOStreams
	Config  []string
	Pools   []string
	Verbose bool
	All     bool
}

func newPoolStatusCmd(f *Factory, runF func(*PoolStatusOptions) error) *cobra.Command {
	opts := &PoolStatusOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "status [flags] [POOL_NAMES]...",
		Short: "Show pools",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Pools = args
			if runF != nil {
				return runF(opts)
			}
			return poolStatusRun(f, opts)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "Show all details, untruncated")
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "Show every worker")
	return cmd
}

// PoolDownOptions is everything `sky jobs pool down` needs.
type PoolDownOptions struct {
	IO     *IOStreams
	Config []string
	Pools  []string
	All    bool
	Purge  bool
	Yes    bool
	Async  bool
}

func newPoolDownCmd(f *Factory, runF func(*PoolDownOptions) error) *cobra.Command {
	opts := &PoolDownOptions{IO: f.IO}
	var async boolPair
	cmd := &cobra.Command{
		Use:   "down [flags] [POOL_NAMES]...",
		Short: "Delete pools",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Pools = args
			if len(args) > 0 && opts.All {
				return flagErrorf("name pools or use -a/--all, not both")
			}
			if len(args) == 0 && !opts.All {
				return flagErrorf("no pool given: name the pool(s) to delete, or use -a/--all")
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return poolDownRun(f, opts)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "Delete all pools")
	cmd.Flags().BoolVarP(&opts.Purge, "purge", "p", false, "Also remove pools in a failed status")
	addYesFlag(cmd, &opts.Yes)
	addAsyncFlag(cmd, &async)
	return cmd
}

// PoolLogsOptions is everything `sky jobs pool logs` needs.
type PoolLogsOptions = serviceLogsOptions

func newPoolLogsCmd(f *Factory, runF func(*PoolLogsOptions) error) *cobra.Command {
	if runF == nil {
		runF = func(o *PoolLogsOptions) error { return poolLogsRun(f, o) }
	}
	return serviceLogsCmd(f, runF, "jobs pool logs", "POOL_NAME", "WORKER_IDS", false)
}

// poolApplyRun loads the pool YAML (its pool: section is the policy),
// uploads its files, and applies it; or, with --workers alone, resizes.
func poolApplyRun(f *Factory, opts *PoolApplyOptions) error {
	io := f.IO
	body := api.PoolApplyBody{Name: opts.Pool, Mode: opts.Mode, EnvVars: api.ClientEnv()}
	if opts.Workers >= 0 {
		n := opts.Workers
		body.Workers = &n
	}
	if opts.Task != nil {
		dag, err := prepareTask(f, opts.Task)
		if err != nil {
			return err
		}
		for _, w := range dag.Warnings {
			fmt.Fprintln(io.ErrOut, io.Yellow("Warning: ")+w)
		}
		spec, policy, err := task.PoolSubmission(dag, opts.Task.Entry.YAMLPath)
		if err != nil {
			return kindAsFlagError(err)
		}
		body.Policy = &policy
		what := "a new pool"
		if opts.Pool != "" {
			what = "pool '" + opts.Pool + "'"
		}
		if err := io.Confirm(fmt.Sprintf("Applying config to %s. Proceed?", what), opts.Yes); err != nil {
			return err
		}
		if err := f.uploadTaskFiles(io, &spec, true); err != nil {
			return err
		}
		body.Task = &spec
	}
	var res api.PoolApplyResult
	return callOp(f, apiop.PoolApply, body, &res, callOptions{Async: opts.Async, Stream: true})
}

// poolStatusRun prints the pools and their workers.
func poolStatusRun(f *Factory, opts *PoolStatusOptions) error {
	var recs []api.PoolRecord
	if err := callOp(f, apiop.PoolStatus, api.PoolStatusBody{Names: opts.Pools}, &recs, callOptions{}); err != nil {
		return err
	}
	writePools(f.IO, recs, opts.Verbose, opts.All, f.Now())
	return nil
}

// writePools prints the Pools table and the Pool Workers table, as
// `sky serve status` prints services and replicas. Without -a, workers
// that failed or are going away are left out (the pool's STATUS still
// says FAILED).
func writePools(s *IOStreams, recs []api.PoolRecord, verbose, all bool, now time.Time) {
	if len(recs) == 0 {
		fmt.Fprintln(s.Out, "No existing pools.")
		return
	}
	fmt.Fprintln(s.Out, s.Cyan("Pools"))
	pt := newTable(s.Bold, "NAME", "VERSION", "UPTIME", "STATUS", "WORKERS")
	if verbose {
		pt = newTable(s.Bold, "NAME", "VERSION", "UPTIME", "STATUS", "WORKERS", "POLICY", "REQUESTED_RESOURCES", "PENDING_JOBS")
	}
	for _, r := range recs {
		cells := []string{r.Name, strconv.Itoa(r.Version), spanCell(now, floatOr0(r.UptimeSince), nil), r.Status,
			fmt.Sprintf("%d/%d", r.ReadyWorkers, r.Target)}
		if verbose {
			cells = append(cells, policyCell(r.Policy), r.RequestedResources, strconv.Itoa(r.PendingJobs))
		}
		pt.addRow(cells...)
	}
	_ = pt.render(s.Out)
	fmt.Fprintln(s.Out)
	fmt.Fprintln(s.Out, s.Cyan("Pool Workers"))
	wt := newTable(s.Bold, "POOL_NAME", "ID", "VERSION", "LAUNCHED", "INFRA", "RESOURCES", "STATUS", "USED_BY")
	if verbose {
		wt = newTable(s.Bold, "POOL_NAME", "ID", "VERSION", "LAUNCHED", "INFRA", "RESOURCES", "STATUS", "USED_BY", "CLUSTER", "REASON")
	}
	n := 0
	for _, r := range recs {
		for _, w := range r.Workers {
			if !all && !liveWorker(w.Status) {
				continue
			}
			n++
			used := "-"
			if len(w.UsedBy) > 0 {
				parts := make([]string, len(w.UsedBy))
				for i, id := range w.UsedBy {
					parts[i] = strconv.Itoa(id)
				}
				used = strings.Join(parts, ",")
			}
			cells := []string{r.Name, strconv.Itoa(w.ID), strconv.Itoa(w.Version), agoCell(now, w.LaunchedAt), orDashCell(w.Infra),
				orDashCell(w.Resources), w.Status, used}
			if verbose {
				cells = append(cells, w.Name, orDashCell(w.Reason))
			}
			wt.addRow(cells...)
		}
	}
	if n == 0 {
		fmt.Fprintln(s.Out, "No workers (-a shows failed ones).")
		return
	}
	_ = wt.render(s.Out)
}

func liveWorker(status string) bool {
	switch status {
	case api.WorkerPending, api.WorkerProvisioning, api.WorkerStarting, api.WorkerReady, api.WorkerNotReady:
		return true
	}
	return false
}

func floatOr0(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func orDashCell(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func policyCell(p api.PoolPolicy) string {
	if p.Autoscaling() {
		return fmt.Sprintf("Autoscaling [%d, %d] (queue > %d)", p.Min(), p.Max(), max(p.QueueLengthThreshold, 1))
	}
	return fmt.Sprintf("Fixed %d", p.Min())
}

// poolDownRun tears pools down (their jobs are cancelled first).
func poolDownRun(f *Factory, opts *PoolDownOptions) error {
	what := "all pools"
	if !opts.All {
		what = "pool(s) " + strings.Join(opts.Pools, ", ")
	}
	if err := f.IO.Confirm(fmt.Sprintf("Terminating %s, and cancelling their jobs. Proceed?", what), opts.Yes); err != nil {
		return err
	}
	var res api.PoolDownResult
	return callOp(f, apiop.PoolDown, api.PoolDownBody{Names: opts.Pools, All: opts.All, Purge: opts.Purge}, &res,
		callOptions{Async: opts.Async, Stream: true})
}

// poolLogsRun streams the pool controller's log or one worker's.
func poolLogsRun(f *Factory, opts *PoolLogsOptions) error {
	if opts.SyncDown {
		return poolSyncDown(f, opts)
	}
	b := api.PoolLogsBody{Name: opts.Name, Controller: opts.Controller, Follow: opts.Follow}
	if opts.Tail > 0 {
		b.Tail = opts.Tail
	}
	if !opts.Controller {
		b.WorkerID = opts.IDs[0]
	}
	return sendOp(f, apiop.PoolLogs, b, callOptions{Stream: true, CancelOnStop: true})
}

// statusPools is the pools section of `sky status`: the Pools table
// under the clusters and managed jobs, when there are pools. It never
// fails the status: an error is the section's text.
func statusPools(f *Factory, opts *StatusOptions) {
	io := opts.IO
	var recs []api.PoolRecord
	if err := callOp(f, apiop.PoolStatus, api.PoolStatusBody{}, &recs, callOptions{Background: opts.background}); err != nil {
		fmt.Fprintf(io.Out, "\nFailed to query pools: %v\n", err)
		return
	}
	if len(recs) == 0 {
		return
	}
	fmt.Fprintln(io.Out)
	fmt.Fprintln(io.Out, io.Bold(io.Cyan("Pools")))
	t := newTable(io.Bold, "NAME", "VERSION", "UPTIME", "STATUS", "WORKERS")
	now := f.Now()
	for _, r := range recs {
		t.addRow(r.Name, strconv.Itoa(r.Version), spanCell(now, floatOr0(r.UptimeSince), nil), r.Status, fmt.Sprintf("%d/%d", r.ReadyWorkers, r.Target))
	}
	_ = t.render(io.Out)
	fmt.Fprintf(io.Out, "\n* To see the pools' workers: %s\n", io.Bold("sky jobs pool status"))
}

// poolSyncDown downloads the pool's logs (the controller's and the
// workers', or as narrowed) to ~/sky_logs/pools/<pool>/.
func poolSyncDown(f *Factory, opts *PoolLogsOptions) error {
	var res api.LogsDownload
	b := api.PoolSyncDownBody{Name: opts.Name, WorkerIDs: opts.IDs, Controller: opts.Controller}
	if err := callOp(f, apiop.PoolSyncDownLogs, b, &res, callOptions{}); err != nil {
		return err
	}
	return downloadServiceLogs(f, opts.IO, res, "pools", "Pool "+opts.Name)
}

// downloadServiceLogs fetches the logs a pool's or a service's
// sync-down request gathered into ~/sky_logs/<dir>/, one line per
// directory, coloured like `sky logs --sync-down` (scripts cut the path
// out up to the reset code).
func downloadServiceLogs(f *Factory, io *IOStreams, res api.LogsDownload, dir, what string) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	home, err := homeDir()
	if err != nil {
		return err
	}
	for _, j := range res.Jobs {
		d, err := writeJobLogs(context.Background(), c, res.RequestID, filepath.Join(home, "sky_logs", dir), j)
		if err != nil {
			return err
		}
		fmt.Fprintf(io.Out, "\x1b[36m%s logs: %s\x1b[0m\n", what, d)
	}
	return nil
}
