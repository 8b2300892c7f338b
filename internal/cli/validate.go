package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// ValidateOptions is everything `sky validate` needs.
type ValidateOptions struct {
	IO   *IOStreams
	Task *taskInput
}

func newValidateCmd(f *Factory, runF func(*ValidateOptions) error) *cobra.Command {
	opts := &ValidateOptions{IO: f.IO}
	var envs, envFiles, secrets, secretFiles []string
	cmd := &cobra.Command{
		Use:   "validate [flags] YAML",
		Short: "Check a task YAML without launching anything",
		Long: `Load a task YAML as 'sky launch' would (schema, structure, env and
secret substitution) and print each task's resources in canonical form.
Errors name the file, line and column.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			entry, err := yamlEntrypoint(args[0])
			if err != nil {
				return err
			}
			tf := taskFlags{Envs: envs, EnvFiles: envFiles, Secrets: secrets, SecretFiles: secretFiles}
			if opts.Task, err = tf.resolve(entry, f.LookupEnv); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return validateRun(opts)
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&envFiles, "env-file", nil, "Dotenv `FILE` of environment variables (--env wins on conflicts)")
	fs.StringArrayVar(&envs, "env", nil, "Environment variable `KEY=VALUE` (or KEY for the local value); repeatable")
	fs.StringArrayVar(&secretFiles, "secret-file", nil, "Dotenv `FILE` of secret variables (--secret wins on conflicts)")
	fs.StringArrayVar(&secrets, "secret", nil, "Secret variable `KEY=VALUE` (or KEY for the local value); repeatable")
	return cmd
}

// validateRun loads the YAML and prints the verdict and the resources.
func validateRun(opts *ValidateOptions) error {
	dag, err := prepareTask(opts.Task)
	if err != nil {
		return err
	}
	redact := dag.Redactor()
	out := opts.IO.Out
	for _, w := range dag.Warnings {
		fmt.Fprintln(opts.IO.ErrOut, opts.IO.Yellow("Warning: "+redact.Redact(w)))
	}
	fmt.Fprintln(out, opts.IO.Green("YAML is valid."))
	for _, line := range describeTasks(dag) {
		fmt.Fprintln(out, "  "+redact.Redact(line))
	}
	return nil
}
