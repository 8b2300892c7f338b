package cli

import (
	"io"
	"os"

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
}

// Factory carries what commands need, built lazily so that `sky --help`
// costs nothing.
type Factory struct {
	IO *IOStreams
	// Client returns a client for the configured API server, starting a
	// local server when needed.
	Client func() (*client.Client, error)
}

func defaultIO() *IOStreams {
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}
