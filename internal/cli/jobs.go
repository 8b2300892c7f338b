package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newJobsCmd(f *Factory) *cobra.Command {
	pool := newGroupCmd("pool", "(Experimental) Manage pools of workers for managed jobs",
		newPoolApplyCmd(f, nil), newPoolStatusCmd(f, nil), newPoolDownCmd(f, nil), newPoolLogsCmd(f, nil))
	return newGroupCmd("jobs", "Managed jobs: jobs that recover from preemptions and failures",
		newJobsLaunchCmd(f, func(o *JobsLaunchOptions) error { return jobsLaunchRun(f, o) }),
		newJobsQueueCmd(f, func(o *JobsQueueOptions) error { return jobsQueueRun(f, o) }),
		newJobsCancelCmd(f, func(o *JobsCancelOptions) error { return jobsCancelRun(f, o) }),
		newJobsLogsCmd(f, func(o *JobsLogsOptions) error { return jobsLogsRun(f, o) }),
		dashboardCmd(f, nil, true), pool)
}

// JobsLaunchOptions is everything `sky jobs launch` needs.
type JobsLaunchOptions struct {
	IO          *IOStreams
	Config      []string
	Task        *taskInput
	JobRecovery string
	Detach      bool
	Pool        string
	NumJobs     int // 0: not given
	JobGroup    string
	NoJobGroup  bool
	DependsOn   []int
	Output      string // "" (human), "id" or "json"
	Yes         bool
	Async       bool
}

func newJobsLaunchCmd(f *Factory, runF func(*JobsLaunchOptions) error) *cobra.Command {
	opts := &JobsLaunchOptions{IO: f.IO}
	var (
		tf        taskFlags
		async     boolPair
		alias     string
		dependsOn string
		workspace string
	)
	cmd := &cobra.Command{
		Use:   "launch [flags] ENTRYPOINT...",
		Short: "Launch a managed job from a YAML or a command",
		Long: `Launch a managed job: SkyPilot provisions a cluster for it, restarts it
on preemption or failure according to job_recovery, and tears the cluster
down when the job ends.

  sky jobs launch -n train train.yaml
  sky jobs launch --gpus A100 -- python train.py`,
		Args: rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if alias != "" {
				if tf.Name != "" && tf.Name != alias {
					return flagErrorf("-c/--cluster is another name for -n/--name; they disagree (%q vs %q)", alias, tf.Name)
				}
				tf.Name = alias
			}
			entry, err := parseEntrypoint(args)
			if err != nil {
				return err
			}
			if opts.Task, err = tf.resolve(entry, f.LookupEnv); err != nil {
				return err
			}
			// Without a pool each member of the array gets its own
			// cluster (SkyPilot asks for a pool; its batch migration guide
			// does not).
			if cmd.Flags().Changed("num-jobs") && opts.NumJobs < 1 {
				return flagErrorf("invalid --num-jobs %d: want 1 or more", opts.NumJobs)
			}
			if cmd.Flags().Changed("job-recovery") {
				v := strings.TrimSpace(opts.JobRecovery)
				// The YAML may name a strategy the server knows; the flag
				// offers the built-in ones, so a typo fails here.
				st := strings.ToUpper(v)
				if st != "EAGER_NEXT_REGION" && st != "FAILOVER" && st != "NONE" {
					return flagErrorf("invalid --job-recovery %q: choose EAGER_NEXT_REGION, FAILOVER or none", v)
				}
				opts.Task.Res.JobRecovery = fieldOverride{Set: true, Value: st}
				if st == "NONE" {
					opts.Task.Res.JobRecovery = fieldOverride{Set: true, Reset: true}
				}
			}
			if opts.JobGroup != "" && opts.NoJobGroup {
				return flagErrorf("--job-group and --no-job-group cannot be used together")
			}
			if dependsOn != "" {
				ids, err := parseInts("--depends-on job ID", splitComma(dependsOn))
				if err != nil {
					return err
				}
				opts.DependsOn = ids
			}
			if cmd.Flags().Changed("output") {
				if opts.Output, err = choice("-o/--output", opts.Output, "id", "json"); err != nil {
					return err
				}
				opts.Detach = true // scripts want the IDs, not the log
			}
			if workspace != "" {
				opts.Config = append(opts.Config, "active_workspace="+workspace)
			}
			opts.Async = async.Value
			if opts.Async && opts.Output != "" {
				return flagErrorf("-o/--output prints the submitted job IDs, which --async does not wait for; drop one of them")
			}
			if runF != nil {
				return runF(opts)
			}
			if _, err := prepareTask(f, opts.Task); err != nil {
				return err
			}
			return notAvailable("jobs launch", "the managed jobs controller")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	addTaskFlags(cmd, &tf, taskFlagSet{name: true, git: true, priority: true})
	addAsyncFlag(cmd, &async)
	fs.StringVarP(&alias, "cluster", "c", "", "Same as --name: the managed job's name")
	fs.StringVar(&opts.JobRecovery, "job-recovery", "", "Recovery strategy, e.g. EAGER_NEXT_REGION or FAILOVER (\"none\" clears it)")
	fs.BoolVarP(&opts.Detach, "detach-run", "d", false, "Return once the job is submitted instead of streaming its logs")
	fs.StringVarP(&opts.Pool, "pool", "p", "", "(Experimental) Submit to the workers of this pool")
	fs.IntVar(&opts.NumJobs, "num-jobs", 0, "Number of jobs to submit as an array (each sees $SKYPILOT_JOB_RANK); on a pool with -p, else each on its own cluster")
	fs.StringVar(&opts.JobGroup, "job-group", "", "Attach to the job group of this job ID or running job name (default: the surrounding job group)")
	fs.BoolVar(&opts.NoJobGroup, "no-job-group", false, "Launch a top-level job even from inside a job group")
	fs.StringVar(&dependsOn, "depends-on", "", "Comma-separated job IDs that must all succeed before this job starts")
	fs.StringVarP(&workspace, "workspace", "w", "", "Workspace to submit into (same as --config active_workspace=NAME)")
	fs.StringVarP(&opts.Output, "output", "o", "", "Print only the job IDs for scripts: id (one per line) or json ({\"job_ids\": [...]}); implies -d")
	addYesFlag(cmd, &opts.Yes)
	return cmd
}

// splitComma splits a comma list, dropping blanks around items.
func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// JobsQueueOptions is everything `sky jobs queue` needs.
type JobsQueueOptions struct {
	IO           *IOStreams
	Config       []string
	Verbose      bool
	Limit        int // 0 with All: no limit
	Refresh      bool
	SkipFinished bool
	Statuses     []string
	Since        time.Duration
	After        time.Time
	Before       time.Time
	Infra        string
	AllUsers     bool
	All          bool
	Output       string
}

// statusBare is -s given without a value, the old spelling of
// --skip-finished.
const statusBare = "\x00bare"

// managedJobStatuses are the statuses --status accepts.
var managedJobStatuses = []string{"PENDING", "SUBMITTED", "STARTING", "RUNNING", "RECOVERING", "CANCELLING",
	"SUCCEEDED", "CANCELLED", "FAILED", "FAILED_SETUP", "FAILED_PRECHECKS", "FAILED_NO_RESOURCE", "FAILED_CONTROLLER"}

func newJobsQueueCmd(f *Factory, runF func(*JobsQueueOptions) error) *cobra.Command {
	opts := &JobsQueueOptions{IO: f.IO}
	var status, since, after, before string
	cmd := &cobra.Command{
		Use:   "queue [flags]",
		Short: "Show managed jobs",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			// pflag reads "-s FAILED" as a bare -s plus an argument; the
			// command takes no arguments, so the word is the -s value.
			if status == statusBare && len(args) == 1 && !strings.HasPrefix(args[0], "-") {
				status, args = args[0], nil
			}
			if err := noArgs(cmd, args); err != nil {
				return err
			}
			if status == statusBare {
				opts.SkipFinished = true
			} else if status != "" {
				for _, s := range splitComma(status) {
					up := strings.ToUpper(s)
					if !contains(managedJobStatuses, up) {
						return flagErrorf("invalid --status %q: choose from %s", s, strings.Join(managedJobStatuses, ", "))
					}
					opts.Statuses = append(opts.Statuses, up)
				}
			}
			if since != "" && after != "" {
				return flagErrorf("--since and --after both set the start of the window; give only one")
			}
			var err error
			if since != "" {
				if opts.Since, err = parseSince(since); err != nil {
					return err
				}
			}
			if after != "" {
				if opts.After, err = parseLocalTime("--after", after); err != nil {
					return err
				}
			}
			if before != "" {
				if opts.Before, err = parseLocalTime("--before", before); err != nil {
					return err
				}
			}
			if opts.Limit < 0 {
				return flagErrorf("invalid --limit %d: want 0 or more", opts.Limit)
			}
			if opts.Output, err = parseOutput(opts.Output); err != nil {
				return err
			}
			if opts.Refresh {
				return flagErrorf("%s", refreshRefusal("the queue is"))
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("jobs queue", "the managed jobs controller")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.BoolVarP(&opts.Verbose, "verbose", "v", false, "Show all details, untruncated")
	fs.IntVarP(&opts.Limit, "limit", "l", 50, "Number of jobs to show (-a/--all for every job)")
	fs.BoolVarP(&opts.Refresh, "refresh", "r", false, "Refused: SkyPilot restarts a stopped jobs controller; this build's runs in the API server and the queue is always current")
	fs.BoolVar(&opts.SkipFinished, "skip-finished", false, "Show only pending and running jobs")
	fs.StringVarP(&status, "status", "s", "", "Only jobs with these statuses, comma-separated (e.g. FAILED,FAILED_SETUP); a bare -s means --skip-finished (deprecated)")
	fs.Lookup("status").NoOptDefVal = statusBare
	fs.StringVar(&since, "since", "", "Only jobs submitted within this window before now: 30m, 48h, 7d, 2w, or seconds")
	fs.StringVar(&after, "after", "", "Only jobs submitted at or after this local time (2026-01-13 or \"2026-01-13 15:30:00\")")
	fs.StringVar(&before, "before", "", "Only jobs submitted at or before this local time")
	fs.StringVar(&opts.Infra, "infra", "", "Only jobs on this infrastructure (cloud, cloud/region, k8s/CONTEXT, ssh/POOL, ...)")
	fs.BoolVarP(&opts.AllUsers, "all-users", "u", false, "Show every user's jobs")
	fs.BoolVarP(&opts.All, "all", "a", false, "Show all jobs (no --limit)")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// parseSince reads a relative window: a number with unit s, m, h, d or w, or
// bare seconds.
func parseSince(v string) (time.Duration, error) {
	s := strings.TrimSpace(strings.ToLower(v))
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	unit := time.Second
	if s != "" {
		if u, ok := units[s[len(s)-1]]; ok {
			unit, s = u, s[:len(s)-1]
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0, flagErrorf("invalid --since %q: want a duration like 30m, 48h, 7d, 2w, or seconds", v)
	}
	return time.Duration(n * float64(unit)), nil
}

// parseLocalTime reads "2026-01-13" or "2026-01-13 15:30:00" in local time.
func parseLocalTime(flag, v string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, strings.TrimSpace(v), time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, flagErrorf("invalid %s %q: want a local date or time like 2026-01-13 or \"2026-01-13 15:30:00\"", flag, v)
}

// JobsCancelOptions is everything `sky jobs cancel` needs.
type JobsCancelOptions struct {
	IO       *IOStreams
	Config   []string
	Name     string
	Pool     string
	JobIDs   []int
	Task     string
	Graceful gracefulFlags
	All      bool
	AllUsers bool
	Yes      bool
}

func newJobsCancelCmd(f *Factory, runF func(*JobsCancelOptions) error) *cobra.Command {
	opts := &JobsCancelOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "cancel [flags] [JOB_IDS]...",
		Short: "Cancel managed jobs",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			var err error
			if opts.JobIDs, err = parseInts("job ID", args); err != nil {
				return err
			}
			ways := 0
			for _, on := range []bool{len(args) > 0, opts.Name != "", opts.Pool != "", opts.All || opts.AllUsers} {
				if on {
					ways++
				}
			}
			if ways == 0 {
				return flagErrorf("say which jobs to cancel: JOB_IDS, -n/--name, -p/--pool, -a/--all or -u/--all-users")
			}
			if ways > 1 {
				return flagErrorf("give only one of JOB_IDS, -n/--name, -p/--pool, -a/--all or -u/--all-users")
			}
			if opts.Task != "" && len(opts.JobIDs) != 1 && opts.Name == "" {
				return flagErrorf("--task cancels a task of one job: give exactly one JOB_ID or -n/--name")
			}
			if err := opts.Graceful.validate(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("jobs cancel", "the managed jobs controller")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.StringVarP(&opts.Name, "name", "n", "", "Cancel the managed job with this name")
	fs.StringVarP(&opts.Pool, "pool", "p", "", "Cancel the jobs of this pool")
	fs.StringVar(&opts.Task, "task", "", "Cancel one dynamic task of the job, by index (as in 'sky jobs queue') or name")
	addGracefulFlags(cmd, &opts.Graceful)
	fs.BoolVarP(&opts.All, "all", "a", false, "Cancel all your managed jobs")
	addYesFlag(cmd, &opts.Yes)
	fs.BoolVarP(&opts.AllUsers, "all-users", "u", false, "Cancel the managed jobs of every user")
	return cmd
}

// JobsLogsOptions is everything `sky jobs logs` needs.
type JobsLogsOptions struct {
	IO         *IOStreams
	Config     []string
	Name       string
	JobID      int // 0: latest (or by --name)
	Task       string
	Follow     bool
	Controller bool
	Refresh    bool
	SyncDown   bool
	Tail       int    // -1: not given
	Output     string // "" or "json" (with Controller)
}

func newJobsLogsCmd(f *Factory, runF func(*JobsLogsOptions) error) *cobra.Command {
	opts := &JobsLogsOptions{IO: f.IO}
	var follow boolPair
	cmd := &cobra.Command{
		Use:   "logs [flags] [JOB_ID] [TASK]",
		Short: "Tail or download the log of a managed job",
		Args:  rangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if len(args) > 0 {
				ids, err := parseInts("JOB_ID", args[:1])
				if err != nil {
					return err
				}
				opts.JobID = ids[0]
				if opts.Name != "" {
					return flagErrorf("give a JOB_ID or -n/--name, not both")
				}
			}
			if len(args) == 2 {
				opts.Task = args[1]
			}
			if opts.Tail < -1 {
				return flagErrorf("invalid --tail %d: want a line count, 0 for the whole log", opts.Tail)
			}
			if opts.SyncDown && cmd.Flags().Changed("tail") {
				return flagErrorf("--tail cannot be used with -s/--sync-down, which downloads whole logs")
			}
			if opts.Refresh {
				return flagErrorf("%s", refreshRefusal("the logs are"))
			}
			if cmd.Flags().Changed("output") {
				var err error
				if opts.Output, err = choice("-o/--output", opts.Output, "json"); err != nil {
					return err
				}
				if !opts.Controller || opts.SyncDown {
					return flagErrorf("-o/--output json prints the event timeline of --controller: add --controller (and drop --sync-down)")
				}
			}
			opts.Follow = follow.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("jobs logs", "the managed jobs controller")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.StringVarP(&opts.Name, "name", "n", "", "Managed job name")
	addBoolPair(fs, &follow, "follow", "", true, "Keep streaming until the job ends (default)", "Print the log so far and exit")
	fs.BoolVar(&opts.Controller, "controller", false, "Show the controller's log of the job (launches, recoveries)")
	fs.BoolVarP(&opts.Refresh, "refresh", "r", false, "Refused: SkyPilot restarts a stopped jobs controller; this build's runs in the API server and the logs are always current")
	fs.BoolVarP(&opts.SyncDown, "sync-down", "s", false, "Download the logs of the jobs in the queue")
	fs.IntVar(&opts.Tail, "tail", -1, "Lines to show from the end of the log (default: the last 1000 when following, else the whole log); 0 for the whole log")
	fs.StringVarP(&opts.Output, "output", "o", "", "With --controller: json prints the job's event timeline (submitted, launched, preempted, recovered, ...) as JSON for scripts")
	return cmd
}

// refreshRefusal is why -r/--refresh is refused: SkyPilot's flag restarts
// a stopped jobs controller, and this build has none to restart.
func refreshRefusal(whatIs string) string {
	return "-r/--refresh restarts a stopped jobs controller, and this build's controller runs inside the API server, which is never stopped while it answers; " + whatIs + " always current, so drop -r"
}

// yamlEntrypoint is the entrypoint of commands that take only a YAML file
// (serve up, pool apply): an inline command is not accepted.
func yamlEntrypoint(arg string) (entrypoint, error) {
	e, err := parseEntrypoint([]string{arg})
	if err != nil {
		return e, err
	}
	if e.YAMLPath == "" {
		return e, flagErrorf("%s is not a YAML file: this command needs a task YAML", arg)
	}
	return e, nil
}

// serviceLogsOptions is shared by `sky serve logs` and `sky jobs pool logs`,
// which read the same kinds of logs of a controller-managed service.
type serviceLogsOptions struct {
	IO           *IOStreams
	Config       []string
	Name         string
	IDs          []int // replica or worker IDs
	Follow       bool
	Controller   bool
	LoadBalancer bool
	SyncDown     bool
	Tail         int // -1: everything
}

// serviceLogsCmd builds `sky serve logs` (withLB) or `sky jobs pool logs`.
func serviceLogsCmd(f *Factory, runF func(*serviceLogsOptions) error, path, nameArg, idsArg string, withLB bool) *cobra.Command {
	opts := &serviceLogsOptions{IO: f.IO}
	var (
		follow boolPair
		tail   int
	)
	what := "pools"
	if withLB {
		what = "services"
	}
	cmd := &cobra.Command{
		Use:   "logs [flags] " + nameArg + " [" + idsArg + "]...",
		Short: "Tail or download the logs of a " + strings.TrimSuffix(what, "s"),
		Args:  rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Name = args[0]
			var err error
			if opts.IDs, err = parseInts(strings.ToLower(strings.TrimSuffix(idsArg, "S")), args[1:]); err != nil {
				return err
			}
			targets := len(opts.IDs)
			if opts.Controller {
				targets++
			}
			if opts.LoadBalancer {
				targets++
			}
			if !opts.SyncDown && targets != 1 {
				if withLB {
					return flagErrorf("choose exactly one of --controller, --load-balancer or a replica ID to stream (or use --sync-down)")
				}
				return flagErrorf("choose exactly one of --controller or a worker ID to stream (or use --sync-down)")
			}
			opts.Tail = -1
			if cmd.Flags().Changed("tail") {
				if tail < 0 {
					return flagErrorf("invalid --tail %d: want a line count >= 0", tail)
				}
				opts.Tail = tail
			}
			opts.Follow = follow.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable(path, what)
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	addBoolPair(fs, &follow, "follow", "", true, "Keep streaming (default)", "Print the log so far and exit")
	fs.BoolVar(&opts.Controller, "controller", false, "Show the controller's log")
	if withLB {
		fs.BoolVar(&opts.LoadBalancer, "load-balancer", false, "Show the load balancer's log")
	}
	fs.BoolVarP(&opts.SyncDown, "sync-down", "s", false, "Download the logs instead (narrow with --controller or IDs)")
	fs.IntVar(&tail, "tail", 0, "Lines to show from the end of the log (default: all)")
	return cmd
}
