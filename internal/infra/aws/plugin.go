// Package aws provisions clusters on EC2 through aws-sdk-go-v2: a security
// group per cluster (or the user's shared one), instances tagged so that
// they are found again, SkyGo's SSH key given through cloud-config user
// data (no EC2 key pairs), and nodes then bootstrapped over SSH exactly as
// the hosts of an SSH node pool are. Every call goes through internal/awsx,
// so AWS_ENDPOINT_URL points all of it at an emulator.
package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	_ "github.com/skygo/skygo/internal/infra/aws/kind" // what aws is: the registry knows it wherever the plug-in is linked
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/provision"
)

// Kind is the infra kind: `infra: aws[/<region>[/<zone>]]`.
const Kind = "aws"

func init() { infra.Register(Kind, Open) }

// Infra is EC2 for one server.
type Infra struct {
	env infra.Env

	mu      sync.Mutex
	dialers map[string]*ssh.Dialer // by cloud name of the cluster
}

// Open opens EC2 for a server.
func Open(env infra.Env) (infra.Infra, error) {
	return &Infra{env: env, dialers: map[string]*ssh.Dialer{}}, nil
}

var (
	_ infra.Bootstrapper   = (*Infra)(nil)
	_ infra.NoCallback     = (*Infra)(nil)
	_ infra.SSHAccess      = (*Infra)(nil)
	_ infra.CheckDescriber = (*Infra)(nil)
)

// Kind implements infra.Infra.
func (in *Infra) Kind() string { return Kind }

// Provisioner implements infra.Infra: the provisioner of one region (and
// zone, when the ID names one).
func (in *Infra) Provisioner(id infra.ID) (provision.Provisioner, error) {
	region := id.Part(0)
	if region == "" {
		return nil, &provision.ConfigError{Where: Kind, Msg: "no region named; use infra: aws/<region>"}
	}
	return &Provisioner{in: in, region: region, zone: id.Part(1)}, nil
}

// NoAutostopCallback implements infra.NoCallback: an instance cannot call
// this server back, so the server's autostop controller acts for it.
func (in *Infra) NoAutostopCallback() {}

// settings are the aws: keys of the server's config that provisioning
// reads.
type settings struct {
	Profile        string
	SSHUser        string
	UseInternalIPs bool
	VPCName        string
	SecurityGroup  any // string or list of {glob: name}
	RemoteIdentity any
	DiskEncrypted  bool
	PostRunCmd     any
	Labels         map[string]string
}

func (in *Infra) settings() (settings, error) {
	cfg, err := config.Load(config.LoadOptions{Home: in.env.Home})
	if err != nil {
		return settings{}, err
	}
	s := settings{
		Profile:        cfg.GetString("aws.profile", ""),
		SSHUser:        cfg.GetString("aws.ssh_user", "ubuntu"),
		UseInternalIPs: cfg.GetBool("aws.use_internal_ips", false),
		VPCName:        cfg.GetString("aws.vpc_name", ""),
		DiskEncrypted:  cfg.GetBool("aws.disk_encrypted", false),
	}
	s.SecurityGroup, _ = cfg.Get("aws.security_group_name")
	s.RemoteIdentity, _ = cfg.Get("aws.remote_identity")
	s.PostRunCmd, _ = cfg.Get("aws.post_provision_runcmd")
	if m, ok := cfg.Get("aws.labels"); ok {
		if mm, ok := m.(map[string]any); ok {
			s.Labels = map[string]string{}
			for k, v := range mm {
				s.Labels[k] = fmt.Sprint(v)
			}
		}
	}
	return s, nil
}

// awsConfig loads the SDK configuration of the server's user for region.
func (in *Infra) awsConfig(ctx context.Context, s settings, region string) (aws.Config, error) {
	return awsx.Load(ctx, awsx.Options{Home: in.env.Home, Profile: s.Profile, Region: region})
}

// CloudName is a cluster's name on EC2: the cluster name and a hash of
// this server (its home and host), so two servers sharing an account
// never adopt each other's instances. SkyPilot's limit is 248 characters.
func (in *Infra) CloudName(cluster string) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(in.env.Home + "\x00" + host))
	name := cluster + "-" + hex.EncodeToString(sum[:])[:8]
	if len(name) > 248 {
		name = name[:248]
	}
	return name
}

// userTag is the server's user and a short hash of this host, which name the shared
// security group (sky-sg-<user>-<4 hex>).
func (in *Infra) userTag() (user, hash4 string) {
	user = os.Getenv("USER")
	if user == "" {
		user = filepath.Base(in.env.Home)
	}
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host))
	return user, hex.EncodeToString(sum[:])[:4]
}

// knownHostsFile is the cluster's own known_hosts: instance addresses are
// reused by other instances, so a host key is trusted for the life of one
// cluster only and forgotten with it.
func (in *Infra) knownHostsFile(cloudName string) string {
	return filepath.Join(paths.Root(in.env.Home), "aws", "known_hosts", cloudName)
}

// dialer is the cluster's SSH dialer (its own known_hosts, accept-new).
func (in *Infra) dialer(cloudName string) *ssh.Dialer {
	in.mu.Lock()
	defer in.mu.Unlock()
	d := in.dialers[cloudName]
	if d == nil {
		d = ssh.NewDialer(&ssh.KnownHosts{File: in.knownHostsFile(cloudName)})
		in.dialers[cloudName] = d
	}
	return d
}

// forget drops the cluster's dialer and known_hosts.
func (in *Infra) forget(cloudName string) {
	in.forgetConns(cloudName)
	_ = os.Remove(in.knownHostsFile(cloudName))
}

// Bootstrap implements infra.Bootstrapper: the node runtime and the head's
// key as on SSH pool hosts, then the user's AWS credentials when (and
// only when) aws.remote_identity is LOCAL_CREDENTIALS.
func (in *Infra) Bootstrap(ctx context.Context, info *provision.ClusterInfo, runners []provision.CommandRunner, log io.Writer) ([]agentapi.Node, error) {
	nodes, err := ssh.BootstrapHosts(ctx, in.env.NodeBinaries(), info, runners, log, "SkyGo's key is given to every instance; this one has none")
	if err != nil {
		return nil, err
	}
	s, err := in.settings()
	if err != nil {
		return nil, err
	}
	ident, err := awsx.RemoteIdentity(s.RemoteIdentity, info.Name)
	if err != nil {
		return nil, &provision.ConfigError{Where: Kind, Err: err}
	}
	if ident != awsx.IdentityLocal {
		return nodes, nil
	}
	cfg, err := in.awsConfig(ctx, s, info.Region)
	if err != nil {
		return nil, err
	}
	files, err := awsx.NodeCredentialFiles(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for i, r := range runners {
		if err := provision.WriteSecretFiles(ctx, r, files); err != nil {
			return nil, fmt.Errorf("node %d: giving it the AWS credentials (aws.remote_identity: LOCAL_CREDENTIALS): %w", i, err)
		}
	}
	fmt.Fprintf(log, "AWS credentials copied to %d node(s) (aws.remote_identity: LOCAL_CREDENTIALS).\n", len(runners))
	return nodes, nil
}

// WriteSSHConfig implements infra.SSHAccess.
func (in *Infra) WriteSSHConfig(info *provision.ClusterInfo) error {
	key, _, err := infra.ClientKey(in.env.Home)
	if err != nil {
		return err
	}
	hosts := make([]infra.GeneratedHost, len(info.Nodes))
	for i, n := range info.Nodes {
		hosts[i] = infra.GeneratedHost{Alias: infra.NodeAlias(info.Name, i), HostName: reachIP(info, n), Port: 22,
			User: info.Meta[metaUser], IdentityFile: key,
			KnownHosts: []string{in.knownHostsFile(info.Meta[metaCloudName])}, StrictHostKeyChecking: "accept-new"}
	}
	return infra.WriteSSHConfigHosts(in.env.Home, info.Name, hosts)
}

// RemoveSSHConfig implements infra.SSHAccess.
func (in *Infra) RemoveSSHConfig(cluster string) error {
	return infra.RemoveSSHConfig(in.env.Home, cluster)
}

// DescribeCheck implements infra.CheckDescriber: the credentials found
// are really tried, with STS GetCallerIdentity.
func (in *Infra) DescribeCheck(ctx context.Context, r *check.Result) {
	if !r.Enabled {
		return
	}
	s, err := in.settings()
	if err != nil {
		r.Enabled, r.Reason = false, err.Error()
		return
	}
	cfg, err := in.awsConfig(ctx, s, "")
	if err != nil {
		r.Enabled, r.Reason = false, err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	id, err := awsx.STS(cfg).GetCallerIdentity(ctx, nil)
	if err != nil && (awsx.Unreachable(err) || ctx.Err() != nil) {
		// Offline: the credentials may well be good; pricing still works.
		r.Warnings = append(r.Warnings, "AWS could not be reached to verify the credentials ("+firstLine(err.Error())+")")
		return
	}
	if err != nil {
		r.Enabled = false
		r.Reason = "AWS did not accept the credentials (" + awsx.Message(err) + "). Run `aws configure` (or `aws sso login`), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."
		return
	}
	d := fmt.Sprintf("account %s, identity %s", aws.ToString(id.Account), aws.ToString(id.Arn))
	if ep := awsx.EndpointURL(cfg); ep != "" {
		d += ", endpoint " + ep + " (AWS_ENDPOINT_URL)"
	}
	r.Details = append(r.Details, d)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
