package backend

import (
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
)

// TestCheckFitsRefusesWhatTheClusterLacks: resource flags of an exec or a
// relaunch that name another place, or what is fixed when a cluster is
// created, are refused rather than run on a cluster that does not have them.
func TestCheckFitsRefusesWhatTheClusterLacks(t *testing.T) {
	created, _ := json.Marshal(map[string]any{"ports": []any{"8080"}})
	c := &state.Cluster{Name: "dev", NumNodes: 1, Resources: created}
	h := &Handle{Infra: "local", CPUs: 4, MemoryGB: 16, Info: &provision.ClusterInfo{Cloud: "Local", Region: "local"}}
	tests := []struct {
		yaml, want string
	}{
		{"infra: local", ""},
		{"cpus: 2+", ""},
		{"ports: 8080", ""},
		{"network_tier: standard", ""},
		{"infra: aws", "requested infra aws"},
		{"region: us-east-1", "requested region us-east-1"},
		{"zone: us-east-1a", "requested zone us-east-1a"},
		{"instance_type: m5.large", "instance type m5.large"},
		{"use_spot: true", "spot instances"},
		{"disk_size: 100", "disk_size 100"},
		{"disk_tier: high", "disk_tier high"},
		{"network_tier: best", "network_tier best"},
		{"local_disk: nvme", "local_disk nvme"},
		{"image_id: ami-1", "image_id ami-1"},
		{"memory: 64", "memory 64GB"},
		{"ports: 9000", "port 9000"},
	}
	for _, tt := range tests {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(tt.yaml), &m); err != nil {
			t.Fatal(err)
		}
		r, err := resources.Parse(m)
		if err != nil {
			t.Fatalf("%s: %v", tt.yaml, err)
		}
		err = checkFits(c, h, r, 1)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.yaml, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: err = %v, want it to say %q", tt.yaml, err, tt.want)
		}
	}
}
