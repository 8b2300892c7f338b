package cli

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/op"

	"github.com/spf13/cobra"
)

func newStorageCmd(f *Factory) *cobra.Command {
	return newGroupCmd("storage", "Manage buckets created by SkyPilot",
		newStorageLsCmd(f, func(o *StorageLsOptions) error { return storageLsRun(f, o) }),
		newStorageDeleteCmd(f, func(o *StorageDeleteOptions) error { return storageDeleteRun(f, o) }))
}

// StorageLsOptions is everything `sky storage ls` needs.
type StorageLsOptions struct {
	IO      *IOStreams
	Config  []string
	Verbose bool
	Output  string
}

func newStorageLsCmd(f *Factory, runF func(*StorageLsOptions) error) *cobra.Command {
	opts := &StorageLsOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "ls [flags]",
		Short: "List buckets managed by SkyPilot",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			var err error
			if opts.Output, err = parseOutput(opts.Output); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("storage ls", "storage")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "Show all details, untruncated")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}

// storageCommandWidth is where `sky storage ls` cuts the COMMAND column
// without -v.
const storageCommandWidth = 50

func storageList(f *Factory) ([]api.StorageRecord, error) {
	recs := []api.StorageRecord{}
	if err := callOp(f, apiop.StorageLs, op.NoBody{}, &recs, callOptions{}); err != nil {
		return nil, err
	}
	if recs == nil {
		recs = []api.StorageRecord{}
	}
	return recs, nil
}

func storageLsRun(f *Factory, opts *StorageLsOptions) error {
	recs, err := storageList(f)
	if err != nil {
		return err
	}
	if opts.Output == "json" {
		return printJSON(opts.IO.Out, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintln(opts.IO.Out, "No existing storage.")
		return nil
	}
	tb := newTable(opts.IO.Bold, "NAME", "UPDATED", "STORE", "COMMAND", "STATUS")
	now := time.Now()
	for _, r := range recs {
		cmd := r.LastUse
		if !opts.Verbose && len(cmd) > storageCommandWidth {
			cmd = cmd[:storageCommandWidth-3] + "..."
		}
		tb.addRow(r.Name, ago(now, r.LaunchedAt), orDash(strings.Join(r.Store, ", ")), orDash(cmd), r.Status)
	}
	return tb.render(opts.IO.Out)
}

// storageDeleteRun matches the names as globs against the storages,
// asks once, then deletes each (SkyPilot's `sky storage delete`).
func storageDeleteRun(f *Factory, opts *StorageDeleteOptions) error {
	recs, err := storageList(f)
	if err != nil {
		return err
	}
	var names []string
	if opts.All {
		for _, r := range recs {
			names = append(names, r.Name)
		}
		if len(names) == 0 {
			fmt.Fprintln(f.IO.Out, "No storage(s) to delete.")
			return nil
		}
	} else {
		for _, pat := range opts.Names {
			found := false
			for _, r := range recs {
				if ok, _ := path.Match(pat, r.Name); ok || pat == r.Name {
					found = true
					if !slices.Contains(names, r.Name) {
						names = append(names, r.Name)
					}
				}
			}
			if !found {
				fmt.Fprintf(f.IO.Out, "Storage name '%s' not found.\n", pat)
			}
		}
		if len(names) == 0 {
			return nil
		}
	}
	q := fmt.Sprintf("Deleting %d storage object(s): %s. Proceed?", len(names), strings.Join(names, ", "))
	if err := f.IO.Confirm(q, opts.Yes); err != nil {
		return err
	}
	var failed []string
	for _, n := range names {
		err := sendOp(f, apiop.StorageDelete, api.StorageBody{Name: n}, callOptions{Async: opts.Async, Replay: !opts.Async})
		if err != nil {
			if errorType(err) == "" {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "Failed to delete storage %s: %v\n", n, err)
			failed = append(failed, n)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("failed to delete storage %s; see the errors above", strings.Join(failed, ", "))
	}
	return nil
}

// deleteOptions is shared by `sky storage delete` and `sky volumes delete`.
type deleteOptions struct {
	IO     *IOStreams
	Config []string
	Names  []string
	All    bool
	Purge  bool
	Yes    bool
	Async  bool
}

// StorageDeleteOptions is everything `sky storage delete` needs.
type StorageDeleteOptions = deleteOptions

func newStorageDeleteCmd(f *Factory, runF func(*StorageDeleteOptions) error) *cobra.Command {
	return deleteCmd(f, runF, "storage", "storage objects", false)
}

// deleteCmd builds `sky storage delete` and `sky volumes delete`;
// withPurge adds -p/--purge (volumes only).
func deleteCmd(f *Factory, runF func(*deleteOptions) error, group, what string, withPurge bool) *cobra.Command {
	opts := &deleteOptions{IO: f.IO}
	var async boolPair
	cmd := &cobra.Command{
		Use:   "delete [flags] [NAMES]...",
		Short: "Delete " + what,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Names = args
			if len(args) > 0 && opts.All {
				return flagErrorf("name %s or use -a/--all, not both", what)
			}
			if len(args) == 0 && !opts.All {
				if group == "storage" {
					return flagErrorf("Either --all or a name must be specified.")
				}
				return flagErrorf("nothing to delete: name the %s, or use -a/--all", what)
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable(group+" delete", group)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, fmt.Sprintf("Delete all %s", what))
	if withPurge {
		cmd.Flags().BoolVarP(&opts.Purge, "purge", "p", false, "Forget the volume even if deleting it on the infrastructure fails")
	}
	addYesFlag(cmd, &opts.Yes)
	addAsyncFlag(cmd, &async)
	return cmd
}

func newVolumesCmd(f *Factory) *cobra.Command {
	return newGroupCmd("volumes", "Manage volumes (persistent disks usable by tasks)",
		newVolumesApplyCmd(f, func(o *VolumesApplyOptions) error { return volumesApplyRunRemote(f, o) }),
		newVolumesLsCmd(f, func(o *VolumesLsOptions) error { return volumesLsRunRemote(f, o) }),
		deleteCmd(f, func(o *deleteOptions) error { return volumesDeleteRunRemote(f, o) }, "volumes", "volumes", true))
}

// VolumesApplyOptions is everything `sky volumes apply` needs.
type VolumesApplyOptions struct {
	IO          *IOStreams
	Config      []string
	YAMLPath    string
	Name        string
	Infra       string
	Type        string
	Size        string
	UseExisting *bool
	Yes         bool
	Async       bool
}

func newVolumesApplyCmd(f *Factory, runF func(*VolumesApplyOptions) error) *cobra.Command {
	opts := &VolumesApplyOptions{IO: f.IO}
	var existing, async boolPair
	cmd := &cobra.Command{
		Use:   "apply [flags] [ENTRYPOINT]",
		Short: "Create a volume from a YAML spec and/or flags",
		Long: `Create a volume from a volume YAML (name, type, infra, size, ...); flags
override the YAML, and without a YAML the flags alone describe the volume.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			if len(args) == 1 {
				e, err := yamlEntrypoint(args[0])
				if err != nil {
					return err
				}
				opts.YAMLPath = e.YAMLPath
			} else if opts.Name == "" || opts.Type == "" {
				return flagErrorf("without a volume YAML, give at least --name and --type (e.g. --type host-dir --infra local)")
			}
			if existing.Set {
				v := existing.Value
				opts.UseExisting = &v
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("volumes apply", "volumes")
		},
	}
	fs := cmd.Flags()
	addConfigFlag(cmd, &opts.Config)
	fs.StringVarP(&opts.Name, "name", "n", "", "Volume name; overrides the YAML")
	fs.StringVar(&opts.Infra, "infra", "", "Where the volume lives: local, ssh/POOL[/HOST], cloud, cloud/region, cloud/region/zone or k8s/CONTEXT; overrides the YAML")
	fs.StringVar(&opts.Type, "type", "", "Volume type: host-dir (local, ssh), k8s-pvc or k8s-hostpath (k8s); runpod-network-volume needs an infrastructure this build lacks; overrides the YAML")
	fs.StringVar(&opts.Size, "size", "", "Volume size (e.g. 100Gi); overrides the YAML")
	addBoolPair(fs, &existing, "use-existing", "", false, "Adopt an existing volume of that name", "Create a new volume")
	addYesFlag(cmd, &opts.Yes)
	addAsyncFlag(cmd, &async)
	return cmd
}

// VolumesLsOptions is everything `sky volumes ls` needs.
type VolumesLsOptions struct {
	IO      *IOStreams
	Config  []string
	Names   []string
	Verbose bool
	Refresh bool
	Output  string
}

func newVolumesLsCmd(f *Factory, runF func(*VolumesLsOptions) error) *cobra.Command {
	opts := &VolumesLsOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "ls [flags] [NAMES]...",
		Short: "List volumes managed by SkyPilot",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Names = args
			var err error
			if opts.Output, err = parseOutput(opts.Output); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return notAvailable("volumes ls", "volumes")
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "Show all details, untruncated")
	cmd.Flags().BoolVarP(&opts.Refresh, "refresh", "r", false, "Ask the infrastructure for the volumes' state instead of the cached one")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}
