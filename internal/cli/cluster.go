package cli

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/api"
)

// StatusOptions is everything `sky status` needs.
type StatusOptions struct {
	IO          *IOStreams
	Config      []string
	Clusters    []string
	Verbose     bool
	Refresh     bool
	IP          bool
	Endpoints   bool
	Endpoint    int // 0: not asked
	ManagedJobs bool
	Services    bool
	Pools       bool
	AllUsers    bool
	Output      string
	// background is set for a section of the status made beside the
	// clusters' request (see inBackground).
	background bool
}

func newStatusCmd(f *Factory, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: f.IO}
	var jobs, services, pools boolPair
	cmd := &cobra.Command{
		Use:   "status [flags] [CLUSTERS]...",
		Short: "Show clusters",
		Long: `Show your clusters (or only the named ones), with their infra, resources,
status and autostop setting. Statuses are cached; -r asks the clouds.`,
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
			if cmd.Flags().Changed("endpoint") && (opts.Endpoint < 1 || opts.Endpoint > 65535) {
				return flagErrorf("invalid --endpoint %d: want a port number from 1 to 65535", opts.Endpoint)
			}
			single := 0
			for _, on := range []bool{opts.IP, opts.Endpoints, cmd.Flags().Changed("endpoint")} {
				if on {
					single++
				}
			}
			if single > 1 {
				return flagErrorf("--ip, --endpoints and --endpoint ask for different things; give only one")
			}
			if single == 1 && len(args) != 1 {
				return flagErrorf("--ip, --endpoints and --endpoint need exactly one cluster name, got %d", len(args))
			}
			opts.ManagedJobs, opts.Services, opts.Pools = jobs.Value, services.Value, pools.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("status", "listing clusters")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.BoolVarP(&opts.Verbose, "verbose", "v", false, "Show all details, untruncated")
	fs.BoolVarP(&opts.Refresh, "refresh", "r", false, "Ask the infrastructure for the latest statuses")
	fs.BoolVar(&opts.IP, "ip", false, "Print only the head node's IP of the one named cluster")
	fs.BoolVar(&opts.Endpoints, "endpoints", false, "Print all exposed ports of the one named cluster and their URLs")
	fs.IntVar(&opts.Endpoint, "endpoint", 0, "Print the URL of this port on the one named cluster")
	addBoolPair(fs, &jobs, "show-managed-jobs", "", true, "Also show in-progress managed jobs", "Do not show managed jobs")
	addBoolPair(fs, &services, "show-services", "", true, "Also show services", "Do not show services")
	addBoolPair(fs, &pools, "show-pools", "", true, "Also show pools", "Do not show pools")
	fs.BoolVarP(&opts.AllUsers, "all-users", "u", false, "Show every user's clusters, not only yours")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}

// ClusterSelectOptions is what stop, down and autostop share: which
// clusters, and how to ask.
type ClusterSelectOptions struct {
	Clusters []string
	All      bool
	AllUsers bool
	Yes      bool
	Async    bool
}

// resolve checks that exactly one way of choosing clusters was used; cmd
// is the command's name (down, stop, autostop).
func (s *ClusterSelectOptions) resolve(cmd string, args []string) error {
	if err := checkClusterNames(args...); err != nil {
		return err
	}
	s.Clusters = args
	if len(args) > 0 && (s.All || s.AllUsers) {
		return flagErrorf("name clusters or use -a/--all or -u/--all-users, not both")
	}
	if len(args) == 0 && !s.All && !s.AllUsers {
		return flagErrorf("`sky %s` requires either a cluster name or glob (see `sky status`), or the -a/--all flag for all your clusters, or the -u/--all-users flag for all clusters in your team.", cmd)
	}
	return nil
}

// gracefulFlags are --graceful and --graceful-timeout.
type gracefulFlags struct {
	Graceful bool
	Timeout  int // seconds; 0 with TimeoutSet false = no limit
	set      bool
}

func addGracefulFlags(cmd *cobra.Command, g *gracefulFlags) {
	cmd.Flags().BoolVar(&g.Graceful, "graceful", false, "Cancel the running jobs and wait for them to end before stopping (SkyPilot also waits for MOUNT_CACHED uploads; this build has no such mounts)")
	cmd.Flags().IntVar(&g.Timeout, "graceful-timeout", 0, "Seconds to wait with --graceful (default: until the jobs have ended)")
}

// apply puts the flags into a stop or down request.
func (g *gracefulFlags) apply(b api.ClustersBody) api.ClustersBody {
	b.Graceful = g.Graceful
	if g.set {
		t := g.Timeout
		b.GracefulTimeout = &t
	}
	return b
}

func (g *gracefulFlags) validate(cmd *cobra.Command) error {
	g.set = cmd.Flags().Changed("graceful-timeout")
	if g.set && !g.Graceful {
		return flagErrorf("--graceful-timeout only applies with --graceful")
	}
	if g.set && g.Timeout < 0 {
		return flagErrorf("invalid --graceful-timeout %d: want seconds >= 0", g.Timeout)
	}
	return nil
}

// StopOptions is everything `sky stop` needs.
type StopOptions struct {
	IO       *IOStreams
	Config   []string
	Select   ClusterSelectOptions
	Graceful gracefulFlags
}

func newStopCmd(f *Factory, runF func(*StopOptions) error) *cobra.Command {
	opts := &StopOptions{IO: f.IO}
	var async boolPair
	cmd := &cobra.Command{
		Use:   "stop [flags] [CLUSTERS]...",
		Short: "Stop clusters",
		Long: `Stop clusters, keeping their disks so 'sky start' can bring them back.
Stopped clusters cost only their disks.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if err := opts.Select.resolve("stop", args); err != nil {
				return err
			}
			if err := opts.Graceful.validate(cmd); err != nil {
				return err
			}
			opts.Select.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("stop", "stopping clusters")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Select.All, "all", "a", false, "Stop all your clusters")
	cmd.Flags().BoolVarP(&opts.Select.AllUsers, "all-users", "u", false, "Stop all clusters of all users")
	addYesFlag(cmd, &opts.Select.Yes)
	addGracefulFlags(cmd, &opts.Graceful)
	addAsyncFlag(cmd, &async)
	return cmd
}

// StartOptions is everything `sky start` needs.
type StartOptions struct {
	IO       *IOStreams
	Config   []string
	Clusters []string
	All      bool
	Yes      bool
	Autostop autostopRequest
	Retry    bool
	Force    bool
	Async    bool
}

func newStartCmd(f *Factory, runF func(*StartOptions) error) *cobra.Command {
	opts := &StartOptions{IO: f.IO}
	var (
		async boolPair
		auto  autostopFlags
	)
	cmd := &cobra.Command{
		Use:   "start [flags] [CLUSTERS]...",
		Short: "Restart stopped clusters",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if err := checkClusterNames(args...); err != nil {
				return err
			}
			opts.Clusters = args
			if len(args) > 0 && opts.All {
				return flagErrorf("name clusters or use -a/--all, not both")
			}
			if len(args) == 0 && !opts.All {
				return flagErrorf("`sky start` requires either a cluster name or glob (see `sky status`), or the -a/--all flag.")
			}
			var err error
			if opts.Autostop, err = auto.resolve(cmd, "idle-minutes-to-autostop"); err != nil {
				return err
			}
			if opts.Autostop.Down && opts.Autostop.IdleMinutes == nil {
				return flagErrorf("--down needs -i/--idle-minutes-to-autostop: the idle time after which to tear down")
			}
			if opts.Autostop.WaitFor != "" && opts.Autostop.IdleMinutes == nil {
				return flagErrorf("--wait-for needs -i/--idle-minutes-to-autostop: it says what resets that idle timer")
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("start", "starting clusters")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "Start all your stopped clusters")
	addYesFlag(cmd, &opts.Yes)
	addAutostopFlags(cmd, &auto, "Tear the cluster down (instead of stopping it) after the idle time; needs -i")
	cmd.Flags().BoolVarP(&opts.Retry, "retry-until-up", "r", false, "Keep retrying until the cluster is up when capacity is short")
	cmd.Flags().BoolVarP(&opts.Force, "force", "f", false, "Start even if the cluster is already UP (e.g. to refresh the runtime on it)")
	addAsyncFlag(cmd, &async)
	return cmd
}

// DownOptions is everything `sky down` needs.
type DownOptions struct {
	IO       *IOStreams
	Config   []string
	Select   ClusterSelectOptions
	Purge    bool
	Graceful gracefulFlags
}

func newDownCmd(f *Factory, runF func(*DownOptions) error) *cobra.Command {
	opts := &DownOptions{IO: f.IO}
	var async boolPair
	cmd := &cobra.Command{
		Use:   "down [flags] [CLUSTERS]...",
		Short: "Tear down clusters",
		Long: `Tear down clusters: their machines and disks are deleted and cannot be
restarted.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if err := opts.Select.resolve("down", args); err != nil {
				return err
			}
			if err := opts.Graceful.validate(cmd); err != nil {
				return err
			}
			opts.Select.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("down", "tearing down clusters")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Select.All, "all", "a", false, "Tear down all your clusters")
	cmd.Flags().BoolVarP(&opts.Select.AllUsers, "all-users", "u", false, "Tear down all clusters of all users")
	addYesFlag(cmd, &opts.Select.Yes)
	cmd.Flags().BoolVarP(&opts.Purge, "purge", "p", false, "(Advanced) Forget the clusters even if deleting them on the infrastructure fails; clean up by hand")
	addGracefulFlags(cmd, &opts.Graceful)
	addAsyncFlag(cmd, &async)
	return cmd
}

// AutostopOptions is everything `sky autostop` needs.
type AutostopOptions struct {
	IO       *IOStreams
	Config   []string
	Select   ClusterSelectOptions
	Autostop autostopRequest
	Cancel   bool
}

func newAutostopCmd(f *Factory, runF func(*AutostopOptions) error) *cobra.Command {
	opts := &AutostopOptions{IO: f.IO}
	var (
		async boolPair
		auto  autostopFlags
	)
	cmd := &cobra.Command{
		Use:   "autostop [flags] [CLUSTERS]...",
		Short: "Schedule automatic stop or teardown of idle clusters",
		Long: `Stop (or with --down, tear down) clusters after they have been idle for
-i minutes. Idle means no running or pending jobs, and by default no SSH
sessions (see --wait-for). --cancel removes the setting.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if err := opts.Select.resolve("autostop", args); err != nil {
				return err
			}
			var err error
			if opts.Autostop, err = auto.resolve(cmd, "idle-minutes"); err != nil {
				return err
			}
			if opts.Cancel && (opts.Autostop.IdleMinutes != nil || opts.Autostop.Down) {
				return flagErrorf("--cancel removes autostop; it cannot be combined with -i/--idle-minutes or --down")
			}
			opts.Select.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("autostop", "scheduling autostop")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Select.All, "all", "a", false, "Apply to all your clusters")
	cmd.Flags().BoolVarP(&opts.Select.AllUsers, "all-users", "u", false, "Apply to all clusters of all users")
	cmd.Flags().IntVarP(&auto.IdleMinutes, "idle-minutes", "i", 0, "Idle minutes before the cluster is stopped (default 5 when not given)")
	cmd.Flags().StringVar(&auto.WaitFor, "wait-for", "", "What resets the idle timer: jobs_and_ssh (default), jobs, or none")
	cmd.Flags().BoolVar(&opts.Cancel, "cancel", false, "Remove any autostop or autodown setting (no-op if none)")
	cmd.Flags().BoolVar(&auto.Down, "down", false, "Tear the cluster down instead of stopping it (it cannot be restarted)")
	addYesFlag(cmd, &opts.Select.Yes)
	addAsyncFlag(cmd, &async)
	return cmd
}

// CostReportOptions is everything `sky cost-report` needs.
type CostReportOptions struct {
	IO     *IOStreams
	Config []string
	All    bool
	Days   int
	Output string
}

func newCostReportCmd(f *Factory, runF func(*CostReportOptions) error) *cobra.Command {
	opts := &CostReportOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "cost-report [flags]",
		Short: "Show estimated costs of launched clusters",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if opts.Days < 0 {
				return flagErrorf("invalid --days %s: want 0 (all) or more", strconv.Itoa(opts.Days))
			}
			var err error
			if opts.Output, err = parseOutput(opts.Output); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("cost-report", "cost reporting")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "Show every cluster, not only the 5 most recent")
	cmd.Flags().IntVar(&opts.Days, "days", 30, "Show clusters from the last N days (0 for all)")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}
