package cli

import (
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

// QueueOptions is everything `sky queue` needs.
type QueueOptions struct {
	IO           *IOStreams
	Config       []string
	Clusters     []string
	AllUsers     bool
	SkipFinished bool
	Output       string
}

func newQueueCmd(f *Factory, runF func(*QueueOptions) error) *cobra.Command {
	opts := &QueueOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "queue [flags] [CLUSTERS]...",
		Short: "Show the job queue of clusters",
		Long:  `Show the jobs on the named clusters (default: all your clusters that are UP).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if err := checkClusterNames(args...); err != nil {
				return err
			}
			opts.Clusters = args
			var err error
			if opts.Output, err = parseOutput(opts.Output); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("queue", "listing cluster jobs")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.AllUsers, "all-users", "u", false, "Show every user's jobs")
	cmd.Flags().BoolVarP(&opts.SkipFinished, "skip-finished", "s", false, "Show only pending and running jobs")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}

// LogsOptions is everything `sky logs` needs.
type LogsOptions struct {
	IO        *IOStreams
	Config    []string
	Cluster   string
	JobIDs    []int
	Provision bool
	Hook      string // "" not asked; hookAuto: whichever hook log exists
	Worker    int    // -1: head node
	SyncDown  bool
	Status    bool
	Follow    bool
	Tail      int
}

// hookAuto is --hook given without an event name.
const hookAuto = "auto"

// takeHookEvent reads `--hook stop` (with a space) as --hook=stop. The
// event is optional, so pflag binds only `--hook=EVENT` and leaves the
// event among the arguments; with --hook no job IDs are allowed, so an
// argument that names an event, beside the cluster, is the event.
func takeHookEvent(opts *LogsOptions, args []string) []string {
	if opts.Hook != hookAuto || len(args) != 2 {
		return args
	}
	for i, a := range args {
		if slices.Contains(agentapi.HookEvents, a) {
			opts.Hook = a
			return slices.Delete(slices.Clone(args), i, i+1)
		}
	}
	return args
}

func newLogsCmd(f *Factory, runF func(*LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{IO: f.IO}
	var (
		follow   boolPair
		autostop bool
	)
	cmd := &cobra.Command{
		Use:   "logs [flags] CLUSTER [JOB_IDS]...",
		Short: "Tail the logs of a job",
		Long: `Stream the log of a job on a cluster (default: its latest job).

With --status, print the job's status instead and exit with a code for it:
0 succeeded, 100 failed, 101 not finished, 102 not found, 103 cancelled.`,
		Args: rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			args = takeHookEvent(opts, args)
			if len(args) == 0 {
				return flagErrorf("give the CLUSTER whose logs to show")
			}
			if err := checkClusterNames(args[0]); err != nil {
				return err
			}
			opts.Cluster = args[0]
			var err error
			if opts.JobIDs, err = parseInts("job ID", args[1:]); err != nil {
				return err
			}
			if autostop {
				if opts.Hook != "" && opts.Hook != hookAuto && opts.Hook != "stop" {
					return flagErrorf("--autostop means --hook stop; it cannot be combined with --hook %s", opts.Hook)
				}
				opts.Hook = "stop"
			}
			if opts.Hook != "" && opts.Hook != hookAuto && !slices.Contains(agentapi.HookEvents, opts.Hook) {
				return flagErrorf("invalid --hook %q: choose one of %s, or give --hook alone for whichever log exists", opts.Hook, strings.Join(agentapi.HookEvents, ", "))
			}
			if !cmd.Flags().Changed("worker") {
				opts.Worker = -1
			} else if opts.Worker < 0 {
				return flagErrorf("invalid --worker %d: want a worker ID >= 0", opts.Worker)
			}
			if opts.Status && opts.SyncDown {
				return flagErrorf("--status and --sync-down cannot be used together")
			}
			modes := 0
			for _, on := range []bool{opts.Provision, opts.Hook != "", opts.Status || opts.SyncDown} {
				if on {
					modes++
				}
			}
			if modes > 1 {
				return flagErrorf("choose one of --provision, --hook, or --status/--sync-down")
			}
			if (opts.Provision || opts.Hook != "") && len(opts.JobIDs) > 0 {
				return flagErrorf("--provision and --hook show cluster logs; do not give job IDs with them")
			}
			if len(opts.JobIDs) > 1 && !opts.SyncDown {
				ids := make([]string, len(opts.JobIDs))
				for i, id := range opts.JobIDs {
					ids[i] = strconv.Itoa(id)
				}
				return flagErrorf("Cannot stream logs of multiple jobs (IDs: %s).\nPass -s/--sync-down to download the logs instead.", strings.Join(ids, ", "))
			}
			if opts.Tail < -1 {
				return flagErrorf("invalid --tail %d: want a line count, 0 for the whole log", opts.Tail)
			}
			opts.Follow = follow.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("logs", "reading job logs")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.BoolVar(&opts.Provision, "provision", false, "Stream the cluster's provisioning log instead of a job's")
	fs.StringVar(&opts.Hook, "hook", "", "Stream the log of a lifecycle hook EVENT (stop, preemption, down); without one, whichever hook log exists")
	fs.Lookup("hook").NoOptDefVal = hookAuto
	fs.BoolVar(&autostop, "autostop", false, "[Deprecated] Same as --hook stop")
	fs.IntVarP(&opts.Worker, "worker", "w", 0, "Stream from this worker ID instead of the head node")
	fs.BoolVarP(&opts.SyncDown, "sync-down", "s", false, "Download the job's logs (one file per node) instead of streaming")
	fs.BoolVar(&opts.Status, "status", false, "Print the job's status and exit with its code (0 succeeded, 100 failed, 101 running, 102 not found, 103 cancelled)")
	addBoolPair(fs, &follow, "follow", "", true, "Keep streaming until the job ends (default)", "Print the log so far and exit")
	fs.IntVar(&opts.Tail, "tail", -1, "Lines to show from the end of the log (default: the last 1000); 0 for the whole log")
	return cmd
}

// CancelOptions is everything `sky cancel` needs.
type CancelOptions struct {
	IO       *IOStreams
	Config   []string
	Cluster  string
	JobIDs   []int
	All      bool
	AllUsers bool
	Yes      bool
	Async    bool
}

func newCancelCmd(f *Factory, runF func(*CancelOptions) error) *cobra.Command {
	opts := &CancelOptions{IO: f.IO}
	var async boolPair
	cmd := &cobra.Command{
		Use:   "cancel [flags] CLUSTER [JOBS]...",
		Short: "Cancel jobs on a cluster",
		Long:  `Cancel the given jobs on a cluster; with no job IDs, cancel your latest job.`,
		Args:  rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if err := checkClusterNames(args[0]); err != nil {
				return err
			}
			opts.Cluster = args[0]
			var err error
			if opts.JobIDs, err = parseInts("job ID", args[1:]); err != nil {
				return err
			}
			if len(opts.JobIDs) > 0 && (opts.All || opts.AllUsers) {
				return flagErrorf("give job IDs or -a/--all or -u/--all-users, not both")
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("cancel", "cancelling jobs")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "Cancel all your jobs on the cluster")
	cmd.Flags().BoolVarP(&opts.AllUsers, "all-users", "u", false, "Cancel all jobs on the cluster, of every user")
	addYesFlag(cmd, &opts.Yes)
	addAsyncFlag(cmd, &async)
	return cmd
}
