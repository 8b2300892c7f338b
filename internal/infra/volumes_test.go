package infra

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

func runBash(t *testing.T, home, cmd string) (string, int) {
	t.Helper()
	c := exec.Command("bash", "-c", cmd)
	c.Env = append(os.Environ(), "HOME="+home)
	out, err := c.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestLinkVolumeCommand: the mount path (~ expanded on the node) becomes
// a link to the data directory, idempotently; an empty directory there
// is replaced, anything else refused; unlinking leaves the data.
func TestLinkVolumeCommand(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "vol dir")
	link := LinkVolumeCommand(data, "~/mnt/my data")
	for range 2 {
		if out, code := runBash(t, home, link); code != 0 {
			t.Fatalf("link: exit %d: %s", code, out)
		}
	}
	if target, err := os.Readlink(filepath.Join(home, "mnt", "my data")); err != nil || target != data {
		t.Fatalf("link target %q (%v), want %q", target, err, data)
	}
	if err := os.WriteFile(filepath.Join(home, "mnt", "my data", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runBash(t, home, LinkVolumeCommand(filepath.Join(t.TempDir(), "other"), "~/mnt/my data")); code == 0 || !strings.Contains(out, "not to the volume") {
		t.Errorf("a link to another volume: exit %d: %s", code, out)
	}
	if out, code := runBash(t, home, UnlinkVolumeCommand(data, "~/mnt/my data")); code != 0 {
		t.Fatalf("unlink: %s", out)
	}
	if _, err := os.Lstat(filepath.Join(home, "mnt", "my data")); !os.IsNotExist(err) {
		t.Errorf("the link is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "f")); err != nil {
		t.Errorf("unlinking took the data: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(home, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code := runBash(t, home, LinkVolumeCommand(data, "~/empty")); code != 0 {
		t.Errorf("over an empty directory: exit %d: %s", code, out)
	}
	if err := os.MkdirAll(filepath.Join(home, "full"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(home, "full", "keep"), nil, 0o644)
	if out, code := runBash(t, home, LinkVolumeCommand(data, "~/full")); code == 0 || !strings.Contains(out, "not empty") {
		t.Errorf("over a directory with files: exit %d: %s", code, out)
	}
	if got := VolumeSubDir("/v/", api.VolumeMount{SubPath: "a/b/"}); got != "/v/a/b" {
		t.Errorf("VolumeSubDir = %q", got)
	}
}

// volumeFake is an infrastructure that holds volumes of some types.
type volumeFake struct {
	kind  string
	types []string
}

func (f volumeFake) Kind() string { return f.kind }
func (f volumeFake) Provisioner(ID) (provision.Provisioner, error) {
	return nil, errors.New("no provisioner")
}
func (f volumeFake) VolumeTypes() []string                                  { return f.types }
func (f volumeFake) ApplyVolume(context.Context, *state.Volume, bool) error { return nil }
func (f volumeFake) DeleteVolume(context.Context, *state.Volume) error      { return nil }
func (f volumeFake) CheckVolume(*state.Volume, int) error                   { return nil }
func (f volumeFake) AttachVolume(context.Context, *state.Volume, api.VolumeMount, *provision.ClusterInfo, []provision.CommandRunner) (string, error) {
	return "", nil
}
func (f volumeFake) DetachVolume(context.Context, *state.Volume, api.VolumeMount, *provision.ClusterInfo, []provision.CommandRunner) error {
	return nil
}

// TestVolumeHostFor: the kind that holds a type is found; others say
// where the type can live.
func TestVolumeHostFor(t *testing.T) {
	s := NewSet(volumeFake{kind: "local", types: []string{"host-dir"}}, volumeFake{kind: "ssh", types: []string{"host-dir"}})
	if _, err := s.VolumeHostFor("local", "host-dir"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VolumeHostFor("aws", "host-dir"); err == nil || !strings.Contains(err.Error(), "it can on: local, ssh") {
		t.Errorf("host-dir on aws: %v", err)
	}
	if _, err := s.VolumeHostFor("kubernetes", "k8s-pvc"); err == nil || !strings.Contains(err.Error(), "k8s-pvc / k8s-hostpath (infra k8s)") {
		t.Errorf("k8s-pvc without the Kubernetes plug-in: %v", err)
	}
	if _, err := s.EphemeralVolumeHostFor("k8s-pvc"); err == nil || !strings.Contains(err.Error(), "ephemeral volumes") {
		t.Errorf("an ephemeral k8s-pvc without the Kubernetes plug-in: %v", err)
	}
	if got := s.VolumeKinds("host-dir"); strings.Join(got, ",") != "local,ssh" {
		t.Errorf("VolumeKinds = %v", got)
	}
}
