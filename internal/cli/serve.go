package cli

import (
	"github.com/spf13/cobra"
)

func newServeCmd(f *Factory) *cobra.Command {
	return newGroupCmd("serve", "SkyServe: serve models and APIs across regions and clouds",
		newServeUpCmd(f, nil), newServeUpdateCmd(f, nil), newServeStatusCmd(f, nil),
		serviceLogsCmd(f, nil, "serve logs", "SERVICE_NAME", "REPLICA_IDS", true),
		newServeDownCmd(f, nil))
}

// ServeUpOptions is everything `sky serve up` needs.
type ServeUpOptions struct {
	IO          *IOStreams
	Config      []string
	ServiceName string
	Task        *taskInput
	Yes         bool
	Async       bool
}

func newServeUpCmd(f *Factory, runF func(*ServeUpOptions) error) *cobra.Command {
	opts := &ServeUpOptions{IO: f.IO}
	var (
		tf    taskFlags
		async boolPair
	)
	cmd := &cobra.Command{
		Use:   "up [flags] SERVICE_YAML",
		Short: "Launch a service",
		Long: `Launch a service from a task YAML with a service: section. Replicas are
launched and put behind a load balancer whose endpoint 'sky serve status'
shows.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			entry, err := yamlEntrypoint(args[0])
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
			if _, err := prepareTask(opts.Task); err != nil {
				return err
			}
			return notAvailable("serve up", "SkyServe")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().StringVarP(&opts.ServiceName, "service-name", "n", "", "Service name, unique per service (default: generated)")
	addTaskFlags(cmd, &tf, taskFlagSet{git: true})
	addAsyncFlag(cmd, &async)
	addYesFlag(cmd, &opts.Yes)
	return cmd
}

// ServeUpdateOptions is everything `sky serve update` needs.
type ServeUpdateOptions struct {
	IO          *IOStreams
	Config      []string
	ServiceName string
	Task        *taskInput
	Mode        string
	Yes         bool
	Async       bool
}

func newServeUpdateCmd(f *Factory, runF func(*ServeUpdateOptions) error) *cobra.Command {
	opts := &ServeUpdateOptions{IO: f.IO}
	var (
		tf    taskFlags
		async boolPair
	)
	cmd := &cobra.Command{
		Use:   "update [flags] SERVICE_NAME SERVICE_YAML",
		Short: "Update a service to a new version",
		Args:  rangeArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.ServiceName = args[0]
			entry, err := yamlEntrypoint(args[1])
			if err != nil {
				return err
			}
			if opts.Task, err = tf.resolve(entry, f.LookupEnv); err != nil {
				return err
			}
			if opts.Mode, err = choice("--mode", opts.Mode, "rolling", "blue_green"); err != nil {
				return err
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			if _, err := prepareTask(opts.Task); err != nil {
				return err
			}
			return notAvailable("serve update", "SkyServe")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	addTaskFlags(cmd, &tf, taskFlagSet{})
	addAsyncFlag(cmd, &async)
	cmd.Flags().StringVar(&opts.Mode, "mode", "rolling", "rolling (replace replicas gradually) or blue_green (switch once the new ones are ready)")
	addYesFlag(cmd, &opts.Yes)
	return cmd
}

// ServeStatusOptions is everything `sky serve status` needs.
type ServeStatusOptions struct {
	IO       *IOStreams
	Config   []string
	Services []string
	Verbose  bool
	Endpoint bool
}

func newServeStatusCmd(f *Factory, runF func(*ServeStatusOptions) error) *cobra.Command {
	opts := &ServeStatusOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "status [flags] [SERVICE_NAMES]...",
		Short: "Show services and their replicas",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Services = args
			if opts.Endpoint && len(args) != 1 {
				return flagErrorf("--endpoint needs exactly one SERVICE_NAME, got %d", len(args))
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("serve status", "SkyServe")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "Show all details, untruncated")
	cmd.Flags().BoolVar(&opts.Endpoint, "endpoint", false, "Print only the service's endpoint")
	return cmd
}

// ServeDownOptions is everything `sky serve down` needs.
type ServeDownOptions struct {
	IO        *IOStreams
	Config    []string
	Services  []string
	All       bool
	Purge     bool
	Yes       bool
	ReplicaID int // -1: the whole service
	Async     bool
}

func newServeDownCmd(f *Factory, runF func(*ServeDownOptions) error) *cobra.Command {
	opts := &ServeDownOptions{IO: f.IO}
	var async boolPair
	cmd := &cobra.Command{
		Use:   "down [flags] [SERVICE_NAMES]...",
		Short: "Tear down services",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Services = args
			if len(args) > 0 && opts.All {
				return flagErrorf("name services or use -a/--all, not both")
			}
			if len(args) == 0 && !opts.All {
				return flagErrorf("no service given: name the service(s) to tear down, or use -a/--all")
			}
			if cmd.Flags().Changed("replica-id") {
				if len(args) != 1 {
					return flagErrorf("--replica-id needs exactly one SERVICE_NAME")
				}
				if opts.ReplicaID < 0 {
					return flagErrorf("invalid --replica-id %d: want a replica ID >= 0", opts.ReplicaID)
				}
			} else {
				opts.ReplicaID = -1
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("serve down", "SkyServe")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "Tear down all services")
	cmd.Flags().BoolVarP(&opts.Purge, "purge", "p", false, "Also remove services in a failed status")
	addYesFlag(cmd, &opts.Yes)
	cmd.Flags().IntVar(&opts.ReplicaID, "replica-id", 0, "Tear down only this replica of the service")
	addAsyncFlag(cmd, &async)
	return cmd
}
