package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// CheckOptions is everything `sky check` needs.
type CheckOptions struct {
	IO        *IOStreams
	Config    []string
	Infras    []string
	Verbose   bool
	Workspace string
	Output    string
}

func newCheckCmd(f *Factory, runF func(*CheckOptions) error) *cobra.Command {
	opts := &CheckOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "check [flags] [INFRA_LIST]...",
		Short: "Check which infrastructure can be used",
		Long: `Check credentials and access for each infrastructure (or only the named
ones, e.g. 'sky check aws k8s') and record which are enabled.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Infras = args
			var err error
			if opts.Output, err = parseOutput(opts.Output); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("check", "checking infrastructure access")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "Show the account in use for each infrastructure")
	cmd.Flags().StringVarP(&opts.Workspace, "workspace", "w", "", "Check only this workspace (default: all)")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}

// DashboardOptions is everything `sky dashboard` and `sky jobs dashboard`
// need.
type DashboardOptions struct {
	IO     *IOStreams
	Config []string
	Jobs   bool // open the managed-jobs page
}

func newDashboardCmd(f *Factory, runF func(*DashboardOptions) error) *cobra.Command {
	return dashboardCmd(f, runF, false)
}

func dashboardCmd(f *Factory, runF func(*DashboardOptions) error, jobs bool) *cobra.Command {
	opts := &DashboardOptions{IO: f.IO, Jobs: jobs}
	short, name := "Open the SkyPilot dashboard in a browser", "dashboard"
	if jobs {
		short, name = "Open the managed jobs dashboard in a browser", "jobs dashboard"
	}
	cmd := &cobra.Command{
		Use:   "dashboard [flags]",
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable(name, "the dashboard")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	return cmd
}

// GpusListOptions is everything `sky gpus list` needs.
type GpusListOptions struct {
	IO          *IOStreams
	Config      []string
	Accelerator string
	All         bool
	Infra       string
	Cloud       string
	Region      string
	AllRegions  bool
	Verbose     bool
	Output      string
}

func newGpusCmd(f *Factory) *cobra.Command {
	return newGroupCmd("gpus", "List GPUs and other accelerators, and label Kubernetes GPU nodes",
		newGpusListCmd(f, func(o *GpusListOptions) error { return gpusListRunRemote(f, o) }, "list"),
		newGpusLabelCmd(f, func(o *GpusLabelOptions) error { return gpusLabelRunRemote(f, o) }))
}

// newShowGpusCmd is the old spelling `sky show-gpus`, kept hidden so old
// scripts keep working.
func newShowGpusCmd(f *Factory) *cobra.Command {
	c := newGpusListCmd(f, func(o *GpusListOptions) error { return gpusListRunRemote(f, o) }, "show-gpus")
	c.Hidden = true
	// Not cobra's Deprecated: it prints the notice on stdout, which breaks
	// `sky show-gpus -o json | jq`.
	c.PreRun = func(*cobra.Command, []string) {
		fmt.Fprintln(f.IO.ErrOut, `Command "show-gpus" is deprecated, use 'sky gpus list'`)
	}
	return c
}

func newGpusListCmd(f *Factory, runF func(*GpusListOptions) error, use string) *cobra.Command {
	opts := &GpusListOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   use + " [flags] [ACCELERATOR_STR]",
		Short: "Show GPUs, TPUs and other accelerators with their prices",
		Long: `Without an argument, list common accelerators and the counts offered.
With ACCELERATOR_STR (NAME or NAME:COUNT, case-insensitive), list every
offering of it with prices.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if len(args) == 1 {
				opts.Accelerator = args[0]
			}
			var err error
			if opts.Output, err = parseOutput(opts.Output); err != nil {
				return err
			}
			if opts.Infra != "" && (opts.Cloud != "" || opts.Region != "") {
				return flagErrorf("--infra cannot be combined with --cloud or --region; put both in --infra (e.g. aws/us-east-1)")
			}
			if opts.AllRegions && opts.Accelerator == "" {
				return flagErrorf("--all-regions needs an ACCELERATOR_STR, e.g. 'sky gpus list A100 --all-regions'")
			}
			if opts.AllRegions && opts.Region != "" {
				return flagErrorf("--all-regions and --region cannot be used together")
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("gpus list", "the accelerator catalog")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.BoolVarP(&opts.All, "all", "a", false, "Show all accelerators, not only common ones, with prices")
	fs.StringVar(&opts.Infra, "infra", "", "Infrastructure to list, e.g. aws or aws/us-east-1")
	fs.StringVar(&opts.Cloud, "cloud", "", "Cloud to list")
	fs.StringVar(&opts.Region, "region", "", "Region to list (default: all regions)")
	fs.BoolVar(&opts.AllRegions, "all-regions", false, "Show the accelerator's offerings in every region of every cloud")
	fs.BoolVarP(&opts.Verbose, "verbose", "v", false, "Show all details, untruncated")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}

// GpusLabelOptions is everything `sky gpus label` needs.
type GpusLabelOptions struct {
	IO      *IOStreams
	Config  []string
	Context string
	Cleanup bool
	Async   bool
}

func newGpusLabelCmd(f *Factory, runF func(*GpusLabelOptions) error) *cobra.Command {
	opts := &GpusLabelOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "label [flags]",
		Short: "Label the GPU nodes of a Kubernetes cluster for SkyPilot",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("gpus label", "Kubernetes GPU labelling")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().StringVarP(&opts.Context, "context", "c", "", "Kubernetes context (default: the API server's current context)")
	cmd.Flags().BoolVar(&opts.Cleanup, "cleanup", false, "Only remove the GPU labeller's resources")
	cmd.Flags().BoolVar(&opts.Async, "async", false, "Do not wait for labelling to finish")
	return cmd
}

// SSHOptions is everything `sky ssh up` and `sky ssh down` need.
type SSHOptions struct {
	IO     *IOStreams
	Config []string
	Infra  string // node pool name; "" = all pools in the file
	File   string // ssh_node_pools.yaml to use (up only)
	Async  bool
}

func newSSHCmd(f *Factory) *cobra.Command {
	return newGroupCmd("ssh", "Set up and tear down SSH node pools",
		newSSHUpDownCmd(f, func(o *SSHOptions) error { return sshUpRunRemote(f, o) }, true),
		newSSHUpDownCmd(f, func(o *SSHOptions) error { return sshDownRunRemote(f, o) }, false))
}

func newSSHUpDownCmd(f *Factory, runF func(*SSHOptions) error, up bool) *cobra.Command {
	opts := &SSHOptions{IO: f.IO}
	var async boolPair
	use, short, what := "down", "Tear down SSH node pools", "tearing down SSH node pools"
	if up {
		use, short, what = "up", "Set up SSH node pools from ~/.sky/ssh_node_pools.yaml", "setting up SSH node pools"
	}
	cmd := &cobra.Command{
		Use:   use + " [flags]",
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if opts.File != "" {
				if _, err := os.Stat(opts.File); err != nil {
					return flagErrorf("--file %s: file not found", opts.File)
				}
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("ssh "+use, what)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().StringVar(&opts.Infra, "infra", "", "Only this node pool (default: every pool in the file)")
	if up {
		cmd.Flags().StringVarP(&opts.File, "file", "f", "", "Node pools file (default ~/.sky/ssh_node_pools.yaml)")
	}
	addAsyncFlag(cmd, &async)
	return cmd
}

// LocalUpOptions is everything `sky local up` needs.
type LocalUpOptions struct {
	IO          *IOStreams
	Config      []string
	GPUs        bool
	IPsFile     string
	SSHUser     string
	SSHKeyPath  string
	Cleanup     bool
	ContextName string
	Password    string
	Name        string
	PortStart   int
	Async       bool
}

func newLocalCmd(f *Factory) *cobra.Command {
	return newGroupCmd("local", "Enable or disable the local infrastructure (clusters on this machine)",
		newLocalUpCmd(f, func(o *LocalUpOptions) error { return localUpRunRemote(f, o) }),
		newLocalDownCmd(f, func(o *LocalDownOptions) error { return localDownRunRemote(f, o) }))
}

func newLocalUpCmd(f *Factory, runF func(*LocalUpOptions) error) *cobra.Command {
	opts := &LocalUpOptions{IO: f.IO}
	var gpus, async boolPair
	cmd := &cobra.Command{
		Use:   "up [flags]",
		Short: "Enable the local infrastructure: clusters that run on this machine (--infra local)",
		Long: `Enable SkyGo's embedded local infrastructure, where each cluster node runs
as a set of processes on this machine (no VM, container or Kubernetes is
created). Once enabled, the optimizer may choose it and ` + "`sky launch --infra local`" + `
runs there. It is enabled by default; ` + "`sky local down`" + ` disables it.

SkyPilot's ` + "`sky local up`" + ` creates a kind Kubernetes cluster instead; SkyGo does not
create one. To run on other machines, describe them as an SSH node pool and
run ` + "`sky ssh up`" + `: --ips, --ssh-user, --ssh-key-path, --cleanup, --context-name
and --password are refused with that hint, and so are --name and --port-start,
which only name and expose a kind cluster.`,
		Example: `  sky local up
  sky launch --infra local 'echo hello'
  sky local down`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.GPUs, opts.Async = gpus.Value, async.Value
			if err := checkLocalUpFlags(cmd, opts); err != nil {
				return err
			}
			remote := []bool{opts.IPsFile != "", opts.SSHUser != "", opts.SSHKeyPath != ""}
			if (remote[0] || remote[1] || remote[2]) && !(remote[0] && remote[1] && remote[2]) {
				return flagErrorf("--ips, --ssh-user and --ssh-key-path go together: give all three to deploy on remote machines")
			}
			for _, p := range []struct{ flag, path string }{{"--ips", opts.IPsFile}, {"--ssh-key-path", opts.SSHKeyPath}} {
				if p.path == "" {
					continue
				}
				if _, err := os.Stat(p.path); err != nil {
					return flagErrorf("%s %s: file not found", p.flag, p.path)
				}
			}
			if cmd.Flags().Changed("port-start") && (opts.PortStart < 1 || opts.PortStart > 65535-1000) {
				return flagErrorf("invalid --port-start %d: want a port from 1 to %d", opts.PortStart, 65535-1000)
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("local up", "local Kubernetes clusters")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	addBoolPair(fs, &gpus, "gpus", "", true, "Local clusters see this machine's GPUs", "[Refused] Hide the machine's GPUs")
	fs.StringVar(&opts.IPsFile, "ips", "", "[Refused: use SSH node pools, sky ssh up] File of remote machine IPs")
	fs.StringVar(&opts.SSHUser, "ssh-user", "", "[Refused: use SSH node pools] SSH user for the remote machines")
	fs.StringVar(&opts.SSHKeyPath, "ssh-key-path", "", "[Refused: use SSH node pools] SSH private key for the remote machines")
	fs.BoolVar(&opts.Cleanup, "cleanup", false, "[Refused: use sky ssh down] Remove the cluster from the remote machines")
	fs.StringVar(&opts.ContextName, "context-name", "", "[Refused: no Kubernetes cluster is created] Kubernetes context name")
	fs.StringVar(&opts.Password, "password", "", "[Refused: use SSH node pools] sudo password on the remote machines")
	fs.StringVar(&opts.Name, "name", "", "[Refused: no kind cluster is created] Name of the kind cluster")
	fs.IntVar(&opts.PortStart, "port-start", 0, "[Refused: no kind cluster is created] First host port mapped for services")
	addAsyncFlag(cmd, &async)
	return cmd
}

// checkLocalUpFlags refuses the flags of SkyPilot's kind and remote
// deployments, which the embedded local infrastructure has no use for.
func checkLocalUpFlags(cmd *cobra.Command, opts *LocalUpOptions) error {
	for _, name := range []string{"ips", "ssh-user", "ssh-key-path", "cleanup", "context-name", "password"} {
		if cmd.Flags().Changed(name) {
			return flagErrorf("--%s deploys on remote machines, which SkyGo does with SSH node pools: list them in ~/.sky/ssh_node_pools.yaml and run `sky ssh up`", name)
		}
	}
	for _, name := range []string{"name", "port-start"} {
		if cmd.Flags().Changed(name) {
			return flagErrorf("--%s configures a kind Kubernetes cluster, and SkyGo's local infrastructure runs clusters as processes on this machine without one", name)
		}
	}
	if !opts.GPUs {
		return flagErrorf("--no-gpus: local clusters are processes on this machine and see its GPUs; hiding them is not available")
	}
	return nil
}

// LocalDownOptions is everything `sky local down` needs.
type LocalDownOptions struct {
	IO     *IOStreams
	Config []string
	Name   string
	Async  bool
}

func newLocalDownCmd(f *Factory, runF func(*LocalDownOptions) error) *cobra.Command {
	opts := &LocalDownOptions{IO: f.IO}
	var async boolPair
	cmd := &cobra.Command{
		Use:   "down [flags]",
		Short: "Tear down every cluster of the local infrastructure and disable it",
		Long: `Tear down every cluster that runs on this machine's local infrastructure
(as ` + "`sky down`" + ` would) and disable the infrastructure, so the optimizer no longer
chooses it. ` + "`sky local up`" + ` enables it again.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Async = async.Value
			if opts.Name != "" {
				return flagErrorf("--name names a kind cluster of SkyPilot's `sky local up`; SkyGo's local infrastructure has none (run `sky local down` without it)")
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("local down", "local Kubernetes clusters")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().StringVar(&opts.Name, "name", "", "Name of SkyPilot's kind cluster; refused, SkyGo's local infrastructure has none")
	addAsyncFlag(cmd, &async)
	return cmd
}
