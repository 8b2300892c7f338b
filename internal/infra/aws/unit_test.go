package aws

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/skygo/skygo/internal/provision"
)

func TestPortRange(t *testing.T) {
	for in, want := range map[string][2]int32{"8080": {8080, 8080}, "8000-8010": {8000, 8010}, " 22 ": {22, 22}} {
		a, b, err := portRange(in)
		if err != nil || a != want[0] || b != want[1] {
			t.Errorf("portRange(%q) = %d, %d, %v; want %v", in, a, b, err, want)
		}
	}
	for _, bad := range []string{"", "http", "80-x"} {
		if _, _, err := portRange(bad); err == nil {
			t.Errorf("portRange(%q): want an error", bad)
		}
	}
}

func TestCoveredSkipsOpenRanges(t *testing.T) {
	have := []types.IpPermission{
		{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(8000), ToPort: aws.Int32(8100), IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}},
		// all traffic, but only from the group itself: opens nothing to the world
		{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String("sg-1")}}},
	}
	if !covered(have, 8080, 8080) || !covered(have, 8000, 8100) {
		t.Error("a port inside an open range must count as open")
	}
	if covered(have, 22, 22) || covered(have, 8050, 8200) {
		t.Error("a port outside the open ranges must not count as open")
	}
}

func TestRootDiskTiers(t *testing.T) {
	d := rootDisk(provision.ClusterSpec{DiskSizeGB: 100}, true)
	if aws.ToInt32(d.Ebs.VolumeSize) != 100 || d.Ebs.VolumeType != types.VolumeTypeGp3 || !aws.ToBool(d.Ebs.Encrypted) || d.Ebs.Iops != nil {
		t.Errorf("default tier: %+v", d.Ebs)
	}
	d = rootDisk(provision.ClusterSpec{DiskTier: "high"}, false)
	if aws.ToInt32(d.Ebs.VolumeSize) != 256 || aws.ToInt32(d.Ebs.Iops) != 7000 || aws.ToInt32(d.Ebs.Throughput) != 7000/16 {
		t.Errorf("high tier: %+v", d.Ebs)
	}
	if d := rootDisk(provision.ClusterSpec{DiskTier: "ultra"}, false); d.Ebs.VolumeType != types.VolumeTypeIo2 || aws.ToInt32(d.Ebs.Iops) != 20000 {
		t.Errorf("ultra tier: %+v", d.Ebs)
	}
	if d := rootDisk(provision.ClusterSpec{DiskTier: "low"}, false); d.Ebs.VolumeType != types.VolumeTypeStandard || d.Ebs.Iops != nil {
		t.Errorf("low tier: %+v", d.Ebs)
	}
}

func TestRunCmdsForms(t *testing.T) {
	got := runCmds([]any{"echo a", []any{"touch", "/tmp/x y"}})
	if len(got) != 2 || got[0] != "echo a" || got[1] != "touch '/tmp/x y'" {
		t.Errorf("runCmds = %q", got)
	}
	if got := runCmds("apt-get update"); len(got) != 1 {
		t.Errorf("a string is one command: %q", got)
	}
}

func TestUserDataCarriesKeyAndUser(t *testing.T) {
	home := t.TempDir()
	in := &Infra{}
	in.env.Home = home
	p := &Provisioner{in: in, region: "us-east-1"}
	ud, err := p.userData(&session{s: settings{SSHUser: "ubuntu", PostRunCmd: "echo hi"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#cloud-config", "- name: ubuntu", "ssh_authorized_keys:", "ssh-ed25519 ", "NOPASSWD:ALL", "runcmd:", `"echo hi"`} {
		if !strings.Contains(ud, want) {
			t.Errorf("user data lacks %q:\n%s", want, ud)
		}
	}
}

func TestDefaultImageTags(t *testing.T) {
	for _, c := range []struct {
		r    provision.Resources
		want string
	}{
		{provision.Resources{InstanceType: "m6i.large"}, "skypilot:custom-cpu-ubuntu"},
		{provision.Resources{InstanceType: "m6g.large"}, "skypilot:custom-cpu-ubuntu-arm64"},
		{provision.Resources{InstanceType: "a1.large"}, "skypilot:custom-cpu-ubuntu-arm64"},
		{provision.Resources{InstanceType: "g5.xlarge", GPUs: map[string]float64{"A10G": 1}}, "skypilot:custom-gpu-ubuntu-cuda13,skypilot:custom-gpu-ubuntu"},
		{provision.Resources{InstanceType: "p3.2xlarge", GPUs: map[string]float64{"V100": 1}}, "skypilot:custom-gpu-ubuntu"},
		{provision.Resources{InstanceType: "p2.xlarge", GPUs: map[string]float64{"K80": 1}}, "skypilot:k80-ubuntu-2004"},
	} {
		if got := strings.Join(defaultImageTags(c.r), ","); got != c.want {
			t.Errorf("defaultImageTags(%v) = %s; want %s", c.r, got, c.want)
		}
	}
}

func TestQuotaCode(t *testing.T) {
	for _, c := range []struct {
		itype string
		spot  bool
		want  string
	}{
		{"m6i.large", false, "L-1216C47A"}, {"c3.large", true, "L-34B43A08"}, {"g5.xlarge", false, "L-DB2E81BA"},
		{"p5.48xlarge", true, "L-7212CCBC"}, {"inf2.xlarge", false, "L-1945791B"}, {"trn1.32xlarge", false, "L-2C3B7624"},
		{"mac1.metal", false, ""},
	} {
		if got, _ := quotaCode(c.itype, c.spot); got != c.want {
			t.Errorf("quotaCode(%s, spot=%v) = %q; want %q", c.itype, c.spot, got, c.want)
		}
	}
}
