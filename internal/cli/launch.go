package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skygo/skygo/internal/api"
)

// checkClusterNames rejects names that could never be a cluster, before any
// request is made.
func checkClusterNames(names ...string) error {
	for _, n := range names {
		if err := api.CheckClusterName(n); err != nil {
			return flagErrorf("%v", err)
		}
	}
	return nil
}

// autostopFlags are the idle-stop flags shared by launch and start.
type autostopFlags struct {
	IdleMinutes int
	WaitFor     string
	Down        bool
}

func addAutostopFlags(cmd *cobra.Command, a *autostopFlags, downHelp string) {
	cmd.Flags().IntVarP(&a.IdleMinutes, "idle-minutes-to-autostop", "i", 0,
		"Stop the cluster after this many idle minutes (no running or pending jobs; see --wait-for); a negative value disables autostop")
	cmd.Flags().StringVar(&a.WaitFor, "wait-for", "",
		"What resets the idle timer: jobs_and_ssh (default; jobs and SSH sessions), jobs, or none (stop after the idle time regardless)")
	cmd.Flags().BoolVar(&a.Down, "down", false, downHelp)
}

// autostopRequest is the validated autostop part of a command line.
type autostopRequest struct {
	IdleMinutes *int // nil: leave the cluster's setting alone
	WaitFor     string
	Down        bool
}

func (a *autostopFlags) resolve(cmd *cobra.Command, idleFlag string) (autostopRequest, error) {
	r := autostopRequest{Down: a.Down}
	if cmd.Flags().Changed(idleFlag) {
		v := a.IdleMinutes
		r.IdleMinutes = &v
	}
	if cmd.Flags().Changed("wait-for") {
		w, err := choice("--wait-for", a.WaitFor, "jobs_and_ssh", "jobs", "none")
		if err != nil {
			return r, err
		}
		r.WaitFor = w
	}
	return r, nil
}

// LaunchOptions is everything `sky launch` needs.
type LaunchOptions struct {
	IO        *IOStreams
	Config    []string
	Cluster   string
	DryRun    bool
	Detach    bool
	Task      *taskInput
	Autostop  autostopRequest
	Retry     bool
	Yes       bool
	NoSetup   bool
	CloneFrom string
	Fast      bool
	Resize    bool
	Async     bool
	Workspace string
}

func newLaunchCmd(f *Factory, runF func(*LaunchOptions) error) *cobra.Command {
	opts := &LaunchOptions{IO: f.IO}
	var (
		tf     taskFlags
		detach boolPair
		async  boolPair
		auto   autostopFlags
		docker bool
	)
	cmd := &cobra.Command{
		Use:   "launch [flags] [ENTRYPOINT]...",
		Short: "Launch a cluster and run a task on it",
		Long: `Launch a cluster (or reuse the one named with -c) and run a task on it.

ENTRYPOINT is a task YAML file or a shell command. Flags override the YAML.
Put a command that has its own flags after --:

  sky launch -c dev task.yaml
  sky launch -c dev --gpus A100:8 -- python train.py --epochs 3
  sky launch 'echo hello'`,
		Example: "  sky launch -c mycluster --infra aws --cpus 4+ task.yaml",
		RunE: func(cmd *cobra.Command, args []string) error {
			if docker {
				return flagErrorf("--docker is no longer supported: to run on this machine, use --infra local (the local infrastructure; see 'sky local up')")
			}
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if opts.Cluster != "" {
				if err := checkClusterNames(opts.Cluster); err != nil {
					return err
				}
			}
			entry, err := parseEntrypoint(args)
			if err != nil {
				return err
			}
			if opts.Task, err = tf.resolve(entry, f.LookupEnv); err != nil {
				return err
			}
			if opts.Autostop, err = auto.resolve(cmd, "idle-minutes-to-autostop"); err != nil {
				return err
			}
			if opts.Resize && (opts.Cluster == "" || opts.Task.NumNodes == 0) {
				return flagErrorf("--resize needs -c/--cluster (an existing cluster) and --num-nodes (the new size)")
			}
			if opts.CloneFrom != "" && opts.Cluster == "" {
				return flagErrorf("--clone-disk-from needs -c/--cluster: the name of the new cluster to create from the clone")
			}
			opts.Detach, opts.Async = detach.Value, async.Value
			if opts.Workspace != "" {
				opts.Config = append(opts.Config, "active_workspace="+opts.Workspace)
			}
			if runF != nil {
				return runF(opts)
			}
			return launchRun(opts)
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.StringVarP(&opts.Cluster, "cluster", "c", "", "Cluster name: reuse the cluster if it exists, else create it (default: a generated name)")
	fs.BoolVar(&opts.DryRun, "dryrun", false, "Show the plan without launching anything")
	addBoolPair(fs, &detach, "detach-run", "d", false,
		"Return once the job is submitted instead of streaming its logs (-no-d to stream)", "Stream the job's logs (same as -no-d)")
	fs.MarkHidden("no-detach-run")
	fs.BoolVar(&docker, "docker", false, "(Deprecated) Local docker support was removed; use --infra local (see 'sky local up')")
	addTaskFlags(cmd, &tf, taskFlagSet{name: true, git: true, priority: true})
	addAsyncFlag(cmd, &async)
	addAutostopFlags(cmd, &auto, "Tear the cluster down (instead of stopping it) once all jobs finish, or after the idle time if -i is set")
	fs.BoolVarP(&opts.Retry, "retry-until-up", "r", false, "Keep retrying provisioning until the cluster is up when no region or cloud has capacity")
	addYesFlag(cmd, &opts.Yes)
	fs.BoolVar(&opts.NoSetup, "no-setup", false, "Skip the setup phase when (re)launching the cluster")
	fs.StringVar(&opts.CloneFrom, "clone-disk-from", "", "[Experimental] Create the new cluster from a copy of this existing cluster's disk (alias: --clone)")
	fs.SetNormalizeFunc(aliasNormalizer(map[string]string{"clone": "clone-disk-from"}))
	fs.BoolVar(&opts.Fast, "fast", false, "[Experimental] If the cluster is already up, skip provisioning and setup")
	fs.BoolVar(&opts.Resize, "resize", false, "Resize the existing cluster (-c) to --num-nodes; shrinking needs no running jobs")
	fs.StringVarP(&opts.Workspace, "workspace", "w", "", "Workspace to launch into (same as --config active_workspace=NAME)")
	return cmd
}

// aliasNormalizer makes pflag accept old flag spellings (Click's secondary
// names) as the canonical ones.
func aliasNormalizer(aliases map[string]string) func(*pflag.FlagSet, string) pflag.NormalizedName {
	return func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if to, ok := aliases[name]; ok {
			name = to
		}
		return pflag.NormalizedName(name)
	}
}

// launchRun loads the task (so a bad YAML is reported now) and would then
// hand it to the API server.
func launchRun(opts *LaunchOptions) error {
	if _, err := prepareTask(nil, opts.Task); err != nil {
		return err
	}
	return notAvailable("launch", "launching clusters")
}

// ExecOptions is everything `sky exec` needs.
type ExecOptions struct {
	IO      *IOStreams
	Config  []string
	Cluster string
	Detach  bool
	Async   bool
	Task    *taskInput
}

func newExecCmd(f *Factory, runF func(*ExecOptions) error) *cobra.Command {
	opts := &ExecOptions{IO: f.IO}
	var (
		tf      taskFlags
		async   boolPair
		cluster string
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] CLUSTER ENTRYPOINT...",
		Short: "Run a task or command on an existing cluster",
		Long: `Run a task YAML or a shell command on an existing cluster, skipping
provisioning and setup (the workdir is synced again).

  sky exec dev task.yaml
  sky exec dev -- python train.py --lr 1e-4`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			// -c names the cluster; then every positional word is the
			// entrypoint. Otherwise the first word is the cluster.
			if cluster != "" {
				opts.Cluster = cluster
			} else if len(args) > 0 {
				opts.Cluster, args = args[0], args[1:]
			}
			if opts.Cluster == "" {
				return flagErrorf("missing CLUSTER: give the cluster name first or with -c")
			}
			if err := checkClusterNames(opts.Cluster); err != nil {
				return err
			}
			if len(args) == 0 {
				return flagErrorf("missing ENTRYPOINT: give a task YAML or a command to run on %s", opts.Cluster)
			}
			entry, err := parseEntrypoint(args)
			if err != nil {
				return err
			}
			if opts.Task, err = tf.resolve(entry, f.LookupEnv); err != nil {
				return err
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return execRun(opts)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().StringVarP(&cluster, "cluster", "c", "", "Cluster to run on (same as the CLUSTER argument)")
	cmd.Flags().BoolVarP(&opts.Detach, "detach-run", "d", false, "Return once the job is submitted instead of streaming its logs")
	addTaskFlags(cmd, &tf, taskFlagSet{name: true, git: true})
	addAsyncFlag(cmd, &async)
	return cmd
}

func execRun(opts *ExecOptions) error {
	if _, err := prepareTask(nil, opts.Task); err != nil {
		return err
	}
	return notAvailable("exec", "running jobs on clusters")
}
