// Package cliext is what the Slurm plug-in adds to the sky command line:
// `sky slurm convert`, which turns sbatch scripts into task YAML in the
// client (internal/infra/slurm/convert), with no API server.
package cliext

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/cliext"
	"github.com/skygo/skygo/internal/infra/slurm/convert"
	"github.com/skygo/skygo/internal/sshconfig"
)

func init() {
	cliext.Register(cliext.Command{Name: "slurm", Group: "infra", New: newSlurmCmd})
}

// ConvertOptions is everything `sky slurm convert` needs.
type ConvertOptions struct {
	env     cliext.Env
	Scripts []string
	Output  string
	Cluster string
	GPUType string
}

func newSlurmCmd(e cliext.Env) *cobra.Command {
	return e.Group("slurm", "Move Slurm work to SkyPilot: convert sbatch scripts to task YAML",
		newConvertCmd(e))
}

func newConvertCmd(e cliext.Env) *cobra.Command {
	opts := &ConvertOptions{env: e}
	cmd := &cobra.Command{
		Use:   "convert [flags] SCRIPT [SCRIPT]...",
		Short: "Convert an sbatch script into a SkyPilot task YAML",
		Long: `Convert an sbatch script into a SkyPilot task YAML, by the rules of
SkyPilot's Slurm migration guide: #SBATCH directives become name,
num_nodes, resources (infra: slurm/<cluster>/<partition>) and
config.slurm.sbatch_options; module loads and environment activation
become setup; the rest becomes run, with srun dropped, turned into
rank variables for torchrun/deepspeed/accelerate, or kept for MPI on
rank 0 with --overlap; SLURM_* variables become SKYPILOT_* ones.

Several scripts (a chain run with --dependency=afterok) become one
managed pipeline that runs them in the order given.

The YAML goes to stdout (or --output); what could not be converted, and
the command to submit the result with, go to stderr. Runs locally: no
API server is needed.`,
		Example: `  sky slurm convert train.sbatch -o train.yaml
  sky slurm convert --cluster mycluster --gpu-type H100 train.sbatch
  sky slurm convert prep.sbatch train.sbatch eval.sbatch -o pipeline.yaml`,
		Args: e.Args(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Scripts = args
			return convertRun(opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&opts.Output, "output", "o", "", "Write the YAML to `FILE` instead of stdout")
	fs.StringVar(&opts.Cluster, "cluster", "", "Slurm cluster `NAME` (a Host of ~/.slurm/config) for infra; default: the only Host there")
	fs.StringVar(&opts.GPUType, "gpu-type", "", "GPU `NAME` for directives that give only a count (--gpus-per-node=8, --gres=gpu:8)")
	return cmd
}

func convertRun(opts *ConvertOptions) error {
	var scripts []convert.Script
	for _, p := range opts.Scripts {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("reading sbatch script: %w", err)
		}
		scripts = append(scripts, convert.Script{Path: p, Text: string(data)})
	}
	hosts, err := slurmHosts(opts.env)
	if err != nil {
		return err
	}
	if opts.Cluster != "" && len(hosts) > 0 && !slices.Contains(hosts, opts.Cluster) {
		return opts.env.UsageErrorf("--cluster %s is not a Host of ~/.slurm/config (Hosts: %s)", opts.Cluster, strings.Join(hosts, ", "))
	}
	copts := convert.Options{Cluster: opts.Cluster, Hosts: hosts, GPUType: opts.GPUType, Output: opts.Output}
	var res *convert.Result
	if len(scripts) == 1 {
		res, err = convert.Convert(scripts[0], copts)
	} else {
		res, err = convert.ConvertPipeline(scripts, copts)
	}
	if err != nil {
		if len(scripts) == 1 {
			return fmt.Errorf("%s: %w", scripts[0].Path, err)
		}
		return err
	}
	file := opts.Output
	if file != "" {
		if err := os.WriteFile(file, []byte(res.YAML), 0o644); err != nil {
			return fmt.Errorf("writing the task YAML: %w", err)
		}
	} else {
		fmt.Fprint(opts.env.IO().Out, res.YAML)
		file = res.Name + ".yaml"
	}
	printConvertReport(opts.env.IO(), res, file, opts.Output != "", len(scripts) > 1)
	return nil
}

// slurmHosts lists the clusters of ~/.slurm/config; none when it does not
// exist.
func slurmHosts(e cliext.Env) ([]string, error) {
	home, err := e.Home()
	if err != nil {
		return nil, err
	}
	cfg, err := sshconfig.LoadConfig(filepath.Join(home, ".slurm", "config"), home)
	if err != nil {
		return nil, fmt.Errorf("~/.slurm/config: %w", err)
	}
	return cfg.Aliases(), nil
}

func printConvertReport(io cliext.Streams, res *convert.Result, file string, written, pipeline bool) {
	w := io.ErrOut
	if written {
		fmt.Fprintf(w, "%s %s.\n", io.Green("Wrote"), file)
	}
	var notes, unmapped []string
	for _, n := range res.Notes {
		if n.Unmapped {
			unmapped = append(unmapped, n.String())
		} else {
			notes = append(notes, n.String())
		}
	}
	if len(unmapped) > 0 {
		fmt.Fprintln(w, io.Yellow("Not converted (check these before launching):"))
		for _, n := range unmapped {
			fmt.Fprintln(w, "  - "+n)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "Changed in the conversion:")
		for _, n := range notes {
			fmt.Fprintln(w, "  - "+n)
		}
	}
	if res.SlurmOnly {
		fmt.Fprintln(w, io.Yellow("This task keeps srun, so it runs only on Slurm."))
	}
	if !written {
		fmt.Fprintf(w, "Save the YAML as %s, then:\n", file)
	}
	// The guide's check is a dry-run launch; a pipeline is not something
	// `sky launch` takes, so it is checked by loading it.
	if pipeline {
		fmt.Fprintf(w, "Check it:  sky validate %s\n", file)
	} else {
		fmt.Fprintf(w, "Check it:  sky launch --dryrun %s\n", file)
	}
	fmt.Fprintf(w, "Submit it: %s\n", res.Submit)
}
