package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/serve/lb"
)

// newServeLBCmd is the hidden `sky serve-lb`, the load balancer process a
// service controller starts for each service. lb.Main parses its flags
// (the controller is its only caller) and its exit code is the process's:
// 2 tells the controller the listen port was taken.
func newServeLBCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:                "serve-lb --service NAME --listen HOST:PORT --control SOCKET [flags]",
		Hidden:             true,
		Short:              "SkyServe load balancer (internal).",
		DisableFlagParsing: true,
		SilenceUsage:       true,
		RunE: func(cmd *cobra.Command, args []string) error {
			io := defaultIO()
			if f != nil && f.IO != nil {
				io = f.IO
			}
			if code := lb.Main(args, io.ErrOut); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
}
