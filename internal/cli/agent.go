package cli

import "github.com/spf13/cobra"

// newAgentCmd is the hidden `sky agent` group run on cluster nodes (owned by
// the node-agent work).
func newAgentCmd(f *Factory) *cobra.Command {
	return &cobra.Command{Use: "agent", Hidden: true, Short: "On-node agent (internal)."}
}
