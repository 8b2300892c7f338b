package backend

import (
	"errors"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
)

// TestForcePlace: a task's resources (and each of their alternatives)
// get the volumes' place; a resource naming another place is
// SkyPilot's VolumeTopologyConflict.
func TestForcePlace(t *testing.T) {
	pool := &volumePlace{id: infra.ID{Kind: "ssh", Parts: []string{"lab"}}, zone: "10.0.0.3", volume: "data"}
	res, err := resources.Parse(map[string]any{"cpus": "2", "any_of": []any{map[string]any{"memory": "4"}, map[string]any{"memory": "8"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := forcePlace(res, pool); err != nil {
		t.Fatal(err)
	}
	want := resources.Infra{Cloud: "ssh", Region: "ssh-lab"}
	if res.Infra != want {
		t.Errorf("infra = %+v, want %+v", res.Infra, want)
	}
	for i, r := range res.AnyOf {
		if r.Infra != want {
			t.Errorf("any_of[%d] infra = %+v", i, r.Infra)
		}
	}
	local, _ := resources.Parse(map[string]any{"infra": "local"})
	err = forcePlace(local, pool)
	var ce *ClusterError
	if !errors.As(err, &ce) || ce.Type != "VolumeTopologyConflict" || !strings.Contains(ce.Msg, "volume data lives on ssh/lab (10.0.0.3)") {
		t.Fatalf("local task, pool volume: %v", err)
	}
	same, _ := resources.Parse(map[string]any{"infra": "ssh/lab"})
	if err := forcePlace(same, pool); err != nil {
		t.Errorf("the volume's own pool: %v", err)
	}
	c := &state.Cluster{Name: "dev"}
	if err := checkClusterPlace(c, &Handle{Infra: "ssh/lab"}, pool); err != nil {
		t.Errorf("cluster on the volume's pool: %v", err)
	}
	if err := checkClusterPlace(c, &Handle{Infra: "local"}, pool); !errors.As(err, &ce) || !strings.Contains(ce.Msg, `cluster "dev" is on local`) {
		t.Errorf("cluster elsewhere: %v", err)
	}
}
