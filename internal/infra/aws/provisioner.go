package aws

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/provision"
)

// Tags SkyPilot puts on what it creates; the first finds a cluster's
// instances again.
const (
	tagCluster     = "ray-cluster-name"
	tagSkyCluster  = "skypilot-cluster-name"
	tagNodeType    = "ray-node-type"
	tagHead        = "skypilot-head-node"
	tagUser        = "skypilot-user"
	tagSkyPilot    = "skypilot"
	profileName    = "skypilot-v1"
	sgDescription  = "Auto-created security group for Ray workers"
	defaultSSHPort = 22
)

// ClusterInfo.Meta keys: what reaching the cluster again needs.
const (
	metaCloudName = "cloud_name"
	metaUser      = "ssh_user"
	metaInternal  = "use_internal_ips"
	metaSG        = "security_group"
	metaSGOwned   = "security_group_per_cluster"
	metaSpot      = "spot"
)

// Provisioner provisions in one region (and zone, when set).
type Provisioner struct {
	in     *Infra
	region string
	zone   string
}

func (p *Provisioner) where() string {
	if p.zone != "" {
		return Kind + "/" + p.region + "/" + p.zone
	}
	return Kind + "/" + p.region
}

// session is what one call needs: settings, client, names.
type session struct {
	s         settings
	cfg       aws.Config
	ec2       *ec2.Client
	cloudName string
}

func (p *Provisioner) session(ctx context.Context, cluster string) (*session, error) {
	s, err := p.in.settings()
	if err != nil {
		return nil, &provision.ConfigError{Where: p.where(), Err: err}
	}
	cfg, err := p.in.awsConfig(ctx, s, p.region)
	if err != nil {
		return nil, &provision.AuthError{Where: p.where(), Err: err}
	}
	return &session{s: s, cfg: cfg, ec2: awsx.EC2(cfg, p.region), cloudName: p.in.CloudName(cluster)}, nil
}

// classify turns an AWS error into the provision error the failover loop
// understands: bad credentials block all of AWS; anything else blocks
// the place tried, as SkyPilot does (it does not sort EC2 codes either).
func (p *Provisioner) classify(what string, err error) error {
	if err == nil {
		return nil
	}
	if awsx.CredentialCodes[awsx.Code(err)] {
		return &provision.AuthError{Where: p.where(), Msg: what + ": " + awsx.Message(err)}
	}
	if isProvisionError(err) || errors.Is(err, context.Canceled) {
		return err
	}
	return &provision.CapacityError{Where: p.where(), Msg: what + ": " + awsx.Message(err)}
}

func isProvisionError(err error) bool {
	var c *provision.CapacityError
	var a *provision.AuthError
	var cf *provision.ConfigError
	var ns *provision.NotSupportedError
	return errors.As(err, &c) || errors.As(err, &a) || errors.As(err, &cf) || errors.As(err, &ns)
}

// instances are the cluster's instances in the given states, sorted by
// launch order then id, with the head first.
func (ss *session) instances(ctx context.Context, states ...string) ([]types.Instance, error) {
	if len(states) == 0 {
		states = []string{"pending", "running", "stopping", "stopped"}
	}
	in := &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("tag:" + tagCluster), Values: []string{ss.cloudName}},
		{Name: aws.String("instance-state-name"), Values: states},
	}}
	var out []types.Instance
	pg := ec2.NewDescribeInstancesPaginator(ss.ec2, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		hi, hj := isHead(out[i]), isHead(out[j])
		if hi != hj {
			return hi
		}
		return aws.ToString(out[i].InstanceId) < aws.ToString(out[j].InstanceId)
	})
	return out, nil
}

func tagValue(inst types.Instance, key string) string {
	for _, t := range inst.Tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

func isHead(inst types.Instance) bool {
	return tagValue(inst, tagNodeType) == "head" || tagValue(inst, tagHead) == "1"
}

func ids(insts []types.Instance) []string {
	out := make([]string, len(insts))
	for i, x := range insts {
		out[i] = aws.ToString(x.InstanceId)
	}
	return out
}

func state(inst types.Instance) string {
	if inst.State == nil {
		return ""
	}
	return string(inst.State.Name)
}

// Provision implements provision.Provisioner in the spec's order: the
// cluster's existing instances are adopted (stopped ones started), the
// rest created, then all are waited for until SSH answers.
func (p *Provisioner) Provision(ctx context.Context, spec provision.ClusterSpec) (*provision.ClusterInfo, error) {
	ss, err := p.session(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	if err := p.checkQuota(ctx, ss, spec); err != nil {
		return nil, err
	}
	n := max(spec.NumNodes, 1)
	existing, err := ss.instances(ctx)
	if err != nil {
		return nil, p.classify("listing the cluster's instances", err)
	}
	if len(existing) > n {
		return nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf(
			"cluster %s has %d instances on EC2 (%s) but asks for %d. This is likely a resource leak. Use \"sky down\" to terminate the cluster.",
			spec.Name, len(existing), strings.Join(ids(existing), ", "), n)}
	}
	everUp := len(existing) > 0
	if err := p.resume(ctx, ss, existing); err != nil {
		return nil, err
	}
	sg, sgOwned := "", false
	if len(existing) == n && len(spec.Ports) > 0 {
		if err := p.openPortsOn(ctx, ss, spec, existing[0]); err != nil {
			return nil, err
		}
	}
	if missing := n - len(existing); missing > 0 {
		var made []string
		sg, sgOwned, made, err = p.create(ctx, ss, spec, missing, len(existing) == 0)
		if err == nil {
			err = p.dropDuplicates(ctx, ss, spec, existing, made)
		}
		if err != nil {
			// Nothing half-made is left behind for the next candidate;
			// a cluster that was up before is stopped, not destroyed.
			p.cleanupFailed(context.WithoutCancel(ctx), ss, spec.Name, everUp)
			return nil, err
		}
	}
	info, err := p.waitUp(ctx, ss, spec.Name, n, spec)
	if err != nil {
		p.cleanupFailed(context.WithoutCancel(ctx), ss, spec.Name, everUp)
		return nil, err
	}
	if sg != "" {
		info.Meta[metaSG] = sg
		if sgOwned {
			info.Meta[metaSGOwned] = "1"
		}
	}
	return info, nil
}

// dropDuplicates terminates the cluster's instances that are neither
// the ones it had nor the ones RunInstances answered with: a RunInstances
// whose answer was lost and that the SDK sent again (an EC2 without
// ClientToken idempotency, such as an emulator, makes the batch twice).
// Without this the wait for exactly n instances would never end.
func (p *Provisioner) dropDuplicates(ctx context.Context, ss *session, spec provision.ClusterSpec, existing []types.Instance, made []string) error {
	keep := map[string]bool{}
	for _, id := range append(ids(existing), made...) {
		keep[id] = true
	}
	all, err := ss.instances(ctx)
	if err != nil {
		return p.classify("listing the cluster's instances", err)
	}
	var extra []string
	for _, x := range all {
		if id := aws.ToString(x.InstanceId); !keep[id] {
			extra = append(extra, id)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	if spec.Log != nil {
		fmt.Fprintf(spec.Log, "Terminating %d duplicate instance(s) of %s (%s): a retried RunInstances made them.\n", len(extra), spec.Name, strings.Join(extra, ", "))
	}
	if _, err := ss.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: extra}); err != nil {
		return p.classify("terminating duplicate instances", err)
	}
	return nil
}

// cleanupFailed removes (or, for a cluster that was up before, stops)
// what a failed attempt made, so failover moves on with nothing billed.
func (p *Provisioner) cleanupFailed(ctx context.Context, ss *session, cluster string, stop bool) {
	if stop {
		_ = p.Stop(ctx, cluster)
		return
	}
	_ = p.Terminate(ctx, cluster)
}

// resume waits out stopping instances and starts the stopped ones.
func (p *Provisioner) resume(ctx context.Context, ss *session, existing []types.Instance) error {
	var stopping, stopped []string
	for _, x := range existing {
		switch state(x) {
		case "stopping":
			stopping = append(stopping, aws.ToString(x.InstanceId))
		case "stopped":
			stopped = append(stopped, aws.ToString(x.InstanceId))
		}
	}
	if len(stopping) > 0 {
		w := ec2.NewInstanceStoppedWaiter(ss.ec2, func(o *ec2.InstanceStoppedWaiterOptions) { o.MinDelay, o.MaxDelay = time.Second, 5*time.Second })
		if err := w.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: stopping}, 8*time.Minute); err != nil {
			return p.classify("waiting for stopping instances", err)
		}
		stopped = append(stopped, stopping...)
	}
	if len(stopped) == 0 {
		return nil
	}
	sort.Strings(stopped)
	if _, err := ss.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: stopped}); err != nil {
		return p.classify("starting the stopped instances", err)
	}
	return nil
}

// create makes the missing instances: network, security group, image,
// instance profile, then RunInstances subnet by subnet.
func (p *Provisioner) create(ctx context.Context, ss *session, spec provision.ClusterSpec, count int, fresh bool) (sg string, sgOwned bool, made []string, err error) {
	vpc, subnets, err := p.network(ctx, ss)
	if err != nil {
		return "", false, nil, err
	}
	sgID, sgName, owned, err := p.securityGroup(ctx, ss, spec, vpc)
	if err != nil {
		return "", false, nil, err
	}
	image, err := p.image(ctx, spec)
	if err != nil {
		return "", false, nil, err
	}
	profile, err := p.instanceProfile(ctx, ss, spec.Name)
	if err != nil {
		return "", false, nil, err
	}
	userData, err := p.userData(ss)
	if err != nil {
		return "", false, nil, err
	}
	user, _ := p.in.userTag()
	tags := []types.Tag{
		{Key: aws.String("Name"), Value: aws.String("sky-" + spec.Name + "-worker")},
		{Key: aws.String(tagCluster), Value: aws.String(ss.cloudName)},
		{Key: aws.String(tagSkyCluster), Value: aws.String(ss.cloudName)},
		{Key: aws.String(tagUser), Value: aws.String(user)},
		{Key: aws.String(tagNodeType), Value: aws.String("worker")},
		{Key: aws.String(tagHead), Value: aws.String("0")},
	}
	for _, lm := range []map[string]string{ss.s.Labels, spec.Labels} {
		keys := make([]string, 0, len(lm))
		for k := range lm {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !strings.HasPrefix(k, "aws:") {
				tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(lm[k])})
			}
		}
	}
	in := &ec2.RunInstancesInput{
		ImageId:      aws.String(image),
		InstanceType: types.InstanceType(spec.Resources.InstanceType),
		MinCount:     aws.Int32(int32(count)),
		MaxCount:     aws.Int32(int32(count)),
		UserData:     aws.String(base64.StdEncoding.EncodeToString([]byte(userData))),
		MetadataOptions: &types.InstanceMetadataOptionsRequest{
			HttpTokens: types.HttpTokensStateRequired,
		},
		BlockDeviceMappings: []types.BlockDeviceMapping{rootDisk(spec, ss.s.DiskEncrypted)},
		TagSpecifications:   []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: tags}},
		CapacityReservationSpecification: &types.CapacityReservationSpecification{
			CapacityReservationPreference: types.CapacityReservationPreferenceOpen,
		},
	}
	if profile != "" {
		if strings.HasPrefix(profile, "arn:") {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Arn: aws.String(profile)}
		} else {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(profile)}
		}
	}
	if spec.UseSpot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
	}
	var failures []string
	for _, sub := range subnets {
		in.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{{
			SubnetId: sub.SubnetId, DeviceIndex: aws.Int32(0), Groups: []string{sgID},
			AssociatePublicIpAddress: aws.Bool(!ss.s.UseInternalIPs),
		}}
		out, err := p.runInstances(ctx, ss, in)
		if err != nil {
			if awsx.CredentialCodes[awsx.Code(err)] {
				return "", false, nil, p.classify("RunInstances", err)
			}
			zone := aws.ToString(sub.AvailabilityZone)
			failures = append(failures, fmt.Sprintf("%s: %s", zone, awsx.Message(err)))
			if spec.Log != nil {
				fmt.Fprintf(spec.Log, "Failed to launch %d %s in %s: %s.\n", count, spec.Resources.InstanceType, zone, awsx.Message(err))
			}
			continue
		}
		if fresh && len(out.Instances) > 0 {
			first := aws.ToString(out.Instances[0].InstanceId)
			_, err := ss.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{first}, Tags: []types.Tag{
				{Key: aws.String("Name"), Value: aws.String("sky-" + spec.Name + "-head")},
				{Key: aws.String(tagNodeType), Value: aws.String("head")},
				{Key: aws.String(tagHead), Value: aws.String("1")},
			}})
			if err != nil {
				return "", false, nil, p.classify("tagging the head instance", err)
			}
		}
		for _, x := range out.Instances {
			made = append(made, aws.ToString(x.InstanceId))
		}
		return sgName, owned, made, nil
	}
	return "", false, nil, &provision.CapacityError{Where: p.where(), Msg: "Failed to launch instances: " + strings.Join(failures, "; ")}
}

// runInstances is RunInstances, retried while a just-made instance
// profile has not reached EC2 yet (IAM is eventually consistent; this
// replaces SkyPilot's fixed 15 s sleeps).
func (p *Provisioner) runInstances(ctx context.Context, ss *session, in *ec2.RunInstancesInput) (*ec2.RunInstancesOutput, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		// A token per call: the SDK's own retries of this call reuse it,
		// so EC2 makes the instances once even if an answer is lost.
		in.ClientToken = aws.String(clientToken())
		out, err := ss.ec2.RunInstances(ctx, in, awsx.FailFast)
		if err == nil || awsx.Code(err) != "InvalidParameterValue" || !strings.Contains(strings.ToLower(awsx.Message(err)), "iaminstanceprofile") || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// clientToken is a fresh RunInstances idempotency token (at most 64
// ASCII characters).
func clientToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "skygo-" + hex.EncodeToString(b)
}

// rootDisk is the root device mapping: disk_size GB of gp3, or the
// tier's type and IOPS.
func rootDisk(spec provision.ClusterSpec, encrypted bool) types.BlockDeviceMapping {
	size := spec.DiskSizeGB
	if size <= 0 {
		size = 256
	}
	ebs := &types.EbsBlockDevice{VolumeSize: aws.Int32(int32(size)), VolumeType: types.VolumeTypeGp3, Encrypted: aws.Bool(encrypted),
		DeleteOnTermination: aws.Bool(true)}
	iops := map[string]int32{"ultra": 20000, "high": 7000, "medium": 3500}[strings.ToLower(spec.DiskTier)]
	switch strings.ToLower(spec.DiskTier) {
	case "low":
		ebs.VolumeType = types.VolumeTypeStandard
	case "ultra":
		ebs.VolumeType = types.VolumeTypeIo2
		ebs.Iops = aws.Int32(iops)
	case "high", "medium":
		ebs.Iops = aws.Int32(iops)
		ebs.Throughput = aws.Int32(iops / 16)
	}
	return types.BlockDeviceMapping{DeviceName: aws.String("/dev/sda1"), Ebs: ebs}
}

// network picks the VPC (aws.vpc_name, else the region's default) and its
// usable subnets: available, in the requested zone, public unless
// aws.use_internal_ips (then private), sorted by zone.
func (p *Provisioner) network(ctx context.Context, ss *session) (string, []types.Subnet, error) {
	var vin ec2.DescribeVpcsInput
	what := "the default VPC"
	if ss.s.VPCName != "" {
		vin.Filters = []types.Filter{{Name: aws.String("tag:Name"), Values: []string{ss.s.VPCName}}}
		what = fmt.Sprintf("VPC %q (aws.vpc_name)", ss.s.VPCName)
	} else {
		vin.Filters = []types.Filter{{Name: aws.String("is-default"), Values: []string{"true"}}}
	}
	vpcs, err := ss.ec2.DescribeVpcs(ctx, &vin)
	if err != nil {
		return "", nil, p.classify("finding "+what, err)
	}
	if len(vpcs.Vpcs) == 0 {
		return "", nil, &provision.CapacityError{Where: p.where(), Msg: fmt.Sprintf("no %s in %s; create it or set aws.vpc_name", what, p.region)}
	}
	vpc := aws.ToString(vpcs.Vpcs[0].VpcId)
	sin := &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{vpc}},
		{Name: aws.String("state"), Values: []string{"available"}},
	}}
	if p.zone != "" {
		sin.Filters = append(sin.Filters, types.Filter{Name: aws.String("availability-zone"), Values: []string{p.zone}})
	}
	subs, err := ss.ec2.DescribeSubnets(ctx, sin)
	if err != nil {
		return "", nil, p.classify("listing the subnets of "+vpc, err)
	}
	var kept []types.Subnet
	for _, s := range subs.Subnets {
		public := aws.ToBool(s.MapPublicIpOnLaunch)
		if ss.s.UseInternalIPs == public && ss.s.VPCName == "" {
			// In the default VPC every subnet is public; internal IPs
			// then still work over a VPN or peering, as SkyPilot allows.
			if !ss.s.UseInternalIPs {
				continue
			}
		}
		kept = append(kept, s)
	}
	if len(kept) == 0 {
		where := p.region
		if p.zone != "" {
			where = p.zone
		}
		return "", nil, &provision.CapacityError{Where: p.where(), Msg: fmt.Sprintf("no usable subnet of %s in %s", vpc, where)}
	}
	sort.SliceStable(kept, func(i, j int) bool {
		return aws.ToString(kept[i].AvailabilityZone) > aws.ToString(kept[j].AvailabilityZone)
	})
	return vpc, kept, nil
}

// sgName is the security group's name: the user's (aws.security_group_name,
// first matching glob), else a per-cluster group when the task opens
// ports, else the shared per-user one.
func (p *Provisioner) sgName(ss *session, spec provision.ClusterSpec) (name string, userManaged bool, err error) {
	switch v := ss.s.SecurityGroup.(type) {
	case string:
		if v != "" {
			return v, true, nil
		}
	case []any:
		for i, item := range v {
			m, ok := item.(map[string]any)
			if !ok || len(m) != 1 {
				return "", false, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("aws.security_group_name[%d]: want {<cluster-name glob>: <group name>}", i)}
			}
			for glob, val := range m {
				if ok, _ := path.Match(glob, spec.Name); ok {
					return fmt.Sprint(val), true, nil
				}
			}
		}
	}
	if len(spec.Ports) > 0 {
		return "sky-sg-" + spec.Name, false, nil
	}
	user, h := p.in.userTag()
	return "sky-sg-" + user + "-" + h, false, nil
}

// securityGroup finds or creates the cluster's security group and gives
// a new one SkyPilot's rules: all traffic within the group, SSH from
// anywhere, and the task's ports.
func (p *Provisioner) securityGroup(ctx context.Context, ss *session, spec provision.ClusterSpec, vpc string) (id, name string, owned bool, err error) {
	name, userManaged, err := p.sgName(ss, spec)
	if err != nil {
		return "", "", false, err
	}
	find := func() (*types.SecurityGroup, error) {
		out, err := ss.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{
			{Name: aws.String("group-name"), Values: []string{name}},
			{Name: aws.String("vpc-id"), Values: []string{vpc}},
		}})
		if err != nil || len(out.SecurityGroups) == 0 {
			return nil, err
		}
		return &out.SecurityGroups[0], nil
	}
	g, err := find()
	if err != nil {
		return "", "", false, p.classify("finding security group "+name, err)
	}
	if g == nil && userManaged {
		return "", "", false, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("security group %q (aws.security_group_name) does not exist in %s", name, vpc)}
	}
	if g == nil {
		out, err := ss.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(name), Description: aws.String(sgDescription),
			VpcId: aws.String(vpc), TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSecurityGroup,
				Tags: []types.Tag{{Key: aws.String(tagSkyPilot), Value: aws.String("true")}}}}})
		if err != nil && awsx.Code(err) != "InvalidGroup.Duplicate" {
			return "", "", false, p.classify("creating security group "+name, err)
		}
		if out != nil && out.GroupId != nil {
			g = &types.SecurityGroup{GroupId: out.GroupId, GroupName: aws.String(name)}
		} else if g, err = find(); err != nil || g == nil {
			return "", "", false, p.classify("reading security group "+name, cmpErr(err, "it vanished after creation"))
		}
	}
	id = aws.ToString(g.GroupId)
	if userManaged {
		if len(spec.Ports) > 0 && spec.Log != nil {
			fmt.Fprintf(spec.Log, "Warning: the ports %s are not opened: security group %s is yours (aws.security_group_name).\n", strings.Join(spec.Ports, ","), name)
		}
		return id, name, false, nil
	}
	if len(g.IpPermissions) == 0 {
		perms := []types.IpPermission{
			{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(id)}}},
			{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(22), ToPort: aws.Int32(22), IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}},
		}
		if _, err := ss.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: perms}); err != nil &&
			awsx.Code(err) != "InvalidPermission.Duplicate" {
			return "", "", false, p.classify("authorizing the rules of "+name, err)
		}
	}
	if err := p.openPorts(ctx, ss, id, g.IpPermissions, spec.Ports); err != nil {
		return "", "", false, err
	}
	return id, name, len(spec.Ports) > 0, nil
}

// openPortsOn opens a relaunch's ports on the group of an existing
// cluster, when that group is the cluster's own; a shared or user group
// is left as it is, with a warning.
func (p *Provisioner) openPortsOn(ctx context.Context, ss *session, spec provision.ClusterSpec, head types.Instance) error {
	own := "sky-sg-" + spec.Name
	for _, g := range head.SecurityGroups {
		if aws.ToString(g.GroupName) != own {
			continue
		}
		out, err := ss.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{aws.ToString(g.GroupId)}})
		if err != nil {
			return p.classify("reading security group "+own, err)
		}
		var have []types.IpPermission
		if len(out.SecurityGroups) > 0 {
			have = out.SecurityGroups[0].IpPermissions
		}
		return p.openPorts(ctx, ss, aws.ToString(g.GroupId), have, spec.Ports)
	}
	if spec.Log != nil {
		fmt.Fprintf(spec.Log, "Warning: ports %s are not opened: cluster %s was launched without ports, in a shared security group; tear it down and launch it again to open them.\n",
			strings.Join(spec.Ports, ","), spec.Name)
	}
	return nil
}

func cmpErr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// openPorts authorizes the task's TCP ports from anywhere, minus the
// ranges the group already opens.
func (p *Provisioner) openPorts(ctx context.Context, ss *session, sgID string, have []types.IpPermission, ports []string) error {
	var perms []types.IpPermission
	for _, pr := range ports {
		from, to, err := portRange(pr)
		if err != nil {
			return &provision.ConfigError{Where: p.where(), Err: err}
		}
		if covered(have, from, to) {
			continue
		}
		perms = append(perms, types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(from), ToPort: aws.Int32(to),
			IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}})
	}
	if len(perms) == 0 {
		return nil
	}
	_, err := ss.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(sgID), IpPermissions: perms})
	if err != nil && awsx.Code(err) != "InvalidPermission.Duplicate" {
		return p.classify("opening ports "+strings.Join(ports, ","), err)
	}
	return nil
}

func portRange(s string) (int32, int32, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	a, err := strconv.Atoi(lo)
	if err != nil {
		return 0, 0, fmt.Errorf("port %q: want a number or a range like 8000-8010", s)
	}
	b := a
	if isRange {
		if b, err = strconv.Atoi(hi); err != nil {
			return 0, 0, fmt.Errorf("port %q: want a number or a range like 8000-8010", s)
		}
	}
	return int32(a), int32(b), nil
}

func covered(have []types.IpPermission, from, to int32) bool {
	for _, h := range have {
		if aws.ToString(h.IpProtocol) == "-1" && len(h.UserIdGroupPairs) == 0 {
			return true
		}
		if aws.ToString(h.IpProtocol) == "tcp" && aws.ToInt32(h.FromPort) <= from && aws.ToInt32(h.ToPort) >= to {
			for _, r := range h.IpRanges {
				if aws.ToString(r.CidrIp) == "0.0.0.0/0" {
					return true
				}
			}
		}
	}
	return false
}

// image is the AMI: the task's image_id (an AMI id or a skypilot: tag),
// else the catalog's Ubuntu image for CPU or GPU.
func (p *Provisioner) image(ctx context.Context, spec provision.ClusterSpec) (string, error) {
	id := spec.ImageID
	switch {
	case strings.HasPrefix(id, "docker:"):
		return "", &provision.NotSupportedError{Where: p.where(), Operation: "docker images",
			Msg: "running a task in a container on EC2 is not available in this build; use an AMI id as image_id"}
	case strings.HasPrefix(id, "ami-"):
		return id, nil
	}
	tags := []string{id}
	if id == "" {
		tags = defaultImageTags(spec.Resources)
	}
	if p.in.env.Catalog == nil {
		return "", &provision.ConfigError{Where: p.where(), Msg: "no image catalog to find " + tags[0] + " in"}
	}
	for _, tag := range tags {
		ami, found, err := p.in.env.Catalog().Image(ctx, Kind, tag, p.region)
		if err != nil {
			return "", &provision.ConfigError{Where: p.where(), Msg: "reading the AWS image catalog", Err: err}
		}
		if found {
			return ami, nil
		}
	}
	return "", &provision.CapacityError{Where: p.where(), Msg: fmt.Sprintf("image %s is not available in %s", tags[0], p.region)}
}

// defaultImageTags are the catalog tags of the default image, best
// first: SkyPilot's CUDA 13 GPU image falls back to its CUDA 12 one,
// which catalogs without the newer tag still have.
func defaultImageTags(r provision.Resources) []string {
	arm := ""
	if isArm(r.InstanceType) {
		arm = "-arm64"
	}
	if len(r.GPUs) == 0 {
		return []string{"skypilot:custom-cpu-ubuntu" + arm}
	}
	for g := range r.GPUs {
		switch strings.ToUpper(g) {
		case "V100", "M60":
			return []string{"skypilot:custom-gpu-ubuntu" + arm}
		case "K80":
			return []string{"skypilot:k80-ubuntu-2004"}
		}
	}
	return []string{"skypilot:custom-gpu-ubuntu" + arm + "-cuda13", "skypilot:custom-gpu-ubuntu" + arm}
}

// armFamily matches Graviton families (m6g, c7gn, r6gd, t4g, g5g, im4gn)
// and the original a1.
var armFamily = regexp.MustCompile(`^([a-z]+[0-9]+g[a-z]*|a1)$`)

func isArm(instanceType string) bool {
	family, _, _ := strings.Cut(instanceType, ".")
	return armFamily.MatchString(family)
}

// userData is the cloud-config that makes the SSH user with SkyGo's key
// (no EC2 key pair is used) and quiets apt's background upgrades.
func (p *Provisioner) userData(ss *session) (string, error) {
	_, pub, err := infra.ClientKey(p.in.env.Home)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("#cloud-config\nusers:\n  - default\n")
	fmt.Fprintf(&b, "  - name: %s\n    shell: /bin/bash\n    sudo: ALL=(ALL) NOPASSWD:ALL\n    ssh_authorized_keys:\n      - %s\n", ss.s.SSHUser, pub)
	b.WriteString("write_files:\n  - path: /etc/apt/apt.conf.d/20auto-upgrades\n    content: |\n")
	b.WriteString("      APT::Periodic::Update-Package-Lists \"0\";\n      APT::Periodic::Unattended-Upgrade \"0\";\n")
	if cmds := runCmds(ss.s.PostRunCmd); len(cmds) > 0 {
		b.WriteString("runcmd:\n")
		for _, c := range cmds {
			fmt.Fprintf(&b, "  - %s\n", strconv.Quote(c))
		}
	}
	return b.String(), nil
}

// runCmds reads aws.post_provision_runcmd: a string, or a list of strings
// or of argument lists.
func runCmds(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, item := range x {
			switch y := item.(type) {
			case string:
				out = append(out, y)
			case []any:
				words := make([]string, len(y))
				for i, w := range y {
					words[i] = provision.Quote(fmt.Sprint(w))
				}
				out = append(out, strings.Join(words, " "))
			}
		}
		return out
	}
	return nil
}

// waitUp waits until the cluster's n instances run and answer SSH, and
// describes them.
func (p *Provisioner) waitUp(ctx context.Context, ss *session, cluster string, n int, spec provision.ClusterSpec) (*provision.ClusterInfo, error) {
	deadline := time.Now().Add(10 * time.Minute)
	var insts []types.Instance
	for {
		var err error
		insts, err = ss.instances(ctx)
		if err != nil {
			return nil, p.classify("waiting for the instances", err)
		}
		running := 0
		for _, x := range insts {
			if state(x) == "running" {
				running++
			}
		}
		if running >= n && len(insts) == n {
			break
		}
		if time.Now().After(deadline) {
			return nil, &provision.CapacityError{Where: p.where(), Msg: fmt.Sprintf("%d of %d instances running after 10 minutes", running, n)}
		}
		if spec.Progress != nil {
			spec.Progress(fmt.Sprintf("waiting for EC2 instances (%d of %d running)", running, n))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	info := &provision.ClusterInfo{Name: cluster, Cloud: "AWS", Region: p.region, Meta: map[string]string{
		metaCloudName: ss.cloudName, metaUser: ss.s.SSHUser}}
	if ss.s.UseInternalIPs {
		info.Meta[metaInternal] = "1"
	}
	if spec.UseSpot {
		info.Meta[metaSpot] = "1"
	}
	size := spec.Resources
	if size.CPUs <= 0 && len(insts) > 0 {
		// A start knows no request: the instance type says the size.
		var err error
		if size, err = p.typeSize(ctx, ss, string(insts[0].InstanceType)); err != nil {
			return nil, err
		}
	}
	for i, x := range insts {
		if i == 0 && x.Placement != nil {
			info.Zone = aws.ToString(x.Placement.AvailabilityZone)
		}
		nd := provision.NodeInfo{Index: i, ID: aws.ToString(x.InstanceId), InternalIP: aws.ToString(x.PrivateIpAddress),
			CPUs: size.CPUs, MemoryGB: size.MemoryGB, GPUs: size.GPUs}
		if !ss.s.UseInternalIPs {
			nd.ExternalIP = aws.ToString(x.PublicIpAddress)
		}
		info.Nodes = append(info.Nodes, nd)
	}
	if err := p.waitSSH(ctx, info, spec); err != nil {
		return nil, err
	}
	return info, nil
}

// typeSize is what one instance of a type offers, from EC2 itself.
func (p *Provisioner) typeSize(ctx context.Context, ss *session, itype string) (provision.Resources, error) {
	out, err := ss.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(itype)}})
	if err != nil {
		return provision.Resources{}, p.classify("describing instance type "+itype, err)
	}
	if len(out.InstanceTypes) == 0 {
		return provision.Resources{}, &provision.ConfigError{Where: p.where(), Msg: "EC2 does not know instance type " + itype}
	}
	it := out.InstanceTypes[0]
	r := provision.Resources{InstanceType: itype}
	if it.VCpuInfo != nil {
		r.CPUs = float64(aws.ToInt32(it.VCpuInfo.DefaultVCpus))
	}
	if it.MemoryInfo != nil {
		r.MemoryGB = float64(aws.ToInt64(it.MemoryInfo.SizeInMiB)) / 1024
	}
	if it.GpuInfo != nil {
		for _, g := range it.GpuInfo.Gpus {
			if r.GPUs == nil {
				r.GPUs = map[string]float64{}
			}
			r.GPUs[aws.ToString(g.Name)] += float64(aws.ToInt32(g.Count))
		}
	}
	if r.CPUs <= 0 {
		return provision.Resources{}, &provision.ConfigError{Where: p.where(), Msg: "EC2 gives no vCPU count for instance type " + itype}
	}
	return r, nil
}

// waitSSH waits until every node accepts SkyGo's key (cloud-init has run)
// and records each node's home.
func (p *Provisioner) waitSSH(ctx context.Context, info *provision.ClusterInfo, spec provision.ClusterSpec) error {
	deadline := time.Now().Add(10 * time.Minute)
	rs, err := p.sshRunners(info)
	if err != nil {
		return err
	}
	for i, r := range rs {
		for {
			home, err := r.FetchHome(ctx)
			if err == nil {
				info.Nodes[i].Home = home
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Now().After(deadline) {
				return &provision.CapacityError{Where: p.where(), Msg: fmt.Sprintf("instance %s (%s) did not answer SSH within 10 minutes: %v",
					info.Nodes[i].ID, reachIP(info, info.Nodes[i]), err)}
			}
			if spec.Progress != nil {
				spec.Progress(fmt.Sprintf("waiting for SSH on instance %s", info.Nodes[i].ID))
			}
			p.in.dialer(info.Meta[metaCloudName]).Forget(r.Endpoint())
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// reachIP is the address SkyGo dials for a node.
func reachIP(info *provision.ClusterInfo, n provision.NodeInfo) string {
	if n.ExternalIP != "" && info.Meta[metaInternal] != "1" {
		return n.ExternalIP
	}
	return n.InternalIP
}

func (p *Provisioner) sshRunners(info *provision.ClusterInfo) ([]*ssh.Runner, error) {
	key, _, err := infra.ClientKey(p.in.env.Home)
	if err != nil {
		return nil, err
	}
	d := p.in.dialer(info.Meta[metaCloudName])
	out := make([]*ssh.Runner, len(info.Nodes))
	for i, n := range info.Nodes {
		addr := reachIP(info, n)
		if addr == "" || net.ParseIP(addr) == nil {
			return nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("instance %s has no address to reach", n.ID)}
		}
		ep := ssh.Endpoint{Name: n.ID, Addr: addr, Port: defaultSSHPort, User: info.Meta[metaUser], IdentityFiles: []string{key}}
		out[i] = ssh.NewRunner(d, ep, n.InternalIP, ssh.PgidDir(info.Name), n.Home)
	}
	return out, nil
}

// Runners implements provision.Provisioner.
func (p *Provisioner) Runners(info *provision.ClusterInfo) ([]provision.CommandRunner, error) {
	rs, err := p.sshRunners(info)
	if err != nil {
		return nil, err
	}
	out := make([]provision.CommandRunner, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out, nil
}

// Stop implements provision.Provisioner: StopInstances, without waiting.
// Spot instances cannot be stopped.
func (p *Provisioner) Stop(ctx context.Context, name string) error {
	ss, err := p.session(ctx, name)
	if err != nil {
		return err
	}
	insts, err := ss.instances(ctx, "pending", "running")
	if err != nil {
		return p.classify("listing the cluster's instances", err)
	}
	if len(insts) == 0 {
		return nil
	}
	for _, x := range insts {
		if x.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
			return &provision.NotSupportedError{Where: p.where(), Operation: "stopping spot instances",
				Msg: "spot instances cannot be stopped; tear the cluster down with `sky down`"}
		}
	}
	_, err = ss.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: ids(insts)})
	p.in.forgetConns(ss.cloudName)
	return p.classify("stopping the instances", err)
}

// forgetConns drops cached SSH connections (the hosts are going away)
// but keeps the known host keys: a started instance has the same keys.
func (in *Infra) forgetConns(cloudName string) {
	in.mu.Lock()
	d := in.dialers[cloudName]
	delete(in.dialers, cloudName)
	in.mu.Unlock()
	if d != nil {
		_ = d.Close()
	}
}

// Start implements provision.Provisioner: the resume path, then the wait.
func (p *Provisioner) Start(ctx context.Context, name string) (*provision.ClusterInfo, error) {
	ss, err := p.session(ctx, name)
	if err != nil {
		return nil, err
	}
	insts, err := ss.instances(ctx)
	if err != nil {
		return nil, p.classify("listing the cluster's instances", err)
	}
	if len(insts) == 0 {
		return nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("cluster %s has no instances left on EC2; launch it again", name)}
	}
	if err := p.resume(ctx, ss, insts); err != nil {
		return nil, err
	}
	spec := provision.ClusterSpec{Name: name, NumNodes: len(insts)}
	for _, x := range insts {
		spec.UseSpot = spec.UseSpot || x.InstanceLifecycle == types.InstanceLifecycleTypeSpot
	}
	return p.waitUp(ctx, ss, name, len(insts), spec)
}

// Terminate implements provision.Provisioner: every instance of the
// cluster, then its own security group once nothing uses it.
func (p *Provisioner) Terminate(ctx context.Context, name string) error {
	ss, err := p.session(ctx, name)
	if err != nil {
		return err
	}
	insts, err := ss.instances(ctx)
	if err != nil {
		return p.classify("listing the cluster's instances", err)
	}
	p.in.forget(ss.cloudName)
	if len(insts) > 0 {
		if _, err := ss.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids(insts)}); err != nil {
			return p.classify("terminating the instances", err)
		}
		if err := p.cancelSpotRequests(ctx, ss, insts); err != nil {
			return err
		}
	}
	return p.deleteClusterSG(ctx, ss, name, insts)
}

// cancelSpotRequests cancels the one-time spot requests behind spot
// instances, so that nothing of the cluster is left on the account.
func (p *Provisioner) cancelSpotRequests(ctx context.Context, ss *session, insts []types.Instance) error {
	var reqs []string
	for _, x := range insts {
		if r := aws.ToString(x.SpotInstanceRequestId); r != "" {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	_, err := ss.ec2.CancelSpotInstanceRequests(ctx, &ec2.CancelSpotInstanceRequestsInput{SpotInstanceRequestIds: reqs})
	if awsx.Code(err) == "InvalidSpotInstanceRequestID.NotFound" {
		err = nil
	}
	return p.classify("cancelling the spot requests", err)
}

// deleteClusterSG removes the per-cluster group sky-sg-<cluster> that
// SkyGo made (tagged skypilot=true), once its instances are gone.
func (p *Provisioner) deleteClusterSG(ctx context.Context, ss *session, cluster string, insts []types.Instance) error {
	name := "sky-sg-" + cluster
	out, err := ss.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{
		{Name: aws.String("group-name"), Values: []string{name}},
		{Name: aws.String("tag:" + tagSkyPilot), Values: []string{"true"}},
	}})
	if err != nil {
		return p.classify("finding security group "+name, err)
	}
	if len(out.SecurityGroups) == 0 {
		return nil
	}
	if len(insts) > 0 {
		w := ec2.NewInstanceTerminatedWaiter(ss.ec2, func(o *ec2.InstanceTerminatedWaiterOptions) { o.MinDelay, o.MaxDelay = time.Second, 5*time.Second })
		if err := w.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids(insts)}, 10*time.Minute); err != nil {
			return p.classify("waiting for the instances to terminate", err)
		}
	}
	for _, g := range out.SecurityGroups {
		for try := 0; ; try++ {
			_, err := ss.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: g.GroupId})
			if err == nil || awsx.Code(err) == "InvalidGroup.NotFound" {
				break
			}
			if awsx.Code(err) != "DependencyViolation" || try >= 6 {
				return p.classify("deleting security group "+name, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}

// Query implements provision.Provisioner: EC2's instance states, as
// SkyPilot maps them.
func (p *Provisioner) Query(ctx context.Context, name string) ([]provision.NodeState, error) {
	ss, err := p.session(ctx, name)
	if err != nil {
		return nil, err
	}
	// Terminated instances stay listed for a while: one gone among live
	// ones is a node lost, all gone is a cluster gone.
	insts, err := ss.instances(ctx, "pending", "running", "stopping", "stopped", "shutting-down", "terminated")
	if err != nil {
		return nil, p.classify("listing the cluster's instances", err)
	}
	live := 0
	var first time.Time
	for _, x := range insts {
		if st := state(x); st != "shutting-down" && st != "terminated" {
			live++
			if t := aws.ToTime(x.LaunchTime); first.IsZero() || t.Before(first) {
				first = t
			}
		}
	}
	if live == 0 {
		return nil, nil
	}
	// A gone instance launched well before the live ones belongs to an
	// earlier cluster of the same name, not to this one.
	kept := insts[:0]
	for _, x := range insts {
		if st := state(x); (st == "shutting-down" || st == "terminated") && aws.ToTime(x.LaunchTime).Before(first.Add(-time.Minute)) {
			continue
		}
		kept = append(kept, x)
	}
	insts = kept
	out := make([]provision.NodeState, 0, len(insts))
	for i, x := range insts {
		st := provision.NodeTerminated
		switch state(x) {
		case "pending":
			st = provision.NodePending
		case "running":
			st = provision.NodeUp
		case "stopping":
			st = provision.NodeStopping
		case "stopped":
			st = provision.NodeStopped
		}
		out = append(out, provision.NodeState{Index: i, ID: aws.ToString(x.InstanceId), Status: st})
	}
	return out, nil
}
