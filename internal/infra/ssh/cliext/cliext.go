// Package cliext is what the SSH node pools add to the sky command line:
// `sky ssh up` and `sky ssh down`, which the API server runs.
package cliext

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/cliext"
)

func init() {
	cliext.Register(cliext.Command{Name: "ssh", Group: "infra", New: newSSHCmd})
}

// Options is everything `sky ssh up` and `sky ssh down` need.
type Options struct {
	Infra string // node pool name; "" = all pools in the file
	File  string // ssh_node_pools.yaml to use (up only)
	Async bool
}

func newSSHCmd(e cliext.Env) *cobra.Command {
	return e.Group("ssh", "Set up and tear down SSH node pools",
		newUpDownCmd(e, true), newUpDownCmd(e, false))
}

func newUpDownCmd(e cliext.Env, up bool) *cobra.Command {
	opts := &Options{}
	use, short := "down", "Tear down SSH node pools"
	if up {
		use, short = "up", "Set up SSH node pools from ~/.sky/ssh_node_pools.yaml"
	}
	var checkConfig func() error
	var async func() bool
	cmd := &cobra.Command{
		Use:   use + " [flags]",
		Short: short,
		Args:  e.NoArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkConfig(); err != nil {
				return err
			}
			if opts.File != "" {
				if _, err := os.Stat(opts.File); err != nil {
					return e.UsageErrorf("--file %s: file not found", opts.File)
				}
			}
			opts.Async = async()
			if up {
				return upRun(e, opts)
			}
			return cliext.Send(e, apiop.SSHDown, api.SSHDownBody{Infra: opts.Infra}, opts.Async, true)
		},
	}
	checkConfig = e.ConfigFlag(cmd)
	cmd.Flags().StringVar(&opts.Infra, "infra", "", "Only this node pool (default: every pool in the file)")
	if up {
		cmd.Flags().StringVarP(&opts.File, "file", "f", "", "Node pools file (default ~/.sky/ssh_node_pools.yaml)")
	}
	async = e.AsyncFlag(cmd)
	return cmd
}

// upRun sends `sky ssh up` to the API server, which probes the hosts,
// installs the node runtime and streams a table of hosts back. A --file
// is read here and sent, so the server needs none of the client's files.
func upRun(e cliext.Env, opts *Options) error {
	b := api.SSHUpBody{Infra: opts.Infra}
	if opts.File != "" {
		raw, err := os.ReadFile(opts.File)
		if err != nil {
			return fmt.Errorf("reading --file: %w", err)
		}
		b.PoolsYAML = string(raw)
	}
	return cliext.Send(e, apiop.SSHUp, b, opts.Async, true)
}
