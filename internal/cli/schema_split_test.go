package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/config"
)

// TestBinaryValidatesThroughServer: the sky binary does not link the
// JSON-Schema check, so a field only the schema knows is wrong must be
// caught by the server, before anything is uploaded or launched, and read
// word for word as a local check words it (this test process links the
// check: schema_test.go), file:line:col included.
func TestBinaryValidatesThroughServer(t *testing.T) {
	dir := t.TempDir()
	yaml := filepath.Join(dir, "bad.yaml")
	text := "resources:\n  cpus: 2\n  acelerators: A100:1\nrun: echo hi\n"
	if err := os.WriteFile(yaml, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, want, code := runInProcess(t, "validate", yaml)
	if code != 1 || !strings.Contains(want, "bad.yaml:3:3: ") || !strings.Contains(want, `did you mean "accelerators"?`) {
		t.Fatalf("in-process validate: exit %d, stderr %q", code, want)
	}
	for _, args := range [][]string{
		{"validate", yaml},
		{"launch", "-y", "-c", "schemasplit", yaml},
		{"jobs", "launch", "-y", yaml},
	} {
		_, got, code := runBinary(t, []string{"NO_COLOR=1"}, args...)
		if code != 1 || got != want {
			t.Errorf("sky %s: exit %d\n got %q\nwant %q", strings.Join(args, " "), code, got, want)
		}
	}
}

// TestBinaryValidatesVolumeThroughServer: the same for a volume spec.
func TestBinaryValidatesVolumeThroughServer(t *testing.T) {
	yaml := filepath.Join(t.TempDir(), "vol.yaml")
	if err := os.WriteFile(yaml, []byte("name: v1\ntype: k8s-pvc\nsize: 10Gi\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, want, code := runInProcess(t, "volumes", "apply", "-y", yaml)
	if code != 1 || !strings.Contains(want, "vol.yaml:4:1: ") || !strings.Contains(want, `unknown field "bogus"`) {
		t.Fatalf("in-process volumes apply: exit %d, stderr %q", code, want)
	}
	_, got, code := runBinary(t, []string{"NO_COLOR=1"}, "volumes", "apply", "-y", yaml)
	if code != 1 || got != want {
		t.Errorf("sky volumes apply: exit %d\n got %q\nwant %q", code, got, want)
	}
}

// TestBinaryValidatesConfigThroughServer: a project config the schema
// refuses is refused by the sky binary through the server, word for word
// and with its line, as a binary linking the check refuses it, and so is
// a --config value.
func TestBinaryValidatesConfigThroughServer(t *testing.T) {
	proj := filepath.Join(t.TempDir(), "project.yaml")
	if err := os.WriteFile(proj, []byte("kubernetes:\n  ports: bogus\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvProjectConfig, proj)
	_, want, code := runInProcess(t, "status")
	if code != 2 || !strings.Contains(want, "line 2, column 10: kubernetes.ports: must be one of") {
		t.Fatalf("in-process status: exit %d, stderr %q", code, want)
	}
	_, got, code := runBinary(t, []string{"NO_COLOR=1"}, "status")
	if code != 2 || got != want {
		t.Errorf("sky status with a bad project config: exit %d\n got %q\nwant %q", code, got, want)
	}
	t.Setenv(config.EnvProjectConfig, "")
	args := []string{"check", "--config", "kubernetes.ports=bogus"}
	_, want, code = runInProcess(t, args...)
	if code != 2 || !strings.Contains(want, "--config kubernetes.ports=bogus") {
		t.Fatalf("in-process check --config: exit %d, stderr %q", code, want)
	}
	_, got, code = runBinary(t, []string{"NO_COLOR=1"}, args...)
	if code != 2 || got != want {
		t.Errorf("sky check --config: exit %d\n got %q\nwant %q", code, got, want)
	}
}
