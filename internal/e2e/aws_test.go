package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/testutil/ec2hosts"
	"github.com/skygo/skygo/internal/testutil/mototest"
)

// AWS end to end, against moto (internal/testutil/ec2hosts): the server
// makes its EC2 calls to moto through AWS_ENDPOINT_URL, and every
// instance moto launches in the test VPC becomes a namespace SSH host at
// the instance's private IP, with the user and key of its cloud-config.
// So launch -> bootstrap over SSH -> setup -> run -> logs -> down runs on
// "EC2" for real; only the test's own hosts are ever dialled.

// awsType is a small x86 type of the test catalog's us-east-1.
const awsType = "c3.large"

// awsEnv is a server pointed at a fresh Cloud, with aws.vpc_name set to
// its VPC and private IPs used (moto's public ones belong to nobody).
func awsEnv(t testing.TB, zones ...string) (*skyEnv, *ec2hosts.Cloud) {
	t.Helper()
	if len(zones) == 0 {
		zones = []string{"us-east-1a"}
	}
	c := ec2hosts.Start(t, ec2hosts.Options{Zones: zones})
	e := newEnv(t)
	e.env = append(e.env, c.Env()...)
	e.writeConfig(t, fmt.Sprintf("aws:\n  vpc_name: %s\n  use_internal_ips: true\n", c.VPCName))
	return e, c
}

func (e *skyEnv) writeConfig(t testing.TB, body string) {
	t.Helper()
	p := filepath.Join(e.home, ".sky", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// clusterInstances are the instances moto holds for a cluster (by its
// skypilot-cluster-name tag prefix), in any state but terminated.
func clusterInstances(t testing.TB, cl *ec2.Client, cluster string) []types.Instance {
	t.Helper()
	out, err := cl.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []types.Instance
	for _, r := range out.Reservations {
		for _, x := range r.Instances {
			for _, tg := range x.Tags {
				if aws.ToString(tg.Key) == "skypilot-cluster-name" && strings.HasPrefix(aws.ToString(tg.Value), cluster+"-") {
					got = append(got, x)
				}
			}
		}
	}
	sort.Slice(got, func(i, j int) bool {
		return aws.ToString(got[i].PrivateIpAddress) < aws.ToString(got[j].PrivateIpAddress)
	})
	return got
}

func tagOf(x types.Instance, key string) string {
	for _, tg := range x.Tags {
		if aws.ToString(tg.Key) == key {
			return aws.ToString(tg.Value)
		}
	}
	return ""
}

func securityGroups(t testing.TB, cl *ec2.Client, name string) []types.SecurityGroup {
	t.Helper()
	out, err := cl.DescribeSecurityGroups(context.Background(), &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{
		{Name: aws.String("group-name"), Values: []string{name}}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.SecurityGroups
}

// TestAWSCluster walks a 2-node EC2 cluster through a user's story:
// check, launch with a port, the instances' tags and group, the run on
// both nodes, exec, logs, ssh, status -r after a stop and a terminate
// behind SkyGo's back, stop/start through SkyGo, down leaving nothing.
func TestAWSCluster(t *testing.T) {
	// One at a time with the other EC2 tests: the emulation's instances are one set of sshd hosts per machine (ec2hosts).
	ec2Harness.parallel(t)
	e, c := awsEnv(t)
	cl := awsx.EC2(c.Config(t, "us-east-1"), "us-east-1")

	r := e.must("check", "aws", "-v")
	if !strings.Contains(r.out(), "AWS: enabled") || !strings.Contains(r.out(), "account 123456789012") {
		t.Fatalf("sky check aws did not verify the credentials with STS:\n%s", r)
	}

	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "code.txt"), []byte("from-workdir"), 0o644); err != nil {
		t.Fatal(err)
	}
	task := e.writeYAML(t, "two.yaml", `num_nodes: 2
resources:
  infra: aws/us-east-1
  instance_type: `+awsType+`
  ports: 8080
workdir: `+wd+`
file_mounts:
  ~/mounted/code.txt: `+filepath.Join(wd, "code.txt")+`
setup: echo setup-on-$(hostname)
run: |
  echo "W rank=$SKYPILOT_NODE_RANK $(cat code.txt) $(cat ~/mounted/code.txt)"
  echo "R rank=$SKYPILOT_NODE_RANK ips=$(echo $SKYPILOT_NODE_IPS | tr ' ' ,) user=$(whoami) cloud=$(echo $SKYPILOT_CLUSTER_INFO | tr -d ' ' | grep -o '"cloud":"[A-Za-z]*"')"
`)
	r = e.launchOK(t, "-c", "ec", task)
	insts := clusterInstances(t, cl, "ec")
	if len(insts) != 2 {
		t.Fatalf("want 2 instances on EC2, got %d", len(insts))
	}
	var heads, ips []string
	profiles := 0
	for _, x := range insts {
		ips = append(ips, aws.ToString(x.PrivateIpAddress))
		if tagOf(x, "ray-node-type") == "head" && tagOf(x, "skypilot-head-node") == "1" && strings.HasSuffix(tagOf(x, "Name"), "-head") {
			heads = append(heads, aws.ToString(x.PrivateIpAddress))
		}
		if !strings.HasPrefix(tagOf(x, "ray-cluster-name"), "ec-") || tagOf(x, "skypilot-user") == "" || string(x.InstanceType) != awsType {
			t.Errorf("instance %s: tags %v, type %s", aws.ToString(x.InstanceId), x.Tags, x.InstanceType)
		}
		// moto 5.2.1 records the instance profile of a RunInstances on its
		// first instance only.
		if x.IamInstanceProfile != nil && strings.Contains(aws.ToString(x.IamInstanceProfile.Arn), "skypilot-v1") {
			profiles++
		}
	}
	if profiles == 0 {
		t.Errorf("no instance has the skypilot-v1 instance profile")
	}
	if len(heads) != 1 {
		t.Errorf("want exactly one head-tagged instance, got %v", heads)
	}
	sgs := securityGroups(t, cl, "sky-sg-ec")
	if len(sgs) != 1 {
		t.Fatalf("want the cluster's own security group sky-sg-ec, got %d", len(sgs))
	}
	opened := false
	for _, p := range sgs[0].IpPermissions {
		if aws.ToInt32(p.FromPort) == 8080 && aws.ToInt32(p.ToPort) == 8080 {
			opened = true
		}
	}
	if !opened {
		t.Errorf("port 8080 is not opened in sky-sg-ec: %+v", sgs[0].IpPermissions)
	}
	for _, want := range []string{"W rank=0 from-workdir from-workdir", "W rank=1 from-workdir from-workdir", "R rank=0", "R rank=1", "ips=" + heads[0], "user=ubuntu", `cloud="cloud":"AWS"`, "setup-on-"} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("the launch's output lacks %q:\n%s", want, r.out())
		}
	}
	if !strings.Contains(r.out(), ","+ips[0]) && !strings.Contains(r.out(), ","+ips[1]) {
		t.Errorf("SKYPILOT_NODE_IPS does not list both private IPs %v:\n%s", ips, r.out())
	}

	st := e.status(false)
	if len(st) != 1 || st["ec"].Status != "UP" {
		t.Fatalf("sky status after the launch: %+v", st)
	}
	x := e.must("exec", "ec", "--", "echo exec-on-$(hostname)")
	if !strings.Contains(x.out(), "exec-on-") {
		t.Errorf("sky exec:\n%s", x)
	}
	if l := e.must("logs", "ec", "1", "--no-follow"); !strings.Contains(l.out(), "R rank=1") {
		t.Errorf("sky logs ec 1:\n%s", l)
	}
	// A long job is cancelled: nothing of it is left on the nodes.
	e.must("exec", "-d", "ec", "--", "sleep 300 # aws-cancel-me")
	e.must("cancel", "-y", "ec", "3")
	if q := e.must("queue", "ec"); !strings.Contains(q.out(), "CANCELLED") {
		t.Errorf("sky queue after cancel:\n%s", q)
	}
	gen := filepath.Join(paths.GeneratedSSH(e.home), "ec")
	for _, alias := range []string{"ec", "ec-worker1"} {
		sr := runCmd(t, 60*time.Second, e.env, "ssh", "-F", gen, "-o", "BatchMode=yes", alias, "pgrep -f aws-cancel-[m]e || echo none-left")
		if !strings.Contains(sr.stdout, "none-left") {
			t.Errorf("%s after sky cancel: %s", alias, sr)
		}
	}
	if sr := runCmd(t, 60*time.Second, e.env, "ssh", "-F", gen, "-o", "BatchMode=yes", "ec", "echo ssh-$(whoami)"); sr.code != 0 || !strings.Contains(sr.stdout, "ssh-ubuntu") {
		t.Errorf("ssh ec: %s", sr)
	}

	// Stopped behind SkyGo's back: status -r sees it.
	if _, err := cl.StopInstances(context.Background(), &ec2.StopInstancesInput{InstanceIds: instanceIDs(insts)}); err != nil {
		t.Fatal(err)
	}
	if st := e.status(true); len(st) != 1 || st["ec"].Status != "STOPPED" {
		t.Errorf("sky status -r after StopInstances behind SkyGo's back: %+v", st)
	}
	// sky start brings it back (the hosts keep their disks).
	e.must("start", "-y", "ec")
	for _, x := range insts {
		c.WaitUp(t, aws.ToString(x.InstanceId), 30*time.Second)
	}
	if x := e.must("exec", "ec", "--", "echo again-$SKYPILOT_NODE_RANK"); !strings.Contains(x.out(), "again-0") {
		t.Errorf("exec after sky start:\n%s", x)
	}
	// sky stop makes StopInstances; the instances stop.
	e.must("stop", "-y", "ec")
	if st := e.status(true); len(st) != 1 || st["ec"].Status != "STOPPED" {
		t.Errorf("sky status -r after sky stop: %+v", st)
	}
	for _, x := range clusterInstances(t, cl, "ec") {
		if s := string(x.State.Name); s != "stopping" && s != "stopped" {
			t.Errorf("instance %s is %s after sky stop", aws.ToString(x.InstanceId), s)
		}
	}
	e.must("start", "-y", "ec")

	// Terminated behind SkyGo's back: the cluster is gone for status -r.
	if _, err := cl.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: instanceIDs(insts)}); err != nil {
		t.Fatal(err)
	}
	if st := e.status(true); len(st) != 0 {
		t.Errorf("sky status -r after TerminateInstances behind SkyGo's back: %+v", st)
	}

	// Launched again and torn down by SkyGo: nothing is left on EC2.
	e.launchOK(t, "-c", "ec", task)
	e.must("down", "-y", "ec")
	if left := clusterInstances(t, cl, "ec"); len(left) != 0 {
		t.Errorf("instances left after sky down: %v", instanceIDs(left))
	}
	if left := securityGroups(t, cl, "sky-sg-ec"); len(left) != 0 {
		t.Errorf("security group sky-sg-ec left after sky down")
	}
}

// TestAWSLostRunInstancesAnswer: the network drops RunInstances' answer
// after EC2 (moto, which has no ClientToken idempotency) made the
// instances, and the SDK sends the call again: the launch terminates the
// duplicates it did not hear of and comes up with its 2 nodes, rather
// than waiting for 2 instances while there are 4.
func TestAWSLostRunInstancesAnswer(t *testing.T) {
	// One at a time with the other EC2 tests: the emulation's instances are one set of sshd hosts per machine (ec2hosts).
	ec2Harness.parallel(t)
	e, c := awsEnv(t)
	cl := awsx.EC2(c.Config(t, "us-east-1"), "us-east-1")
	c.LoseRunInstancesAnswers(1)
	r := e.launchOK(t, "-c", "lost", "--num-nodes", "2", "--infra", "aws/us-east-1", "--instance-type", awsType, "--", "echo ran-$SKYPILOT_NODE_RANK")
	if c.LostAnswers() != 1 {
		t.Fatalf("the harness dropped %d answers, want 1", c.LostAnswers())
	}
	if !strings.Contains(r.out(), "Terminating 2 duplicate instance(s)") || !strings.Contains(r.out(), "ran-0") || !strings.Contains(r.out(), "ran-1") {
		t.Errorf("launch output:\n%s", r.out())
	}
	live := 0
	for _, x := range clusterInstances(t, cl, "lost") {
		if x.State != nil && (x.State.Name == types.InstanceStateNameRunning || x.State.Name == types.InstanceStateNamePending) {
			live++
		}
	}
	if live != 2 {
		t.Errorf("%d live instances after the launch, want 2", live)
	}
	e.must("down", "-y", "lost")
}

func instanceIDs(insts []types.Instance) []string {
	out := make([]string, len(insts))
	for i, x := range insts {
		out[i] = aws.ToString(x.InstanceId)
	}
	return out
}

// TestAWSFailover: a zone out of capacity is skipped for the next one,
// saying why; with every zone out the launch moves to the next candidate
// (here the local infrastructure). A spot cluster cannot be stopped, and
// its down cancels its spot request.
func TestAWSFailover(t *testing.T) {
	// One at a time with the other EC2 tests: the emulation's instances are one set of sshd hosts per machine (ec2hosts).
	ec2Harness.parallel(t)
	e, c := awsEnv(t, "us-east-1a", "us-east-1b")
	cl := awsx.EC2(c.Config(t, "us-east-1"), "us-east-1")

	// Zones are tried in descending order: b first.
	c.FailCapacity("us-east-1b")
	r := e.launchOK(t, "-c", "fo", "--infra", "aws/us-east-1", "--instance-type", awsType, "--", "echo ran-here")
	if !strings.Contains(r.out(), "us-east-1b: InsufficientInstanceCapacity") {
		t.Errorf("the launch does not say why us-east-1b was skipped:\n%s", r.out())
	}
	insts := clusterInstances(t, cl, "fo")
	if len(insts) != 1 || aws.ToString(insts[0].Placement.AvailabilityZone) != "us-east-1a" || !strings.Contains(r.out(), "ran-here") {
		t.Fatalf("want the instance in us-east-1a and the run done; got %d instances:\n%s", len(insts), r.out())
	}
	e.must("down", "-y", "fo")

	// Every zone out: the next candidate of ordered is tried.
	c.FailCapacity("us-east-1a", "us-east-1b")
	task := e.writeYAML(t, "ordered.yaml", `resources:
  ordered:
    - infra: aws/us-east-1
      instance_type: `+awsType+`
    - infra: local
run: echo ran-on-$SKYPILOT_CLUSTER_INFO
`)
	r = e.launchOK(t, "-c", "fl", task)
	if !strings.Contains(r.out(), "No capacity on aws/us-east-1") || !strings.Contains(r.out(), "InsufficientInstanceCapacity") {
		t.Errorf("the launch does not say why AWS was left:\n%s", r.out())
	}
	if st := e.status(false); len(st) != 1 || st["fl"].Cloud == nil || !strings.EqualFold(*st["fl"].Cloud, "local") {
		t.Errorf("want the cluster on the local infrastructure: %+v", st)
	}
	if left := clusterInstances(t, cl, "fl"); len(left) != 0 {
		t.Errorf("instances left behind by the failed attempts: %v", instanceIDs(left))
	}
	e.must("down", "-y", "fl")

	// Spot: the instance is spot, stop is refused, down cancels the request.
	c.FailCapacity()
	e.launchOK(t, "-c", "sp", "--infra", "aws/us-east-1", "--instance-type", awsType, "--use-spot", "--", "true")
	insts = clusterInstances(t, cl, "sp")
	if len(insts) != 1 || insts[0].InstanceLifecycle != types.InstanceLifecycleTypeSpot {
		t.Fatalf("want one spot instance, got %+v", insts)
	}
	if s := e.exec(cmdTimeout, nil, "stop", "-y", "sp"); !strings.Contains(s.out(), "spot instances cannot be stopped") {
		t.Errorf("sky stop of a spot cluster must be refused, saying why:\n%s", s)
	}
	e.must("down", "-y", "sp")
	reqs, err := cl.DescribeSpotInstanceRequests(context.Background(), &ec2.DescribeSpotInstanceRequestsInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range reqs.SpotInstanceRequests {
		if st := string(q.State); st == "open" || st == "active" {
			t.Errorf("spot request %s is still %s after sky down", aws.ToString(q.SpotInstanceRequestId), st)
		}
	}
}

// BenchmarkAWSLaunch: `sky launch` of a 1-node task on "EC2" (moto and a
// namespace host started at the instance's address once moto says it
// runs), from no cluster to SUCCEEDED, against the same launch on an SSH
// node pool in the same run (down outside the timer). The difference is
// the EC2 calls, the wait for the host (the emulator's "boot", its
// watcher polling every 250 ms) and the first bootstrap of a new host.
func BenchmarkAWSLaunch(b *testing.B) {
	e, _ := awsEnv(b)
	h := sshPoolHosts(b)
	h.writePool(b, e)
	e.must("ssh", "up")
	var sum, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("ba%d", i)
		sum += timeRun(b, e.env, "hi-aws", e.bin, "launch", "-y", "-c", name, "--infra", "aws/us-east-1", "--instance-type", awsType, "--", "echo hi-aws")
		b.StopTimer()
		e.must("down", "-y", name)
		b.StartTimer()
		pool := fmt.Sprintf("bp%d", i)
		base += timeRun(b, e.env, "hi-ssh", e.bin, "launch", "-y", "-c", pool, "--infra", "ssh/"+e2ePool, "--", "echo hi-ssh")
		b.StopTimer()
		e.must("down", "-y", pool)
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "aws-launch", sum, base, b.N)
}

// TestAWSManagedJobRecovers: a managed spot job on EC2 whose instance is
// terminated behind SkyGo's back (a spot preemption) is relaunched on a
// new instance and ends SUCCEEDED with one recovery; nothing of it is
// left on EC2 afterwards.
func TestAWSManagedJobRecovers(t *testing.T) {
	// One at a time with the other EC2 tests: the emulation's instances are one set of sshd hosts per machine (ec2hosts).
	ec2Harness.parallel(t)
	// Spot is priced per zone; the test catalog sells c3.large spot in b.
	e, c := awsEnv(t, "us-east-1b")
	e.env = append(e.env, "SKYGO_JOBS_RETRY_GAP=1s")
	cl := awsx.EC2(c.Config(t, "us-east-1"), "us-east-1")
	// The hosts share /var/tmp: the first run leaves a file there and
	// runs long (it is cut off), the second finds it and ends soon.
	first := filepath.Join("/var/tmp", "skygo-e2e-awsrec-"+filepath.Base(e.home))
	t.Cleanup(func() { os.Remove(first) })
	e.must("jobs", "launch", "-y", "-d", "-n", "awsrec", "--infra", "aws/us-east-1", "--instance-type", awsType, "--use-spot",
		"--", fmt.Sprintf(`if [ -e %[1]s ]; then sleep 2; else touch %[1]s; sleep 300; fi; echo done`, first))
	var q map[int]mjob
	if !waitFor(90*time.Second, func() bool { q = e.queueByID(); return q[1].Status == "RUNNING" }) {
		t.Fatalf("job 1 not RUNNING after 90s: %v\n%s", q[1], e.controllerLog(1))
	}
	var orig []types.Instance
	if !waitFor(10*time.Second, func() bool { orig = clusterInstances(t, cl, "awsrec"); return len(orig) == 1 }) {
		t.Fatalf("want the job's one instance, got %d", len(orig))
	}
	// Preempted: the instance goes, its host with it.
	if _, err := cl.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: instanceIDs(orig)}); err != nil {
		t.Fatal(err)
	}
	var second []types.Instance
	if !waitFor(90*time.Second, func() bool {
		second = clusterInstances(t, cl, "awsrec")
		return len(second) == 1 && aws.ToString(second[0].InstanceId) != aws.ToString(orig[0].InstanceId)
	}) {
		t.Fatalf("no new instance 90s after the preemption: %v\n%s", e.queueByID()[1], e.controllerLog(1))
	}
	host := c.WaitUp(t, aws.ToString(second[0].InstanceId), 60*time.Second)
	t.Logf("recovered onto %s (%s)", aws.ToString(second[0].InstanceId), host.IP)
	if !waitFor(120*time.Second, func() bool { q = e.queueByID(); return ended(q[1]) }) {
		t.Fatalf("job 1 did not end after its recovery: %v\n%s", q[1], e.controllerLog(1))
	}
	if q[1].Status != "SUCCEEDED" || q[1].RecoveryCount != 1 {
		t.Errorf("want SUCCEEDED with 1 recovery, got %v\n%s", q[1], e.controllerLog(1))
	}
	if left := clusterInstances(t, cl, "awsrec"); len(left) != 0 {
		t.Errorf("instances left after the managed job ended: %v", instanceIDs(left))
	}
}

// TestAWSBucketsOnInstances: buckets on "EC2" nodes. Under
// aws.remote_identity: LOCAL_CREDENTIALS the instances get the server's
// credentials (mode 0600, with the endpoint), a COPY bucket from a local
// source is on both nodes, and a MOUNT bucket is mounted on both: what
// one node writes there is in S3. Without that setting nothing is
// copied to the nodes.
func TestAWSBucketsOnInstances(t *testing.T) {
	// One at a time with the other EC2 tests: the emulation's instances are one set of sshd hosts per machine (ec2hosts).
	ec2Harness.parallel(t)
	e, c := awsEnv(t)
	e.writeConfig(t, fmt.Sprintf("aws:\n  vpc_name: %s\n  use_internal_ips: true\n  remote_identity: LOCAL_CREDENTIALS\n", c.VPCName))
	s3c := awsx.S3(c.Config(t, "us-east-1"), "us-east-1")
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "data.txt"), []byte("bucket-data"), 0o644); err != nil {
		t.Fatal(err)
	}
	suffix := strings.ToLower(filepath.Base(e.home))
	suffix = strings.NewReplacer("_", "-").Replace(suffix)
	cp, mnt := "e2e-ec2-copy-"+suffix, "e2e-ec2-mount-"+suffix
	task := e.writeYAML(t, "buckets.yaml", `num_nodes: 2
resources:
  infra: aws/us-east-1
  instance_type: `+awsType+`
file_mounts:
  /home/ubuntu/cp:
    name: `+cp+`
    source: `+src+`
    mode: COPY
  /home/ubuntu/mnt:
    name: `+mnt+`
    source: `+src+`
    mode: MOUNT
run: |
  echo "B rank=$SKYPILOT_NODE_RANK cp=$(cat ~/cp/data.txt) mnt=$(cat ~/mnt/data.txt) creds=$(stat -c %a ~/.aws/credentials)"
  echo from-rank-$SKYPILOT_NODE_RANK > ~/mnt/written-$SKYPILOT_NODE_RANK.txt
`)
	r := e.launchOK(t, "-c", "bk", task)
	for _, want := range []string{"B rank=0 cp=bucket-data mnt=bucket-data creds=600", "B rank=1 cp=bucket-data mnt=bucket-data creds=600"} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("the run lacks %q:\n%s", want, r.out())
		}
	}
	if strings.Contains(r.out(), mototest.Secret+"\n") || strings.Contains(r.out(), "aws_secret_access_key") {
		t.Errorf("the launch output shows the credentials:\n%s", r.out())
	}
	var keys []string
	if !waitFor(30*time.Second, func() bool {
		keys = bucketKeys(t, s3c, mnt)
		return slices.Contains(keys, "written-0.txt") && slices.Contains(keys, "written-1.txt")
	}) {
		t.Errorf("what the nodes wrote through the mount is not in S3: %v", keys)
	}
	e.must("down", "-y", "bk")
	e.must("storage", "delete", "-y", cp, mnt)
	if bucketExists(s3c, cp) || bucketExists(s3c, mnt) {
		t.Errorf("sky storage delete left a bucket")
	}
}

// TestAWSManagedJobResumesFromBucket: a managed spot job checkpoints to a
// MOUNT_CACHED bucket; its instance is terminated behind SkyGo's back
// once the checkpoint is in S3; the recovery on a new instance (a fresh
// disk) mounts the bucket again and resumes from the checkpoint.
func TestAWSManagedJobResumesFromBucket(t *testing.T) {
	// One at a time with the other EC2 tests: the emulation's instances are one set of sshd hosts per machine (ec2hosts).
	ec2Harness.parallel(t)
	e, c := awsEnv(t, "us-east-1b")
	e.env = append(e.env, "SKYGO_JOBS_RETRY_GAP=1s")
	e.writeConfig(t, fmt.Sprintf("aws:\n  vpc_name: %s\n  use_internal_ips: true\n  remote_identity: LOCAL_CREDENTIALS\n", c.VPCName))
	cl := awsx.EC2(c.Config(t, "us-east-1"), "us-east-1")
	s3c := awsx.S3(c.Config(t, "us-east-1"), "us-east-1")
	bucket := "e2e-ckpt-" + strings.ToLower(strings.ReplaceAll(filepath.Base(e.home), "_", "-"))
	task := e.writeYAML(t, "ckpt.yaml", `name: ckpt
resources:
  infra: aws/us-east-1
  instance_type: `+awsType+`
  use_spot: true
file_mounts:
  /home/ubuntu/ckpt:
    name: `+bucket+`
    mode: MOUNT_CACHED
run: |
  if [ -e ~/ckpt/step ]; then echo "resumed from $(cat ~/ckpt/step)"; exit 0; fi
  echo epoch-7 > ~/ckpt/step
  sleep 300
`)
	e.must("jobs", "launch", "-y", "-d", task)
	var q map[int]mjob
	if !waitFor(90*time.Second, func() bool { q = e.queueByID(); return q[1].Status == "RUNNING" }) {
		t.Fatalf("job 1 not RUNNING after 90s: %v\n%s", q[1], e.controllerLog(1))
	}
	if !waitFor(60*time.Second, func() bool { return slices.Contains(bucketKeys(t, s3c, bucket), "step") }) {
		t.Fatalf("the checkpoint never reached S3: %v\n%s", bucketKeys(t, s3c, bucket), e.controllerLog(1))
	}
	orig := clusterInstances(t, cl, "ckpt")
	if len(orig) != 1 {
		t.Fatalf("want the job's one instance, got %d", len(orig))
	}
	if _, err := cl.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: instanceIDs(orig)}); err != nil {
		t.Fatal(err)
	}
	if !waitFor(150*time.Second, func() bool { q = e.queueByID(); return ended(q[1]) }) {
		t.Fatalf("job 1 did not end after its recovery: %v\n%s", q[1], e.controllerLog(1))
	}
	if q[1].Status != "SUCCEEDED" || q[1].RecoveryCount != 1 {
		t.Errorf("want SUCCEEDED with 1 recovery, got %v\n%s", q[1], e.controllerLog(1))
	}
	if l := e.exec(cmdTimeout, nil, "jobs", "logs", "1", "--no-follow"); !strings.Contains(l.out(), "resumed from epoch-7") {
		t.Errorf("the recovered run did not resume from the checkpoint:\n%s", l)
	}
	e.must("storage", "delete", "-y", bucket)
}
