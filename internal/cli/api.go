package cli

import "github.com/spf13/cobra"

// newAPICmd is the `sky api` group (owned by the API-server work).
func newAPICmd(f *Factory) *cobra.Command {
	return &cobra.Command{Use: "api", Short: "Manage the SkyPilot API server."}
}
