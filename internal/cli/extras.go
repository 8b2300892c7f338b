package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skygo/skygo/internal/cliext"
	_ "github.com/skygo/skygo/internal/cliext/all" // the commands the infrastructures add
)

// extEnv is the part of the command line an infrastructure's commands
// use (cliext.Env): the same streams, errors, flags and requests as the
// command line's own commands.
type extEnv struct{ f *Factory }

func (e extEnv) IO() cliext.Streams {
	io := e.f.IO
	return cliext.Streams{In: io.In, Out: io.Out, ErrOut: io.ErrOut, Green: io.Green, Yellow: io.Yellow}
}

func (extEnv) Home() (string, error) { return homeDir() }

func (extEnv) UsageErrorf(format string, a ...any) error { return flagErrorf(format, a...) }

func (extEnv) NotAvailable(cmd, capability string) error { return notAvailable(cmd, capability) }

func (extEnv) Group(use, short string, subs ...*cobra.Command) *cobra.Command {
	return newGroupCmd(use, short, subs...)
}

func (extEnv) Args(lo, hi int) cobra.PositionalArgs { return rangeArgs(lo, hi) }

func (extEnv) NoArgs() cobra.PositionalArgs { return noArgs }

func (extEnv) ConfigFlag(cmd *cobra.Command) func() error {
	var values []string
	addConfigFlag(cmd, &values)
	return func() error { return validateConfigArgs(values) }
}

func (extEnv) AsyncFlag(cmd *cobra.Command) func() bool {
	var p boolPair
	addAsyncFlag(cmd, &p)
	return func() bool { return p.Value }
}

func (extEnv) BoolPair(fs *pflag.FlagSet, name string, def bool, usage, noUsage string) func() bool {
	var p boolPair
	addBoolPair(fs, &p, name, "", def, usage, noUsage)
	return func() bool { return p.Value }
}

func (e extEnv) Follow(requestName string, submit cliext.Submit, async, stream bool) error {
	return follow(e.f, requestName, submit, nil, callOptions{Async: async, Stream: stream})
}

// addExtraCmds adds the commands the infrastructures add: top-level ones
// to their help group (add), the others under their parent.
func addExtraCmds(f *Factory, root *cobra.Command, add func(group string, cmds ...*cobra.Command)) {
	for _, c := range cliext.Commands() {
		cmd := c.New(extEnv{f})
		if c.Parent == "" {
			add(c.Group, cmd)
			continue
		}
		parent, _, err := root.Find([]string{c.Parent})
		if err != nil || parent == root {
			panic("cliext: command " + c.Name + " names parent " + c.Parent + ", which sky does not have")
		}
		parent.AddCommand(cmd)
	}
}
