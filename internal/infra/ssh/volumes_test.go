package ssh

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/provision"
)

// TestProvisionPinsHeadToVolumeHost: a ClusterSpec.Zone (the host that
// holds a volume's data) becomes the head, even when it is not the pool's
// first host; a busy pinned host is a capacity error saying why, and a
// host no longer in the pool a configuration error.
func TestProvisionPinsHeadToVolumeHost(t *testing.T) {
	h := sshHosts(t)
	home := t.TempDir()
	ctx := context.Background()
	p := newTestProvisioner(t, h, home)
	last := p.Pool.Hosts[len(p.Pool.Hosts)-1].Name
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "pinned", NumNodes: 1, Zone: last})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(context.Background(), "pinned") })
	if info.Nodes[0].ID != last {
		t.Fatalf("head %s, want the pinned host %s", info.Nodes[0].ID, last)
	}
	var ce *provision.CapacityError
	if _, err := p.Provision(ctx, provision.ClusterSpec{Name: "second", NumNodes: 1, Zone: last}); !errors.As(err, &ce) ||
		!strings.Contains(err.Error(), "holds the data of a volume") || !strings.Contains(err.Error(), "pinned") {
		t.Fatalf("second cluster pinned to a busy host: %v", err)
	}
	if _, err := p.Provision(ctx, provision.ClusterSpec{Name: "third", NumNodes: 1, Zone: "no-such-host"}); !errors.As(err, new(*provision.ConfigError)) ||
		!strings.Contains(err.Error(), "no longer in SSH node pool") {
		t.Fatalf("pinned to a host not in the pool: %v", err)
	}
	if err := (&Infra{}).CheckVolume(nil, 1); err != nil {
		t.Errorf("one node: %v", err)
	}
}
