// Package cliext is what the Kubernetes plug-in adds to the sky command
// line: `sky gpus label`, which the API server runs.
package cliext

import (
	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/cliext"
)

func init() {
	cliext.Register(cliext.Command{Parent: "gpus", Name: "label", New: newLabelCmd})
}

// LabelOptions is everything `sky gpus label` needs.
type LabelOptions struct {
	Context string
	Cleanup bool
	Async   bool
}

// newLabelCmd is `sky gpus label`: the server labels the GPU nodes of the
// context(s) it may use and streams one line per node.
func newLabelCmd(e cliext.Env) *cobra.Command {
	opts := &LabelOptions{}
	var checkConfig func() error
	cmd := &cobra.Command{
		Use:   "label [flags]",
		Short: "Label the GPU nodes of a Kubernetes cluster for SkyPilot",
		Args:  e.NoArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkConfig(); err != nil {
				return err
			}
			return cliext.Send(e, apiop.KubernetesLabelGPUs, api.GPUsLabelBody{Context: opts.Context, Cleanup: opts.Cleanup}, opts.Async, true)
		},
	}
	checkConfig = e.ConfigFlag(cmd)
	cmd.Flags().StringVarP(&opts.Context, "context", "c", "", "Kubernetes context (default: the API server's current context)")
	cmd.Flags().BoolVar(&opts.Cleanup, "cleanup", false, "Only remove the GPU labeller's resources")
	cmd.Flags().BoolVar(&opts.Async, "async", false, "Do not wait for labelling to finish")
	return cmd
}
