package core

import "testing"

func TestAdminOnlyOp(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"local_up", true},
		{"local_down", true},
		{"ssh_up", true},
		{"ssh_down", true},
		{"kubernetes_label_gpus", true},
		{"down", false}, // per cluster: owner or admin, judged by the backend
		{"launch", false},
		{"volumes.delete", false},
		{"kubernetes_node_info", false},
	} {
		if got := adminOnlyOp(c.name); got != c.want {
			t.Errorf("adminOnlyOp(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}
