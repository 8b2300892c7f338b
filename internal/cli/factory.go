package cli

import (
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
func defaultFactory() *Factory {
	return &Factory{
		IO:        defaultIO(),
		Now:       time.Now,
		LookupEnv: os.LookupEnv,
		Client: func() (*client.Client, error) {
			return client.New(client.Options{AutoStart: true})
		},
	}
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
