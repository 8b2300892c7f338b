package infra_test

import (
	"testing"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/infra/ssh"
)

func TestIDRoundTrip(t *testing.T) {
	for _, c := range []struct {
		in    string
		kind  string
		parts []string
		out   string
	}{
		{"local", "local", nil, "local"},
		{"ssh/gpus", "ssh", []string{"gpus"}, "ssh/gpus"},
		{"SSH/my-pool", "ssh", []string{"my-pool"}, "ssh/my-pool"},
		{"k8s/kind-ctx", "k8s", []string{"kind-ctx"}, "k8s/kind-ctx"},
		{"slurm/mycluster/debug", "slurm", []string{"mycluster", "debug"}, "slurm/mycluster/debug"},
		{"aws/us-east-1/us-east-1a", "aws", []string{"us-east-1", "us-east-1a"}, "aws/us-east-1/us-east-1a"},
		{"aws/us-east-1/", "aws", []string{"us-east-1"}, "aws/us-east-1"},
	} {
		id, err := infra.ParseID(c.in)
		if err != nil {
			t.Fatalf("ParseID(%q): %v", c.in, err)
		}
		if id.Kind != c.kind || len(id.Parts) != len(c.parts) || id.String() != c.out {
			t.Errorf("ParseID(%q) = %#v (%s), want kind %s parts %v", c.in, id, id, c.kind, c.parts)
		}
		for i, p := range c.parts {
			if id.Part(i) != p {
				t.Errorf("ParseID(%q).Part(%d) = %q, want %q", c.in, i, id.Part(i), p)
			}
		}
	}
	for _, bad := range []string{"", " ", "/x"} {
		if _, err := infra.ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) should fail", bad)
		}
	}
}

// An optimizer candidate becomes the ID of where it runs; node pools are
// named "ssh-<pool>" as regions, SkyPilot's form.
func TestFromCandidate(t *testing.T) {
	env := infra.Env{Home: t.TempDir()}
	lo, _ := local.Open(env)
	sh, _ := ssh.Open(env)
	set := infra.NewSet(lo, sh)
	for _, c := range []struct{ cloud, region, zone, want string }{
		{"ssh", "ssh-gpus", "", "ssh/gpus"},
		{"ssh", "gpus", "", "ssh/gpus"},
		{"SSH", "ssh-my-pool", "", "ssh/my-pool"},
		{"ssh", "", "", "ssh"},
		{"local", "", "", "local"},
		{"aws", "us-east-1", "", "aws/us-east-1"},
		{"aws", "us-east-1", "us-east-1a", "aws/us-east-1/us-east-1a"},
	} {
		if got := set.FromCandidate(c.cloud, c.region, c.zone).String(); got != c.want {
			t.Errorf("FromCandidate(%q, %q, %q) = %q, want %q", c.cloud, c.region, c.zone, got, c.want)
		}
	}
}

// Every kind this build links in is registered under its name.
func TestRegistered(t *testing.T) {
	set, err := infra.Open(infra.Env{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, in := range set.All() {
		kinds = append(kinds, in.Kind())
	}
	if len(kinds) != 2 || kinds[0] != local.Kind || kinds[1] != ssh.Kind {
		t.Errorf("registered kinds = %v, want [local ssh]", kinds)
	}
	if len(set.Capacities()) != 2 || len(set.Ops()) != 4 {
		t.Errorf("capacities %d, ops %d: want both kinds' (2 and 4)", len(set.Capacities()), len(set.Ops()))
	}
}
