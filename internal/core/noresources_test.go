package core

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
)

// Which error a failed plan becomes, and that the offers of the clouds
// that are not enabled are printed before it.
func TestNoResources(t *testing.T) {
	offer := optimizer.Candidate{Cloud: "aws", Region: "us-east-1", InstanceType: "p5.48xlarge", AccName: "H100", AccCount: 8,
		VCPUs: 192, MemoryGiB: 2048, HourlyPrice: 55.04, NumNodes: 1, NotProvisionable: true}
	h100 := optimizer.Task{NumNodes: 1, Options: []optimizer.Request{{AccName: "H100", AccCount: 8}}}
	nre := func(task optimizer.Task) error {
		return &optimizer.NoResourcesError{Task: task, NotEnabled: []optimizer.Candidate{offer},
			Excluded: []optimizer.Exclusion{{Infra: "local", Reason: "this machine has no H100 accelerators"}}}
	}
	for _, tt := range []struct {
		name     string
		enabled  []string
		err      error
		wantType string
		wantMsg  string
	}{
		{"only local", []string{"local"}, nre(h100), "NoCloudAccessError", "Cloud access is not set up. Run: `sky check` (the local infra is enabled, but this machine has no H100 accelerators)"},
		{"a cloud enabled", []string{"gcp", "local"}, nre(h100), "ResourcesUnavailableError", "do not contain any instances"},
		{"a cloud named", []string{"local"}, nre(optimizer.Task{Options: []optimizer.Request{{Cloud: "aws", AccName: "H100", AccCount: 8}}}), "ResourcesUnavailableError", "do not contain"},
		{"nothing enabled", nil, optimizer.ErrNoInfra, "NoCloudAccessError", "Cloud access is not set up"},
		{"other", []string{"local"}, errors.New("boom"), "ResourcesUnavailableError", "boom"},
	} {
		var log bytes.Buffer
		var oe *op.Error
		if err := noResources(&log, tt.enabled, tt.err); !errors.As(err, &oe) || oe.Type != tt.wantType || !strings.Contains(oe.Message, tt.wantMsg) {
			t.Errorf("%s: got %v, want %s containing %q", tt.name, err, tt.wantType, tt.wantMsg)
		}
		var nr *optimizer.NoResourcesError
		if errors.As(tt.err, &nr) && (!strings.Contains(log.String(), "p5.48xlarge") || !strings.Contains(log.String(), "55.04")) {
			t.Errorf("%s: offers not printed:\n%s", tt.name, log.String())
		}
	}
}
