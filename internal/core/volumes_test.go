package core

import (
	"regexp"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

// TestVolumeNameOnCloud: SkyPilot's shape, <safe name>-<user hash>-<6
// hex>, with long names cut and told apart by a hash of the whole.
func TestVolumeNameOnCloud(t *testing.T) {
	re := regexp.MustCompile(`^my-data-abcd1234-[0-9a-f]{6}$`)
	if got := volumeNameOnCloud("My_Data", "ABCD1234ffff"); !re.MatchString(got) {
		t.Errorf("name on cloud %q", got)
	}
	a := volumeNameOnCloud(strings.Repeat("x", 40)+"a", "u")
	b := volumeNameOnCloud(strings.Repeat("x", 40)+"b", "u")
	if len(a) > 40 || a[:24] == b[:24] {
		t.Errorf("long names: %q %q", a, b)
	}
	if x, y := volumeNameOnCloud("data", "u"), volumeNameOnCloud("data", "u"); x == y {
		t.Error("two volumes of one name got one name on the cloud")
	}
}

// TestVolumeSpecOf: the server validates an apply body as the CLI does
// a YAML.
func TestVolumeSpecOf(t *testing.T) {
	if _, err := volumeSpecOf(api.VolumeApplyBody{Name: "v", Type: "host-dir", Infra: "local"}); err != nil {
		t.Fatal(err)
	}
	if _, err := volumeSpecOf(api.VolumeApplyBody{Name: "v", Type: "nfs"}); err == nil || !strings.Contains(err.Error(), "host-dir") {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := volumeSpecOf(api.VolumeApplyBody{Name: "v", Type: "k8s-pvc", Size: "0.5Gi"}); err == nil || !strings.Contains(err.Error(), "at least 1Gi") {
		t.Errorf("small size: %v", err)
	}
}
