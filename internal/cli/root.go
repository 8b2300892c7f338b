// Package cli is the sky command line: one file per command group, an
// Options struct and a run function per command, shared output helpers.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skygo/skygo/internal/editdist"
	"github.com/skygo/skygo/internal/infrakind"
	_ "github.com/skygo/skygo/internal/infrakind/all" // what every infrastructure is: the light half of each plug-in
	"github.com/skygo/skygo/internal/version"
)

// Execute runs the sky command line and returns the process exit code.
// runtime finds the files sky carries (internal/bundle.Path).
func Execute(runtime func(name string) (string, error)) int {
	f := defaultFactory(runtime)
	if args := os.Args[1:]; len(args) > 0 && handsOver(args[0]) {
		return handOver(f, args)
	}
	return run(f, os.Args[1:])
}

// handsOver reports whether verb is a hidden verb of the server side, one
// an infrastructure declares (infrakind.Kind.Verbs: what its nodes and
// tools run, such as the remote shell of rsync or an ssh ProxyCommand). Its
// packages are the server's; a sky command line naming it runs the
// server program with the same arguments, in this process's place. (The
// node agent is sky-node's, the load balancer sky-lb's.)
func handsOver(verb string) bool {
	_, ok := infrakind.Verb(verb)
	return ok
}

func handOver(f *Factory, args []string) int {
	exe, err := f.serverBinary()
	if err == nil {
		err = syscall.Exec(exe, append([]string{exe}, args...), os.Environ())
	}
	printError(f.IO.ErrOut, fmt.Errorf("sky %s: %w", args[0], err))
	return 1
}

// run builds the command tree, runs args, and maps the outcome to an exit
// code. It is what tests call in-process.
func run(f *Factory, args []string) int {
	root := newRootCmd(f)
	root.SetArgs(rewriteArgs(args))
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	var fe *FlagError
	if !errors.As(err, &fe) && isCobraUsageError(err) {
		err = &FlagError{Err: err}
	}
	printError(f.IO.ErrOut, err)
	if errors.As(err, &fe) {
		printUsageHint(f.IO.ErrOut, cmd)
	}
	return exitCodeFor(err)
}

// isCobraUsageError recognises the few usage errors cobra produces itself
// (before our Args or FlagErrorFunc see them).
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "required flag", "accepts ", "requires at least", "requires at most"} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return true
		}
	}
	return false
}

// printUsageHint prints the command's one-line usage and where to find more,
// instead of cobra's full flag dump.
func printUsageHint(w io.Writer, cmd *cobra.Command) {
	use := cmd.UseLine()
	if cmd.HasAvailableSubCommands() {
		use = cmd.CommandPath() + " COMMAND [flags]"
	}
	fmt.Fprintf(w, "Usage: %s\nRun '%s --help' for more information.\n", use, cmd.CommandPath())
}

// rewriteArgs turns Click spellings pflag cannot parse into ones it can:
// `-no-d` (launch's negative of -d) becomes --no-detach-run. Words after a
// bare "--" belong to the user's command and are left alone.
func rewriteArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "-no-d" {
			a = "--no-detach-run"
		}
		out = append(out, a)
	}
	return out
}

func newRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "sky",
		Short: "SkyGo: run AI and batch workloads on any infrastructure",
		Long: `sky launches clusters, runs jobs and serves models on your own machine,
SSH node pools, Slurm, Kubernetes and clouds, choosing the cheapest place
that fits. Task YAMLs and commands are SkyPilot's.`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          unknownSubcommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		// Every command runs this before its own RunE (none defines
		// another): --config and -w/--workspace must reach the server.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return f.loadRequestConfig(cmd)
		},
	}
	root.SetVersionTemplate(fmt.Sprintf("sky, version {{.Version}}\nsky, commit %s\n", version.Commit))
	root.SetFlagErrorFunc(flagError)
	// Declared here so cobra does not add a -v shorthand: -v means
	// --verbose everywhere else in sky.
	root.Flags().Bool("version", false, "Print the version and commit, then exit")

	root.AddGroup(
		&cobra.Group{ID: "cluster", Title: "Cluster commands:"},
		&cobra.Group{ID: "jobs", Title: "Job commands:"},
		&cobra.Group{ID: "infra", Title: "Infrastructure commands:"},
		&cobra.Group{ID: "other", Title: "Other commands:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("cluster",
		newLaunchCmd(f, func(o *LaunchOptions) error { return launchRunRemote(f, o) }),
		newExecCmd(f, func(o *ExecOptions) error { return execRunRemote(f, o) }),
		newStatusCmd(f, func(o *StatusOptions) error { return statusRunRemote(f, o) }),
		newStopCmd(f, func(o *StopOptions) error { return stopRunRemote(f, o) }),
		newStartCmd(f, func(o *StartOptions) error { return startRunRemote(f, o) }),
		newDownCmd(f, func(o *DownOptions) error { return downRunRemote(f, o) }),
		newAutostopCmd(f, func(o *AutostopOptions) error { return autostopRunRemote(f, o) }),
		newCostReportCmd(f, func(o *CostReportOptions) error { return costReportRunRemote(f, o) }))
	add("jobs", newQueueCmd(f, func(o *QueueOptions) error { return queueRunRemote(f, o) }),
		newLogsCmd(f, func(o *LogsOptions) error { return logsRunRemote(f, o) }),
		newCancelCmd(f, func(o *CancelOptions) error { return cancelRunRemote(f, o) }),
		newJobsCmd(f), newServeCmd(f))
	add("infra", newCheckCmd(f, func(o *CheckOptions) error { return checkRunRemote(f, o) }), newGpusCmd(f), newStorageCmd(f),
		newVolumesCmd(f))
	add("other", newDashboardCmd(f, nil), newValidateCmd(f, nil), newAPICmd(f),
		newCompletionCmd(f))
	root.AddCommand(newShowGpusCmd(f))
	addExtraCmds(f, root, add)

	// Every command, however deep, reports bad flags as usage errors and
	// does not print usage by itself.
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.SilenceUsage, c.SilenceErrors = true, true
		c.SetFlagErrorFunc(flagError)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return root
}

// newGroupCmd builds a command group (jobs, serve, ...): run alone it shows
// help; run with an unknown word it is a usage error with suggestions.
func newGroupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  unknownSubcommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	g.AddCommand(subs...)
	return g
}

// unknownSubcommand is the Args check of the root and of groups: any
// positional word means a subcommand name was mistyped.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return &FlagError{Err: errors.New(msg)}
}

// flagError turns pflag's parse errors into usage errors, adding a "did you
// mean" for a mistyped long flag.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := closestFlag(cmd, name); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
	}
	return &FlagError{Err: errors.New(msg)}
}

// closestFlag returns the flag of cmd nearest to name by edit distance, if
// it is close enough to be a plausible typo.
func closestFlag(cmd *cobra.Command, name string) string {
	best, bestDist := "", 3 // more than two edits away is not a typo
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editdist.Levenshtein(name, f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = min(d, 1) // an abbreviation, as Click accepts
		}
		if d < bestDist {
			best, bestDist = f.Name, d
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return best
}
