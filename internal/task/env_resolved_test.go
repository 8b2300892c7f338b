package task

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestResolvedKeepsPrecedenceWithoutFiles(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "a.env")
	if err := os.WriteFile(envFile, []byte("A=file\nB=file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := LoadOptions{EnvFiles: []string{envFile}, Env: []string{"B=flag", "C"}, Secrets: []string{"S=s3cret"},
		LookupEnv: func(k string) (string, bool) { return "from-env-" + k, k == "C" }}
	r, err := o.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.EnvFiles) != 0 || len(r.SecretFiles) != 0 {
		t.Fatalf("files left in %+v", r)
	}
	if !slices.Contains(r.Env, "C=from-env-C") || !slices.Contains(r.Secrets, "S=s3cret") {
		t.Fatalf("flags not resolved: %+v", r)
	}
	// Loading with the resolved options gives the same task as the original.
	yaml := []byte("envs:\n  A: yaml\n  B: yaml\n  C: yaml\nsecrets:\n  S: null\nrun: echo\n")
	want, err := LoadBytes("t.yaml", yaml, o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadBytes("t.yaml", yaml, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"A", "B", "C"} {
		if want.Tasks[0].Envs[k] != got.Tasks[0].Envs[k] {
			t.Errorf("env %s: %q after Resolved, %q before", k, got.Tasks[0].Envs[k], want.Tasks[0].Envs[k])
		}
	}
	if got.Tasks[0].Envs["B"] != "flag" || got.Tasks[0].Envs["A"] != "file" {
		t.Errorf("precedence lost: %v", got.Tasks[0].Envs)
	}
	if got.Tasks[0].Secrets["S"].Reveal() != "s3cret" {
		t.Errorf("secret lost")
	}
}
