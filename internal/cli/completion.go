package cli

import (
	"github.com/spf13/cobra"
)

func newCompletionCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print the completion script for your shell. For example:

  bash:  source <(sky completion bash)
  zsh:   sky completion zsh > "${fpath[1]}/_sky"
  fish:  sky completion fish > ~/.config/fish/completions/sky.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return flagErrorf("name one shell: bash, zsh or fish")
			}
			_, err := choice("shell", args[0], "bash", "zsh", "fish")
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), f.IO.Out
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			default:
				return root.GenFishCompletion(out, true)
			}
		},
	}
}
