package convert

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	tasks "github.com/skygo/skygo/internal/task"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCases are the scripts of testdata/: the examples of the migration
// guide (seed-*) and scripts written in the style of real clusters.
var goldenCases = []struct {
	name    string
	scripts []string
	opts    Options
}{
	{"seed-2.1-train", []string{"seed-2.1-train.sbatch"}, Options{Hosts: []string{"mycluster"}, GPUType: "H100"}},
	{"seed-5.1-preprocess", []string{"seed-5.1-preprocess.sbatch"}, Options{}},
	{"seed-5.2-torchrun", []string{"seed-5.2-torchrun.sbatch"}, Options{}},
	{"seed-5.3-mpi", []string{"seed-5.3-mpi.sbatch"}, Options{}},
	{"seed-6-conda", []string{"seed-6-conda.sbatch"}, Options{}},
	{"seed-7.1-array", []string{"seed-7.1-array.sbatch"}, Options{Output: "task.yaml"}},
	{"seed-7.2-pipeline", []string{"seed-7.2-train.sbatch", "seed-7.2-eval.sbatch"}, Options{}},
	{"cpu-preprocess", []string{"cpu-preprocess.sbatch"}, Options{Cluster: "hpc"}},
	{"mpi-lammps", []string{"mpi-lammps.sbatch"}, Options{Hosts: []string{"hpc", "dev"}}},
	{"array-sweep", []string{"array-sweep.sbatch"}, Options{Cluster: "hpc", GPUType: "L40S"}},
	{"torchrun-multinode", []string{"torchrun-multinode.sbatch"}, Options{Cluster: "hpc"}},
	{"conda-exclusive", []string{"conda-exclusive.sbatch"}, Options{Hosts: []string{"hpc"}}},
	{"ray-cluster", []string{"ray-cluster.sbatch"}, Options{Cluster: "hpc", GPUType: "L4"}},
	// Only bash and Slurm's own commands: these run as they are on a
	// test cluster.
	{"runnable-ranks", []string{"runnable-ranks.sbatch"}, Options{}},
	{"runnable-array", []string{"runnable-array.sbatch"}, Options{}},
}

func convertFiles(t *testing.T, files []string, opts Options) *Result {
	t.Helper()
	var scripts []Script
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, Script{Path: f, Text: string(data)})
	}
	var r *Result
	var err error
	if len(scripts) == 1 {
		r, err = Convert(scripts[0], opts)
	} else {
		r, err = ConvertPipeline(scripts, opts)
	}
	if err != nil {
		t.Fatalf("convert %v: %v", files, err)
	}
	return r
}

// report is what the CLI prints beside the YAML, kept as a golden file
// so that a change in what is reported shows in review.
func report(r *Result) string {
	var b strings.Builder
	for _, n := range r.Notes {
		mark := "note"
		if n.Unmapped {
			mark = "NOT CONVERTED"
		}
		b.WriteString(mark + ": " + n.String() + "\n")
	}
	b.WriteString("submit: " + r.Submit + "\n")
	if r.SlurmOnly {
		b.WriteString("slurm-only\n")
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := convertFiles(t, tc.scripts, tc.opts)
			for ext, got := range map[string]string{".yaml": r.YAML, ".notes": report(r)} {
				p := filepath.Join("testdata", tc.name+ext)
				if *update {
					if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(p)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("%s differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", tc.name, p, got, want)
				}
			}
			dag := loadsAsTask(t, tc.name+".yaml", r.YAML)
			for _, tk := range dag.Tasks {
				bashSyntaxOK(t, tk.Name+" setup", tk.Setup)
				bashSyntaxOK(t, tk.Name+" run", tk.Run)
			}
		})
	}
}

// bashSyntaxOK has bash parse a setup or run without running it.
func bashSyntaxOK(t *testing.T, what, script string) {
	t.Helper()
	if script == "" {
		return
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command(bash, "-n")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s is not valid bash: %v\n%s\n%s", what, err, out, script)
	}
}

// loadsAsTask checks the YAML with the loader `sky validate` and `sky
// launch` use, including the task-name rule of a launch.
func loadsAsTask(t *testing.T, name, y string) *tasks.DAG {
	t.Helper()
	dag, err := tasks.LoadBytes(name, []byte(y), tasks.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatalf("the task loader rejects %s: %v\n%s", name, err, y)
	}
	for _, tk := range dag.Tasks {
		if err := tasks.ValidateName(tk); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return dag
}
