package replicaset

import (
	"slices"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

func TestPrune(t *testing.T) {
	failed := func(id, v int) Listed { return Listed{ID: id, Version: v, Status: api.ReplicaFailed, CleanedUp: true} }
	for _, tc := range []struct {
		name      string
		ms        []Listed
		latest    int
		versions  []int
		keep      int
		members   []int
		dropVersi []int
	}{
		{"nothing to drop", []Listed{{ID: 1, Version: 1, Status: api.ReplicaReady}}, 1, []int{1}, 5, nil, nil},
		{"failed of an older version goes, and its version", []Listed{failed(1, 1), {ID: 2, Version: 2, Status: api.ReplicaReady}}, 2, []int{1, 2}, 5, []int{1}, []int{1}},
		{"failed, cluster not yet gone: kept", []Listed{{ID: 1, Version: 1, Status: api.ReplicaFailed}}, 2, []int{1, 2}, 5, nil, nil},
		{"failed of the newest version: the newest keep stay", []Listed{failed(1, 1), failed(2, 1), failed(3, 1)}, 1, []int{1}, 2, []int{1}, nil},
		{"no limit", []Listed{failed(1, 1), failed(2, 1), failed(3, 1)}, 1, []int{1}, NoLimit, nil, nil},
		{"an old version still served is kept", []Listed{{ID: 1, Version: 1, Status: api.ReplicaShuttingDown}}, 3, []int{1, 2, 3}, 5, nil, []int{2}},
		{"latest kept with no member", nil, 3, []int{3}, 5, nil, nil},
	} {
		m, v := Prune(tc.ms, tc.latest, tc.versions, tc.keep)
		if !slices.Equal(m, tc.members) || !slices.Equal(v, tc.dropVersi) {
			t.Errorf("%s: members %v versions %v", tc.name, m, v)
		}
	}
}

func TestRetiring(t *testing.T) {
	for _, tc := range []struct {
		status  string
		cleaned bool
		want    bool
	}{
		{api.ReplicaReady, false, true},
		{api.ReplicaPending, false, true},
		{api.ReplicaPreempted, false, true},
		{api.ReplicaShuttingDown, false, false},
		{api.ReplicaFailed, false, true}, // its cluster still has to go
		{api.ReplicaFailed, true, false},
		{api.ReplicaFailedProvision, true, false},
	} {
		if got := Retiring(tc.status, tc.cleaned); got != tc.want {
			t.Errorf("%s cleaned %v: %v", tc.status, tc.cleaned, got)
		}
	}
}
