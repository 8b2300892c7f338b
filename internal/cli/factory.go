package cli

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/skygo/skygo/internal/client"
)

// IOStreams is where a command reads and writes; tests swap in buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// IsTTY is true when Out is a terminal; colour and live progress only then.
	IsTTY bool
	// Color is true when colour may be used (a TTY and NO_COLOR unset).
	Color bool
	// InTTY is true when In is a terminal: a person types the answers to
	// prompts, and the terminal echoes them.
	InTTY bool
}

// Factory carries what commands need, built lazily so that `sky --help`
// costs nothing.
type Factory struct {
	IO *IOStreams
	// Client returns a client for the configured API server, starting a
	// local server when needed.
	Client func() (*client.Client, error)
	// Now is the clock; tests pin it.
	Now func() time.Time
	// LookupEnv reads the caller's environment (for `--env NAME` without a
	// value); tests replace it.
	LookupEnv func(string) (string, bool)

	// Runtime finds a runtime file of this sky (sky-server, the node
	// binaries): internal/bundle's lookup in the sky program; nil where
	// nothing can be started (in-process tests).
	Runtime func(name string) (string, error)

	// requestConfig is the client's config (user and project files,
	// --config, -w/--workspace) sent with every request of this command,
	// as SkyPilot's client sends it; nil when nothing of it needs sending.
	requestConfig map[string]any
}

func defaultIO() *IOStreams {
	return newIOStreams(os.Stdin, os.Stdout, os.Stderr, os.Getenv)
}

// newIOStreams wires real files and decides TTY and colour once, up front.
func newIOStreams(in, out, errOut *os.File, getenv func(string) string) *IOStreams {
	outTTY := term.IsTerminal(int(out.Fd()))
	return &IOStreams{
		In:     in,
		Out:    out,
		ErrOut: errOut,
		IsTTY:  outTTY,
		InTTY:  term.IsTerminal(int(in.Fd())),
		Color:  colorAllowed(outTTY, getenv),
	}
}

// colorAllowed says whether to colour output: only on a terminal, and never
// when NO_COLOR is set to anything (https://no-color.org) or TERM is dumb.
func colorAllowed(tty bool, getenv func(string) string) bool {
	if !tty {
		return false
	}
	if getenv("NO_COLOR") != "" {
		return false
	}
	return getenv("TERM") != "dumb"
}

// defaultFactory is the production wiring. The client is built only when a
// command asks for it.
func defaultFactory(runtime func(string) (string, error)) *Factory {
	f := &Factory{
		IO:        defaultIO(),
		Now:       time.Now,
		LookupEnv: os.LookupEnv,
		Runtime:   runtime,
	}
	f.Client = func() (*client.Client, error) {
		return client.New(client.Options{AutoStart: true, ServerBinary: f.serverBinary, ServerEnv: serverEnv()})
	}
	return f
}

// ServerProgram is the runtime file that is the API server.
const ServerProgram = "sky-server"

// serverEnv is what a server this command starts is told of it: the sky
// command line, which the server's local callbacks (autostop's `sky stop`)
// run (servermain.EnvCLI).
func serverEnv() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{"SKYGO_CLI=" + exe}
}

// serverBinary is the path of the API server program.
func (f *Factory) serverBinary() (string, error) {
	if f.Runtime == nil {
		return "", errors.New("this sky cannot start an API server: it was built without its runtime; build it with `make build`")
	}
	return f.Runtime(ServerProgram)
}

// Bold styles s in bold when colour is allowed.
func (s *IOStreams) Bold(v string) string {
	if !s.Color {
		return v
	}
	return "\x1b[1m" + v + "\x1b[0m"
}

// Green styles s in green when colour is allowed.
func (s *IOStreams) Green(v string) string {
	if !s.Color {
		return v
	}
	return "\x1b[32m" + v + "\x1b[0m"
}

// Yellow styles s in yellow when colour is allowed (warnings).
func (s *IOStreams) Yellow(v string) string {
	if !s.Color {
		return v
	}
	return "\x1b[33m" + v + "\x1b[0m"
}

// Red styles s in red when colour is allowed (failures).
func (s *IOStreams) Red(v string) string {
	if !s.Color {
		return v
	}
	return "\x1b[31m" + v + "\x1b[0m"
}
