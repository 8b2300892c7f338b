package ec2hosts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	gossh "golang.org/x/crypto/ssh"

	"github.com/skygo/skygo/internal/awsx"
)

const wait = 30 * time.Second

func newKey(t *testing.T) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(s.PublicKey())))
}

// The user data SkyPilot's provisioner writes, in shape.
func userData(pub string) string {
	return base64.StdEncoding.EncodeToString([]byte(`#cloud-config
users:
  - name: ubuntu
    shell: /bin/bash
    sudo: ALL=(ALL) NOPASSWD:ALL
    ssh_authorized_keys:
      - ` + pub + `
runcmd:
  - [sh, -c, "echo first boot > /tmp/runcmd-done"]
`))
}

func run(t *testing.T, cl *ec2.Client, subnet Subnet, ud string, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	t.Helper()
	return cl.RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId: aws.String("ami-0a1b2c3d4e5f67890"), InstanceType: ec2types.InstanceTypeT3Micro,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), UserData: aws.String(ud),
		NetworkInterfaces: []ec2types.InstanceNetworkInterfaceSpecification{{
			DeviceIndex: aws.Int32(0), SubnetId: aws.String(subnet.ID), AssociatePublicIpAddress: aws.Bool(false)}},
	}, opts...)
}

// The whole life of an instance over real SSH, the capacity fault, and
// nothing left behind.
func TestInstancesBecomeHosts(t *testing.T) {
	var motoPID int
	var state, name string
	t.Run("life", func(t *testing.T) {
		zones := []string{"us-east-1a", "us-east-1b"}
		c := Start(t, Options{Zones: zones, VPCName: "skygo-harness"})
		motoPID, state, name = c.Moto.PID, c.hosts.State, c.hosts.Name
		ctx := context.Background()
		cl := awsx.EC2(c.Config(t, ""), "")

		// The provisioner finds the VPC by its Name tag (aws.vpc_name).
		vpcs, err := cl.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:Name"), Values: []string{"skygo-harness"}}}})
		if err != nil || len(vpcs.Vpcs) != 1 || aws.ToString(vpcs.Vpcs[0].VpcId) != c.VPCID {
			t.Fatalf("VPC by name: %v %+v", err, vpcs)
		}
		pfx := strings.TrimSuffix(c.CIDR, ".0/24")
		if len(c.Subnets) != 2 || c.Subnets[0].CIDR != pfx+".0/25" || c.Subnets[1].CIDR != pfx+".128/25" {
			t.Fatalf("subnets %+v", c.Subnets)
		}

		signer, pub := newKey(t)
		sa, _ := c.SubnetIn("us-east-1a")
		t0 := time.Now()
		out, err := run(t, cl, sa, userData(pub))
		if err != nil {
			t.Fatal(err)
		}
		inst := out.Instances[0]
		id, ip := aws.ToString(inst.InstanceId), aws.ToString(inst.PrivateIpAddress)
		// moto keeps .0-.3 as AWS does, so the bridge address is never an
		// instance's.
		if ip != pfx+".4" {
			t.Fatalf("first instance's private IP %s, want %s.4", ip, pfx)
		}
		h := c.WaitUp(t, id, wait)
		t.Logf("RunInstances to a host: %.2fs", time.Since(t0).Seconds())
		if h.IP != ip || h.User != "ubuntu" || h.Zone != "us-east-1a" {
			t.Fatalf("host %+v", h)
		}
		// The host reaches the endpoint (as a node reaches S3).
		u, _ := url.Parse(c.Endpoint)
		got, err := h.Run(signer, "hostname; id -un; sudo -n true && echo sudo-ok; cat /tmp/runcmd-done; echo kept > ~/kept; "+
			"exec 3<>/dev/tcp/"+u.Hostname()+"/"+u.Port())
		if err != nil {
			t.Fatalf("%v: %s", err, got)
		}
		if want := "ip-" + strings.ReplaceAll(ip, ".", "-") + "\nubuntu\nsudo-ok\nfirst boot\n"; got != want {
			t.Fatalf("on the host: %q, want %q", got, want)
		}
		// Another key is refused: only the user data's is authorized.
		other, _ := newKey(t)
		if _, err := h.Run(other, "true"); err == nil {
			t.Fatal("a key not in the user data logged in")
		}

		// stop: the host goes; start: the same disk and host key come back,
		// and runcmd does not run again.
		if _, err := cl.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
			t.Fatal(err)
		}
		c.WaitDown(t, id, wait)
		if conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "22"), time.Second); err == nil {
			conn.Close()
			t.Fatal("a stopped instance's host still answers")
		}
		t0 = time.Now()
		if _, err := cl.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}); err != nil {
			t.Fatal(err)
		}
		h2 := c.WaitUp(t, id, wait)
		t.Logf("StartInstances to a host: %.2fs", time.Since(t0).Seconds())
		if !bytesEqual(h2.HostKey.Marshal(), h.HostKey.Marshal()) {
			t.Fatal("the host key changed across stop and start")
		}
		if got, err := h2.Run(signer, "cat ~/kept; sudo rm /tmp/runcmd-done"); err != nil || got != "kept\n" {
			t.Fatalf("after start: %q %v", got, err)
		}
		ns := c.hosts.Name + "-4"
		if _, err := cl.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
			t.Fatal(err)
		}
		c.WaitDown(t, id, wait)
		if _, err := os.Stat(filepath.Join(state, "ssh-hosts", ns)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a terminated instance's disk is kept: %v", err)
		}

		// Capacity: a launch in a failing zone gets EC2's error; the SDK
		// retries it as a server error (HTTP 500) unless told not to.
		c.FailCapacity("us-east-1a")
		_, err = run(t, cl, sa, userData(pub), func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
		var re *smithyhttp.ResponseError
		if awsx.Code(err) != "InsufficientInstanceCapacity" || !errors.As(err, &re) || re.HTTPStatusCode() != 500 {
			t.Fatalf("launch in a failing zone: %v", err)
		}
		if !strings.Contains(awsx.Message(err), "(us-east-1a)") || !strings.Contains(awsx.Message(err), "choosing us-east-1b") {
			t.Fatalf("message %q", awsx.Message(err))
		}
		if n := c.CapacityErrors(); n != 1 {
			t.Fatalf("%d refusals, want 1", n)
		}
		_, err = run(t, cl, sa, userData(pub), func(o *ec2.Options) { o.RetryMaxAttempts = 3 })
		if awsx.Code(err) != "InsufficientInstanceCapacity" || c.CapacityErrors() != 4 {
			t.Fatalf("with 3 attempts: %v, %d refusals in all (want 4)", err, c.CapacityErrors())
		}
		// by Placement too
		_, err = cl.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-0a1b2c3d4e5f67890"),
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-east-1a")}},
			func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
		if awsx.Code(err) != "InsufficientInstanceCapacity" {
			t.Fatalf("placement in a failing zone: %v", err)
		}
		// the other zone launches, at the first address of its subnet
		sb, _ := c.SubnetIn("us-east-1b")
		out, err = run(t, cl, sb, userData(pub))
		if err != nil {
			t.Fatal(err)
		}
		idB := aws.ToString(out.Instances[0].InstanceId)
		if hb := c.WaitUp(t, idB, wait); hb.IP != pfx+".132" || hb.Zone != "us-east-1b" {
			t.Fatalf("host in us-east-1b: %+v", hb)
		}
		c.FailCapacity()
		out, err = run(t, cl, sa, userData(pub))
		if err != nil {
			t.Fatalf("after the fault is lifted: %v", err)
		}
		c.WaitUp(t, aws.ToString(out.Instances[0].InstanceId), wait)

		// An instance outside the VPC (the default one, 172.31/16) is data.
		outside, err := cl.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-0a1b2c3d4e5f67890"),
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), UserData: aws.String(userData(pub))})
		if err != nil {
			t.Fatal(err)
		}
		oip, _ := netip.ParseAddr(aws.ToString(outside.Instances[0].PrivateIpAddress))
		if netip.MustParsePrefix(c.CIDR).Contains(oip) {
			t.Fatalf("default-VPC instance at %s", oip)
		}
		time.Sleep(3 * c.poll)
		if _, ok := c.Host(aws.ToString(outside.Instances[0].InstanceId)); ok {
			t.Fatal("an instance outside the subnets got a host")
		}
		if n := len(c.Hosts()); n != 2 {
			t.Fatalf("%d hosts, want 2", n)
		}
	})
	if motoPID == 0 {
		return // skipped
	}
	if err := syscall.Kill(motoPID, 0); err == nil {
		t.Errorf("moto (pid %d) outlived the test", motoPID)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, name+"-") {
			t.Errorf("namespace left: %s", l)
		}
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir %s left: %v", state, err)
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

func TestParseCloudConfig(t *testing.T) {
	for _, tc := range []struct {
		name, doc, user, keys, runcmd, err string
	}{
		{name: "users entry", doc: "#cloud-config\nusers:\n  - default\n  - name: sky\n    ssh_authorized_keys: [k1, k2]\n", user: "sky", keys: "k1,k2"},
		{name: "top-level keys go to the default user", doc: "#cloud-config\nssh_authorized_keys:\n  - k1\n", user: "ubuntu", keys: "k1"},
		{name: "system_info default user", doc: "#cloud-config\nsystem_info: {default_user: {name: ec2-user}}\nssh-authorized-keys: [k1]\nssh_authorized_keys: [k1]\n", user: "ec2-user", keys: "k1"},
		{name: "dashed key", doc: "#cloud-config\nusers:\n  - name: a\n    ssh-authorized-keys: [k]\n", user: "a", keys: "k"},
		{name: "runcmd", doc: "#cloud-config\nssh_authorized_keys: [k]\nruncmd:\n  - echo hi\n  - [touch, \"/tmp/a b\", \"it's\"]\n", user: "ubuntu", keys: "k",
			runcmd: "echo hi\n'touch' '/tmp/a b' 'it'\\''s'"},
		{name: "no keys", doc: "#cloud-config\nusers: [default]\n", err: "authorizes no SSH key"},
		{name: "two users", doc: "#cloud-config\nssh_authorized_keys: [k]\nusers:\n  - name: b\n    ssh_authorized_keys: [k]\n", err: "one user"},
		{name: "script", doc: "#!/bin/bash\necho\n", err: "not a #cloud-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, err := parseCloudConfig([]byte(tc.doc), DefaultUser)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cc.user != tc.user || strings.Join(cc.keys, ",") != tc.keys || cc.runcmd != tc.runcmd {
				t.Fatalf("got %+v", cc)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	p := netip.MustParsePrefix("10.200.60.0/24")
	for n, want := range map[int]string{1: "10.200.60.0/24", 2: "10.200.60.0/25 10.200.60.128/25", 3: "10.200.60.0/26 10.200.60.64/26 10.200.60.128/26"} {
		got, err := split(p, n)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, g := range got {
			s = append(s, g.String())
		}
		if strings.Join(s, " ") != want {
			t.Fatalf("split %d: %v, want %s", n, s, want)
		}
	}
}
