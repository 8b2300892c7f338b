package cli

import (
	"fmt"
	"os"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
)

// sshUpRunRemote sends `sky ssh up` to the API server, which probes the
// hosts, installs the node runtime and streams a table of hosts back. A
// --file is read here and sent, so the server needs none of the client's
// files.
func sshUpRunRemote(f *Factory, opts *SSHOptions) error {
	b := api.SSHUpBody{Infra: opts.Infra}
	if opts.File != "" {
		raw, err := os.ReadFile(opts.File)
		if err != nil {
			return fmt.Errorf("reading --file: %w", err)
		}
		b.PoolsYAML = string(raw)
	}
	return sendOp(f, apiop.SSHUp, b, callOptions{Async: opts.Async, Stream: true})
}

// sshDownRunRemote sends `sky ssh down`.
func sshDownRunRemote(f *Factory, opts *SSHOptions) error {
	return sendOp(f, apiop.SSHDown, api.SSHDownBody{Infra: opts.Infra}, callOptions{Async: opts.Async, Stream: true})
}
