package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/paths"
)

// The built binary converts a script client-side (no API server), taking
// the cluster from ~/.slurm/config, and `sky validate` accepts the file.
func TestSlurmConvertBinary(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".slurm"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "Host mycluster\n  HostName 10.0.0.1\n  User me\n"
	if err := os.WriteFile(filepath.Join(home, ".slurm", "config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../infra/slurm/convert/testdata/seed-2.1-train.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "train.yaml")
	stdout, stderr, code := runBinary(t, []string{"HOME=" + home}, "slurm", "convert", "--gpu-type", "H100", "-o", out, script)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if stdout != "" {
		t.Errorf("with -o, stdout should be empty, got %q", stdout)
	}
	for _, want := range []string{"Wrote " + out, "Submit it: sky jobs launch -n train " + out, "Check it:  sky launch --dryrun " + out} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"infra: slurm/mycluster/gpu\n", "accelerators: H100:8\n", "account: ai-research\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("YAML lacks %q:\n%s", want, data)
		}
	}
	if _, err := os.Stat(paths.ServerDir(home)); err == nil {
		t.Errorf("convert started an API server; it must run client-side")
	}

	// validate runs in runBinary's own HOME (it starts a server there,
	// which the harness stops).
	vout, verr, vcode := runBinary(t, nil, "validate", out)
	if vcode != 0 || !strings.Contains(vout, "YAML is valid") {
		t.Fatalf("sky validate %s: exit %d\n%s%s", out, vcode, vout, verr)
	}
	if !strings.Contains(vout, "2x") && !strings.Contains(vout, "H100") {
		t.Errorf("validate output does not describe the task: %s", vout)
	}
}

func TestSlurmConvertErrors(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".slurm"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".slurm", "config"), []byte("Host a\nHost b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home}
	script := writeFile(t, "job.sbatch", "#!/bin/bash\n#SBATCH --time=1h\necho hi\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"slurm", "convert", "--cluster", "zz", script}, "--cluster zz is not a Host of ~/.slurm/config (Hosts: a, b)"},
		{[]string{"slurm", "convert", script}, "--time=1h is not a Slurm time limit"},
		{[]string{"slurm", "convert", filepath.Join(home, "missing.sbatch")}, "reading sbatch script"},
		{[]string{"slurm", "convert"}, "missing argument"},
	}
	for _, tc := range cases {
		_, stderr, code := runBinary(t, env, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("sky %v: exit %d, want an error with %q:\n%s", tc.args, code, tc.want, stderr)
		}
	}
}

// A chain of scripts becomes one pipeline on stdout.
func TestSlurmConvertPipelineBinary(t *testing.T) {
	a, _ := filepath.Abs("../infra/slurm/convert/testdata/seed-7.2-train.sbatch")
	b, _ := filepath.Abs("../infra/slurm/convert/testdata/seed-7.2-eval.sbatch")
	stdout, stderr, code := runBinary(t, []string{"HOME=" + t.TempDir()}, "slurm", "convert", a, b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "name: train-then-eval\n\n---\n") || strings.Count(stdout, "\n---\n") != 2 {
		t.Errorf("not a two-task pipeline:\n%s", stdout)
	}
	if !strings.Contains(stderr, "Submit it: sky jobs launch -n train-then-eval train-then-eval.yaml") || !strings.Contains(stderr, "sky validate") {
		t.Errorf("stderr: %s", stderr)
	}
}
