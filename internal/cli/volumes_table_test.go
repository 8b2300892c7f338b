package cli

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
)

// The tables of `sky volumes ls`, one per type in the registry's order,
// each with the columns its volume type declares (more with -v).
func TestRenderVolumes(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	recs := []api.VolumeRecord{
		{Name: "hd", Type: "host-dir", Infra: "local", Size: "", LaunchedAt: float64(now.Unix() - 7200), Status: "READY", NameOnCloud: "hd-1a2b", HostPath: "/data/hd"},
		{Name: "pvc", Type: "k8s-pvc", Infra: "k8s/ctx", Size: "10", UserName: "ann", Workspace: "ws", LaunchedAt: float64(now.Unix() - 60), Status: "IN_USE",
			NameOnCloud: "pvc-9f", IsEphemeral: true, UsedByClusters: []string{"c1"}, Config: map[string]any{"storage_class_name": "fast"}},
		{Name: "hp", Type: "k8s-hostpath", Infra: "k8s/ctx", Status: "READY", LaunchedAt: float64(now.Unix() - 30), ErrorMessage: "node gone"},
		{Name: "other", Type: "no-such-type", Status: "READY"},
	}
	for _, verbose := range []bool{false, true} {
		var out bytes.Buffer
		if err := renderVolumes(&IOStreams{Out: &out}, recs, verbose, now); err != nil {
			t.Fatal(err)
		}
		// The files are what the tables printed before their columns came
		// from the volume types.
		want, err := os.ReadFile(map[bool]string{false: "testdata/volumes_ls.txt", true: "testdata/volumes_ls_verbose.txt"}[verbose])
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != string(want) {
			t.Errorf("verbose=%v:\n got:\n%s\nwant:\n%s", verbose, out.String(), want)
		}
	}
}
