package cli

import (
	"fmt"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/task"

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
			return validateRun(f, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&envFiles, "env-file", nil, "Dotenv `FILE` of environment variables (--env wins on conflicts)")
	fs.StringArrayVar(&envs, "env", nil, "Environment variable `KEY=VALUE` (or KEY for the local value); repeatable")
	fs.StringArrayVar(&secretFiles, "secret-file", nil, "Dotenv `FILE` of secret variables (--secret wins on conflicts)")
	fs.StringArrayVar(&secrets, "secret", nil, "Secret variable `KEY=VALUE` (or KEY for the local value); repeatable")
	return cmd
}

// validateRun loads the YAML here, so errors name the file and line at
// once, and has the API server load it too (the server is where tasks run,
// so its verdict is the one that counts) and prints the server's view. A
// CLI without the schema check (task.SchemaChecked) asks the server first:
// the schema's verdict, located in the file, comes from there.
func validateRun(f *Factory, opts *ValidateOptions) error {
	body, err := validateBody(opts.Task)
	if err != nil {
		return err
	}
	var res api.ValidateResult
	asked, serverErr := false, error(nil)
	if !task.SchemaChecked() {
		asked, serverErr = true, callOp(f, apiop.Validate, body, &res, callOptions{})
		if serverErr != nil && (errorType(serverErr) == "" || errorType(serverErr) == "InvalidSkyPilotConfigError") {
			return serverErr
		}
	}
	dag, err := prepareTask(nil, opts.Task)
	if err != nil {
		return err
	}
	// Checked here too so the error names the file and line.
	for _, t := range dag.Tasks {
		if err := task.ValidateName(t); err != nil {
			return err
		}
	}
	redact := dag.Redactor()
	for _, w := range dag.Warnings {
		fmt.Fprintln(opts.IO.ErrOut, opts.IO.Yellow("Warning: "+redact.Redact(w)))
	}
	if !asked {
		serverErr = callOp(f, apiop.Validate, body, &res, callOptions{})
	}
	if serverErr != nil {
		return serverErr
	}
	out := opts.IO.Out
	fmt.Fprintln(out, opts.IO.Green("YAML is valid."))
	for i, t := range res.Tasks {
		fmt.Fprintln(out, "  "+redact.Redact(describeTask(i, t.Name, t.Resources, t.NumNodes)))
	}
	return nil
}
