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

// TestMergePlace: volumes of one place merge (a zone fills in); an
// ephemeral volume's place, its kind alone, takes a named volume's
// region in either order; other places conflict.
func TestMergePlace(t *testing.T) {
	k8s := func(name string, parts ...string) *volumePlace {
		return &volumePlace{id: infra.ID{Kind: "kubernetes", Parts: parts}, volume: name}
	}
	for _, order := range [][2]*volumePlace{{k8s("eph"), k8s("data", "ctx")}, {k8s("data", "ctx"), k8s("eph")}} {
		got, err := mergePlace(mergeOrFail(t, nil, order[0]), order[1])
		if err != nil || got.id.String() != "kubernetes/ctx" {
			t.Errorf("%s then %s: %+v %v, want kubernetes/ctx", order[0].volume, order[1].volume, got, err)
		}
	}
	var ce *ClusterError
	if _, err := mergePlace(k8s("a", "ctx1"), k8s("b", "ctx2")); !errors.As(err, &ce) || ce.Type != "VolumeTopologyConflict" {
		t.Errorf("two contexts: %v", err)
	}
	if _, err := mergePlace(k8s("eph"), &volumePlace{id: infra.ID{Kind: "local"}, volume: "l"}); !errors.As(err, &ce) {
		t.Errorf("kubernetes and local: %v", err)
	}
	zoned := &volumePlace{id: infra.ID{Kind: "ssh", Parts: []string{"lab"}}, zone: "h1", volume: "z"}
	got, err := mergePlace(&volumePlace{id: infra.ID{Kind: "ssh", Parts: []string{"lab"}}, volume: "y"}, zoned)
	if err != nil || got.zone != "h1" {
		t.Errorf("zone fill-in: %+v %v", got, err)
	}
	if _, err := mergePlace(got, &volumePlace{id: zoned.id, zone: "h2", volume: "w"}); err == nil {
		t.Errorf("two hosts of a pool merged")
	}
}

func mergeOrFail(t *testing.T, place, p *volumePlace) *volumePlace {
	t.Helper()
	out, err := mergePlace(place, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
