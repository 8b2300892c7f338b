package cli

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/agent"
)

// newAgentCmd is the hidden `sky agent` group run on cluster nodes. Its
// verbs and flags are parsed by the agent package itself (agent.Main) so
// the node-side hot paths (submit, exec-rank) do no cobra work per verb,
// and the verb's exit code (a rank's return code, `logs` status codes) is
// the process's exit code.
func newAgentCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:                "agent <verb> [flags]",
		Hidden:             true,
		Short:              "On-node agent (internal).",
		DisableFlagParsing: true,
		SilenceUsage:       true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			io := defaultIO()
			if f != nil && f.IO != nil {
				io = f.IO
			}
			if code := agent.Main(ctx, args, io.In, io.Out, io.ErrOut); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
}
