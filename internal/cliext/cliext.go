// Package cliext is how an infrastructure adds commands to the sky
// command line (a top-level command or one under the command line's own
// groups): its
// light command-line package (internal/infra/<name>/cliext, listed by
// internal/cliext/all) registers a constructor, and the command line
// builds the command with an Env, the narrow part of itself a plug-in's
// command needs: its streams, its usage errors and argument checks, the
// flags every command shares, and the way it submits a request to the
// API server and follows it. A plug-in's command so looks, prints and
// fails exactly as the command line's own.
package cliext

import (
	"cmp"
	"context"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/op"
)

// Streams is where a command reads and writes, and how it colours.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	Green  func(string) string
	Yellow func(string) string
}

// Submit sends one request to the API server and returns its id.
type Submit func(ctx context.Context, c *client.Client, opts ...client.OpOption) (string, error)

// Env is what the command line gives an infrastructure's commands.
type Env interface {
	IO() Streams
	// Home is the user's home directory.
	Home() (string, error)
	// UsageErrorf is a usage error: printed with the command's usage line,
	// exit code 2.
	UsageErrorf(format string, a ...any) error
	// NotAvailable says that this build cannot do capability, for cmd.
	NotAvailable(cmd, capability string) error
	// Group is a command group: alone it shows its help; an unknown word
	// after it is a usage error with suggestions.
	Group(use, short string, subs ...*cobra.Command) *cobra.Command
	// Args takes lo to hi positional words (hi < 0: any number); NoArgs
	// none; each refuses others with the command line's message.
	Args(lo, hi int) cobra.PositionalArgs
	NoArgs() cobra.PositionalArgs
	// ConfigFlag adds the repeatable --config every server command takes;
	// check refuses a bad KEY=VALUE.
	ConfigFlag(cmd *cobra.Command) (check func() error)
	// AsyncFlag adds --async/--no-async.
	AsyncFlag(cmd *cobra.Command) (async func() bool)
	// BoolPair adds --name/--no-name with the default def.
	BoolPair(fs *pflag.FlagSet, name string, def bool, usage, noUsage string) (value func() bool)
	// Follow submits a request (named requestName, as `sky api status`
	// shows it) with the command's config, then prints its id and returns
	// (async) or follows it to its end, streaming its log (stream).
	Follow(requestName string, submit Submit, async, stream bool) error
}

// Send submits the operation d describes with body and follows it (Env.Follow).
func Send[B, R any](e Env, d op.Desc[B, R], body B, async, stream bool) error {
	return e.Follow(d.RequestName(), func(ctx context.Context, c *client.Client, opts ...client.OpOption) (string, error) {
		return client.Submit(ctx, c, d, body, opts...)
	}, async, stream)
}

// Command is one command an infrastructure adds.
type Command struct {
	// Parent, when set, is the command line's top-level command the
	// command joins ("gpus"); empty: it is a top-level command.
	Parent string
	// Name is the command's name (its Use's first word), unique under its
	// parent.
	Name string
	// Group is the help section a top-level command is listed in:
	// "cluster", "jobs", "infra" or "other".
	Group string
	New   func(Env) *cobra.Command
}

var (
	mu   sync.Mutex
	cmds []Command
)

// Register adds a command; called from init. A name taken twice is a
// programming error. The function it returns takes the command away
// again (for tests).
func Register(c Command) (unregister func()) {
	mu.Lock()
	defer mu.Unlock()
	same := func(o Command) bool { return o.Parent == c.Parent && o.Name == c.Name }
	if slices.ContainsFunc(cmds, same) {
		panic("cliext: command " + strings.TrimSpace(c.Parent+" "+c.Name) + " registered twice")
	}
	cmds = append(cmds, c)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		cmds = slices.DeleteFunc(cmds, same)
	}
}

// Commands are the registered commands, by parent, then name.
func Commands() []Command {
	mu.Lock()
	defer mu.Unlock()
	out := slices.Clone(cmds)
	slices.SortFunc(out, func(a, b Command) int {
		return cmp.Or(strings.Compare(a.Parent, b.Parent), strings.Compare(a.Name, b.Name))
	})
	return out
}
