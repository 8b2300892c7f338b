// Package ec2hosts makes the instances of a moto EC2 reachable over real
// SSH: a test gets a moto server, a VPC whose subnets cover the /24 of a
// set of namespace hosts (internal/testutil/sshhosts), and a watcher that
// follows the instances moto launches there. For each instance whose
// private IP is in that /24, a namespace host is started at exactly that IP
// once the instance is running, with the cloud-config user of its user data
// (made, passwordless sudo) and the keys of that user data in the user's
// ~/.ssh/authorized_keys, as cloud-init does on a real image. A stopped
// instance's host stops and keeps its disk (/root, /home, /tmp), which comes
// back on start; a terminated instance's host goes with its disk.
//
// Only hosts the watcher started are ever dialled: the public IPs moto
// invents, and any private IP outside the subnets, are data. So the
// provisioner under test must use private IPs (aws.use_internal_ips: true);
// the subnets map no public IPs and the VPC has no internet gateway.
//
// Every request a sky API server makes goes through a small reverse proxy
// in front of moto (Cloud.Endpoint), which can answer RunInstances in
// chosen zones with EC2's InsufficientInstanceCapacity: moto 5.2.1 has no
// way to make a launch fail for capacity (its instance type offerings are
// checked per region, and only when MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION
// is set, with InvalidInstanceType).
//
// Root is needed (namespaces); SKYGO_SKIP_SSH=1 skips, and without moto the
// test is skipped unless SKYGO_REQUIRE_MOTO=1.
//
// Use from a test of the AWS infrastructure:
//
//	c := ec2hosts.Start(t, ec2hosts.Options{Zones: []string{"us-east-1a", "us-east-1b"}})
//	// the API server's environment: append(env, c.Env()...); its config:
//	//   aws: {vpc_name: <c.VPCName>, use_internal_ips: true}
//	c.FailCapacity("us-east-1a") // the launch fails over to us-east-1b
//	... sky launch --infra aws ...
//	for _, h := range c.Hosts() { ... h.Run(signer, "true") ... }
package ec2hosts

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	gossh "golang.org/x/crypto/ssh"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/testutil/mototest"
	"github.com/skygo/skygo/internal/testutil/sshhosts"
)

// The host set of every Cloud: its own name and subnet, beside sshhosts'
// sgssh (10.200.57), sge2e (.58) and slurmtest's sgslurm (.59); a second
// Cloud at the same time (another test, another checkout) takes the next
// slot of sshhosts (sgec2b on 10.200.76, ...).
const (
	setName   = "sgec2"
	setPrefix = "10.200.60"
)

// DefaultUser is the user of an instance whose cloud-config names none:
// Ubuntu images' "ubuntu", which SkyPilot's aws.ssh_user also defaults to.
const DefaultUser = "ubuntu"

// Options shape a Cloud.
type Options struct {
	// Region of the VPC when Zones is empty, us-east-1 when both are.
	Region string
	// Zones get one subnet each, the /24 split evenly between them; when
	// empty, Region+"a". Zones of several regions give one VPC per region
	// (each over the whole /24, holding its zones' subnets), so a launch
	// can fail over from one region to another and still get a host.
	Zones []string
	// VPCName is the VPCs' Name tag (aws.vpc_name), "skygo-test-vpc" when
	// empty. Each subnet is tagged Name=<VPCName>-<zone>.
	VPCName string
	// DefaultUser replaces DefaultUser.
	DefaultUser string
	// Poll is how often the watcher looks at the instances (250 ms).
	Poll time.Duration
	// MotoEnv are extra settings for the moto server.
	MotoEnv []string
}

// Subnet is one of the Cloud's subnets.
type Subnet struct {
	ID, Region, Zone, CIDR string
}

// Host is the namespace host of a running instance.
type Host struct {
	InstanceID string
	IP         string
	Zone       string
	// User is the cloud-config user whose authorized_keys hold the keys of
	// the instance's user data.
	User    string
	HostKey gossh.PublicKey
}

// Cloud is a moto EC2 whose instances in its VPC become SSH hosts.
type Cloud struct {
	Moto *mototest.Server
	// Endpoint is the proxy in front of moto: give it (Env) to the sky API
	// server under test.
	Endpoint string
	// Region is the first zone's region, VPCID the VPC there; VPCIDs has
	// the VPC of every region (Regions, in the zones' order).
	Region  string
	Regions []string
	VPCID   string
	VPCIDs  map[string]string
	VPCName string
	Subnets []Subnet
	// Gateway is the bridge address, where moto and the proxy listen; the
	// hosts reach it.
	Gateway string
	// CIDR is the hosts' /24.
	CIDR string

	set     *sshhosts.Set
	hosts   *sshhosts.Hosts
	prefix  netip.Prefix
	ec2     map[string]*ec2.Client // by region
	user    string
	poll    time.Duration
	proxy   *proxy
	stopped chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc

	// recMu makes the watcher's reconciles and the proxy's (after a stop
	// or terminate) take turns, so none acts on a stale listing.
	recMu sync.Mutex

	mu    sync.Mutex
	insts map[string]*instance // by instance id
	errs  []error
	logf  func(string, ...any)
}

// instance is what the watcher knows of one instance.
type instance struct {
	ip, region, zone string
	user             string
	keys             []string
	runcmd           string
	booted           bool // its first boot (runcmd) is done
	up               bool // its host runs
	disk             bool // its host's dir is kept (stopped)
	hostKey          gossh.PublicKey
	err              error // why it has no host
}

// Start brings up the hosts' bridge, moto on it, the proxy, the VPC and
// its subnets and the watcher; all of it goes when the test ends.
func Start(t testing.TB, o Options) *Cloud {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("ec2hosts needs root (network namespaces, sshd on port 22); run the tests as root or set SKYGO_SKIP_SSH=1")
	}
	mototest.Require(t)
	if o.Region == "" {
		o.Region = mototest.Region
	}
	if len(o.Zones) == 0 {
		o.Zones = []string{o.Region + "a"}
	}
	o.Region = regionOfZone(o.Zones[0])
	if o.VPCName == "" {
		o.VPCName = "skygo-test-vpc"
	}
	if o.DefaultUser == "" {
		o.DefaultUser = DefaultUser
	}
	if o.Poll == 0 {
		o.Poll = 250 * time.Millisecond
	}
	t0 := time.Now()
	// N=0: only the bridge; the hosts come one by one at moto's addresses.
	set := &sshhosts.Set{Name: setName, Prefix: setPrefix, N: 0}
	t.Cleanup(set.Stop)
	hosts := set.Get(t)
	c := &Cloud{
		Region: o.Region, VPCName: o.VPCName, VPCIDs: map[string]string{}, ec2: map[string]*ec2.Client{}, Gateway: hosts.Prefix + ".1", CIDR: hosts.Prefix + ".0/24",
		set: set, hosts: hosts, user: o.DefaultUser, poll: o.Poll,
		insts: map[string]*instance{}, stopped: make(chan struct{}), logf: t.Logf,
	}
	c.prefix = netip.MustParsePrefix(c.CIDR)
	c.Moto = mototest.Start(t, mototest.Options{Host: c.Gateway, Env: o.MotoEnv})
	cfg := c.Moto.Config(t, o.Region)
	for _, z := range o.Zones {
		if r := regionOfZone(z); c.ec2[r] == nil {
			c.ec2[r] = awsx.EC2(cfg, r)
			c.Regions = append(c.Regions, r)
		}
	}
	var err error
	if c.proxy, err = newProxy(c.Gateway, c.Moto, t); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.proxy.close)
	c.Endpoint = c.proxy.endpoint
	if err := c.makeVPC(o.Zones); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Subnets {
		c.proxy.subnetZone.Store(s.ID, s.Zone)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.proxy.settle = c.settle
	go c.watch()
	t.Logf("ec2hosts: bridge %s, moto %s (proxy %s), VPC %q %v with %d subnets, up in %.1fs",
		c.CIDR, c.Moto.Endpoint, c.Endpoint, c.VPCName, c.VPCIDs, len(c.Subnets), time.Since(t0).Seconds())
	t.Cleanup(func() {
		c.close()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, err := range c.errs {
			t.Errorf("ec2hosts: %v", err)
		}
	})
	return c
}

// regionOfZone is the region of an availability zone ("us-east-1a").
func regionOfZone(z string) string { return strings.TrimRight(z, "abcdefghijklmnopqrstuvwxyz") }

// makeVPC creates, in each region, a VPC over the hosts' /24 and one subnet
// per zone of that region; the subnets of all regions split the /24.
func (c *Cloud) makeVPC(zones []string) error {
	ctx := context.Background()
	cidrs, err := split(c.prefix, len(zones))
	if err != nil {
		return err
	}
	for i, z := range zones {
		r := regionOfZone(z)
		cl := c.ec2[r]
		if c.VPCIDs[r] == "" {
			vpc, err := cl.CreateVpc(ctx, &ec2.CreateVpcInput{
				CidrBlock: aws.String(c.CIDR),
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeVpc,
					Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String(c.VPCName)}}}},
			})
			if err != nil {
				return fmt.Errorf("create VPC %s in %s: %v", c.CIDR, r, err)
			}
			c.VPCIDs[r] = aws.ToString(vpc.Vpc.VpcId)
		}
		sn, err := cl.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: aws.String(c.VPCIDs[r]), CidrBlock: aws.String(cidrs[i].String()), AvailabilityZone: aws.String(z),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet,
				Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String(c.VPCName + "-" + z)}}}},
		})
		if err != nil {
			return fmt.Errorf("create subnet %s in %s: %v", cidrs[i], z, err)
		}
		c.Subnets = append(c.Subnets, Subnet{ID: aws.ToString(sn.Subnet.SubnetId), Region: r, Zone: z, CIDR: cidrs[i].String()})
	}
	c.VPCID = c.VPCIDs[c.Region]
	return nil
}

// split cuts p into n equal parts (n rounded up to a power of two).
func split(p netip.Prefix, n int) ([]netip.Prefix, error) {
	extra := bits.Len(uint(n - 1))
	if p.Bits()+extra > 28 {
		return nil, fmt.Errorf("%d zones do not fit in %s", n, p)
	}
	size := uint32(1) << (32 - p.Bits() - extra)
	base := p.Addr().As4()
	first := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	var out []netip.Prefix
	for i := range n {
		a := first + uint32(i)*size
		addr := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
		out = append(out, netip.PrefixFrom(addr, p.Bits()+extra))
	}
	return out, nil
}

// Env is the environment that points a sky API server at the Cloud
// (through the proxy).
func (c *Cloud) Env() []string { return mototest.EnvFor(c.Endpoint) }

// Config is an SDK configuration reaching the Cloud through the proxy.
func (c *Cloud) Config(t testing.TB, region string) aws.Config {
	return mototest.ConfigFor(t, c.Endpoint, region)
}

// SubnetIn is the Cloud's subnet in zone.
func (c *Cloud) SubnetIn(zone string) (Subnet, bool) {
	for _, s := range c.Subnets {
		if s.Zone == zone {
			return s, true
		}
	}
	return Subnet{}, false
}

// FailCapacity makes RunInstances in the given zones fail with
// InsufficientInstanceCapacity from now on (none: launches succeed again).
// A launch's zone is its Placement.AvailabilityZone, else its subnet's
// (SubnetId or a network interface's); a launch naming neither passes.
func (c *Cloud) FailCapacity(zones ...string) { c.proxy.setFailing(zones) }

// LoseRunInstancesAnswers makes the next n RunInstances calls reach moto
// (which makes the instances) and then close the connection unanswered,
// so the caller's SDK sends the call again; LostAnswers counts them.
func (c *Cloud) LoseRunInstancesAnswers(n int) { c.proxy.lose.Store(int64(n)) }

// LostAnswers is how many RunInstances answers were dropped so far.
func (c *Cloud) LostAnswers() int { return int(c.proxy.lost.Load()) }

// CapacityErrors is how many RunInstances calls were refused so far
// (each retry of the SDK counts).
func (c *Cloud) CapacityErrors() int { return int(c.proxy.refused.Load()) }

// Host is the host of instance id while it runs.
func (c *Cloud) Host(id string) (Host, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.insts[id]
	if in == nil || !in.up {
		return Host{}, false
	}
	return Host{InstanceID: id, IP: in.ip, Zone: in.zone, User: in.user, HostKey: in.hostKey}, true
}

// Hosts are the hosts that run now.
func (c *Cloud) Hosts() []Host {
	c.mu.Lock()
	ids := make([]string, 0, len(c.insts))
	for id := range c.insts {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	var out []Host
	for _, id := range ids {
		if h, ok := c.Host(id); ok {
			out = append(out, h)
		}
	}
	return out
}

// WaitUp waits until instance id has a host, failing the test after
// timeout or at once when the watcher could not give it one.
func (c *Cloud) WaitUp(t testing.TB, id string, timeout time.Duration) Host {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if h, ok := c.Host(id); ok {
			return h
		}
		c.mu.Lock()
		var err error
		if in := c.insts[id]; in != nil {
			err = in.err
		}
		c.mu.Unlock()
		if err != nil {
			t.Fatalf("ec2hosts: instance %s has no host: %v", id, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("ec2hosts: instance %s has no host after %v", id, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitDown waits until instance id has no host.
func (c *Cloud) WaitDown(t testing.TB, id string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, ok := c.Host(id); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ec2hosts: instance %s still has a host after %v", id, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dial opens an SSH connection to the host as its user, checking its host
// key.
func (h Host) Dial(signer gossh.Signer) (*gossh.Client, error) {
	return gossh.Dial("tcp", net.JoinHostPort(h.IP, "22"), &gossh.ClientConfig{
		User: h.User, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.FixedHostKey(h.HostKey), Timeout: 10 * time.Second,
	})
}

// Run runs cmd on the host as its user and returns its combined output.
func (h Host) Run(signer gossh.Signer, cmd string) (string, error) {
	cl, err := h.Dial(signer)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	s, err := cl.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	return string(out), err
}

func (c *Cloud) close() {
	c.cancel()
	<-c.stopped
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, in := range c.insts {
		if in.up || in.disk {
			if err := c.script("stop-ssh-host.sh", nil, in.ip, "--purge"); err != nil {
				c.errs = append(c.errs, err)
			}
			in.up, in.disk = false, false
		}
	}
}

// watch settles the hosts every poll until the cloud is closed.
func (c *Cloud) watch() {
	defer close(c.stopped)
	for {
		c.settle()
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(c.poll):
		}
	}
}

// settle brings every host to its instance's state now: the proxy calls
// it before it answers a StopInstances or TerminateInstances, so that, as
// on EC2, an instance a caller sees stopped has no machine running any
// more (the watcher alone could lag a quick stop and start).
func (c *Cloud) settle() {
	if err := c.reconcile(c.ctx); err != nil && c.ctx.Err() == nil {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
	}
}

func (c *Cloud) reconcile(ctx context.Context) error {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	seen := map[string]bool{}
	for _, r := range c.Regions {
		if err := c.reconcileRegion(ctx, r, seen); err != nil {
			return err
		}
	}
	// An instance moto no longer lists (a reset) is gone.
	c.mu.Lock()
	var gone []string
	for id := range c.insts {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	c.mu.Unlock()
	for _, id := range gone {
		c.follow(ctx, id, "", "", "", string(ec2types.InstanceStateNameTerminated))
	}
	return nil
}

func (c *Cloud) reconcileRegion(ctx context.Context, region string, seen map[string]bool) error {
	p := ec2.NewDescribeInstancesPaginator(c.ec2[region], &ec2.DescribeInstancesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describe instances in %s: %v", region, err)
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				id := aws.ToString(inst.InstanceId)
				if aws.ToString(inst.VpcId) != c.VPCIDs[region] {
					continue
				}
				ip, err := netip.ParseAddr(aws.ToString(inst.PrivateIpAddress))
				if err != nil || !c.prefix.Contains(ip) || ip.String() == c.Gateway {
					continue // data only: never dialled
				}
				seen[id] = true
				zone := ""
				if inst.Placement != nil {
					zone = aws.ToString(inst.Placement.AvailabilityZone)
				}
				state := ""
				if inst.State != nil {
					state = string(inst.State.Name)
				}
				c.follow(ctx, id, ip.String(), region, zone, state)
			}
		}
	}
	return nil
}

// follow brings instance id's host to what its state says.
func (c *Cloud) follow(ctx context.Context, id, ip, region, zone, state string) {
	c.mu.Lock()
	in := c.insts[id]
	if in == nil {
		in = &instance{ip: ip, region: region, zone: zone}
		c.insts[id] = in
	}
	c.mu.Unlock()
	switch ec2types.InstanceStateName(state) {
	case ec2types.InstanceStateNameRunning:
		if in.up || in.err != nil {
			return
		}
		if err := c.boot(ctx, id, in); err != nil {
			c.mu.Lock()
			in.err = err
			c.errs = append(c.errs, fmt.Errorf("instance %s at %s: %v", id, in.ip, err))
			c.mu.Unlock()
		}
	case ec2types.InstanceStateNameStopping, ec2types.InstanceStateNameStopped:
		if in.up {
			c.down(id, in, false)
		}
	case ec2types.InstanceStateNameShuttingDown, ec2types.InstanceStateNameTerminated:
		if in.up || in.disk {
			c.down(id, in, true)
		}
	}
}

// boot starts instance id's host: from its kept disk after a stop, or,
// the first time, a fresh one (whatever another instance left at that
// address goes) made from the user data, whose runcmd then runs as root.
func (c *Cloud) boot(ctx context.Context, id string, in *instance) error {
	if !in.disk {
		ud, err := c.ec2[in.region].DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{
			InstanceId: aws.String(id), Attribute: ec2types.InstanceAttributeNameUserData})
		if err != nil {
			return fmt.Errorf("user data: %v", err)
		}
		raw := ""
		if ud.UserData != nil {
			raw = aws.ToString(ud.UserData.Value)
		}
		data, err := base64.StdEncoding.DecodeString(raw)
		if err != nil {
			return fmt.Errorf("user data is not base64: %v", err)
		}
		cc, err := parseCloudConfig(data, c.user)
		if err != nil {
			return err
		}
		c.mu.Lock()
		in.user, in.keys, in.runcmd = cc.user, cc.keys, cc.runcmd
		for oid, o := range c.insts {
			if oid != id && o.ip == in.ip && o.disk {
				o.disk = false // terminated long ago; its address is reused
			}
		}
		c.mu.Unlock()
		if err := c.script("stop-ssh-host.sh", nil, in.ip, "--purge"); err != nil {
			return err
		}
	}
	keys := filepath.Join(c.hosts.State, "ec2hosts", id+".keys")
	if err := os.MkdirAll(filepath.Dir(keys), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(keys, []byte(strings.Join(in.keys, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	keep := "0"
	if in.disk {
		keep = "1"
	}
	if err := c.script("start-ssh-host.sh", []string{"SSH_HOST_USER=" + in.user,
		"SSH_HOST_AUTHORIZED_KEYS=" + keys, "SSH_HOSTS_KEEP_STATE=" + keep}, in.ip); err != nil {
		return err
	}
	kv, err := sshhosts.ReadEnvFile(filepath.Join(c.hosts.State, "ssh-hosts", c.hosts.Name+"-"+lastOctet(in.ip), "info.env"))
	if err != nil {
		return err
	}
	hk, _, _, _, err := gossh.ParseAuthorizedKey([]byte(kv["SSH_HOST_PUBKEY"]))
	if err != nil {
		return fmt.Errorf("host key of %s: %v", in.ip, err)
	}
	if !in.booted && in.runcmd != "" {
		// cloud-init runs runcmd once, as root, at the first boot; its
		// failure leaves the instance running.
		out, err := c.runAsRoot(in.ip, hk, in.runcmd)
		c.logf("ec2hosts: runcmd of %s (%v):\n%s", id, err, out)
	}
	c.mu.Lock()
	in.booted, in.up, in.disk, in.hostKey = true, true, true, hk
	c.mu.Unlock()
	c.logf("ec2hosts: instance %s running: host %s up (user %s)", id, in.ip, in.user)
	return nil
}

// runAsRoot runs script on the host at ip with the host set's own key,
// which root accepts there (it is in the machine's /root, the lower layer
// of every host's /root).
func (c *Cloud) runAsRoot(ip string, hk gossh.PublicKey, script string) (string, error) {
	b, err := os.ReadFile(c.hosts.Key)
	if err != nil {
		return "", err
	}
	signer, err := gossh.ParsePrivateKey(b)
	if err != nil {
		return "", err
	}
	return Host{IP: ip, User: "root", HostKey: hk}.Run(signer, "bash -s <<'SKYGO_RUNCMD'\n"+script+"\nSKYGO_RUNCMD")
}

func (c *Cloud) down(id string, in *instance, purge bool) {
	args := []string{in.ip}
	if purge {
		args = append(args, "--purge")
	}
	err := c.script("stop-ssh-host.sh", nil, args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errs = append(c.errs, err)
	}
	in.up = false
	in.disk = !purge
	c.logf("ec2hosts: instance %s %s: host %s down", id, map[bool]string{false: "stopped", true: "terminated"}[purge], in.ip)
}

func lastOctet(ip string) string { return ip[strings.LastIndex(ip, ".")+1:] }

// script runs a testinfra script for the Cloud's host set.
func (c *Cloud) script(name string, env []string, args ...string) error {
	cmd := exec.Command("bash", append([]string{sshhosts.Script(name)}, args...)...)
	cmd.Env = append(sshhosts.Env(c.hosts.State, c.hosts.Name, c.hosts.Prefix, sshhosts.Options{}), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

var errNoKeys = errors.New("its user data authorizes no SSH key (cloud-config ssh_authorized_keys)")
