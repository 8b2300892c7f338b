package cli

import (
	"fmt"

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
		newGpusListCmd(f, func(o *GpusListOptions) error { return gpusListRunRemote(f, o) }, "list"))
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
