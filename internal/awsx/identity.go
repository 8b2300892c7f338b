package awsx

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Remote identities (aws.remote_identity): what nodes authenticate to
// AWS as.
const (
	// IdentityLocal uploads the user's own credentials to the nodes. It
	// is SkyPilot's default; SkyGo's is IdentityServiceAccount, because a
	// copied secret outlives the cluster and any job on the node can read
	// it (skypilot#489, #2820).
	IdentityLocal = "LOCAL_CREDENTIALS"
	// IdentityServiceAccount gives EC2 nodes the skypilot-v1 instance
	// profile and copies nothing.
	IdentityServiceAccount = "SERVICE_ACCOUNT"
	// IdentityNoUpload is IdentityServiceAccount without the instance
	// profile's creation: nodes get nothing from us.
	IdentityNoUpload = "NO_UPLOAD"
)

// RemoteIdentity resolves aws.remote_identity for a cluster: a string, or
// a list of {<cluster-name glob>: <value>} whose first match wins. Any
// other string is the name of an existing instance profile.
func RemoteIdentity(v any, cluster string) (string, error) {
	switch x := v.(type) {
	case nil:
		return IdentityServiceAccount, nil
	case string:
		if x == "" {
			return IdentityServiceAccount, nil
		}
		return x, nil
	case []any:
		for i, item := range x {
			m, ok := item.(map[string]any)
			if !ok || len(m) != 1 {
				return "", fmt.Errorf("aws.remote_identity[%d]: want a one-key mapping {<cluster-name glob>: <identity>}", i)
			}
			for glob, val := range m {
				s, ok := val.(string)
				if !ok {
					return "", fmt.Errorf("aws.remote_identity[%d]: the identity of %q must be a string", i, glob)
				}
				if ok, err := path.Match(glob, cluster); err != nil {
					return "", fmt.Errorf("aws.remote_identity[%d]: bad glob %q: %w", i, glob, err)
				} else if ok {
					return s, nil
				}
			}
		}
		return IdentityServiceAccount, nil
	}
	return "", fmt.Errorf("aws.remote_identity: want a string or a list of {<cluster-name glob>: <identity>}, got %T", v)
}

// NodeCredentialFiles is what a node gets under ~/.aws when the remote
// identity is IdentityLocal: the credentials the SDK resolved for cfg
// (whatever their source: env, files, SSO), as a default profile, and a
// config naming the region and any endpoint override. The caller writes
// them with mode 0600 and never logs them.
func NodeCredentialFiles(ctx context.Context, cfg aws.Config) (map[string][]byte, error) {
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the AWS credentials to give the nodes: %w", err)
	}
	var c strings.Builder
	c.WriteString("[default]\n")
	fmt.Fprintf(&c, "aws_access_key_id = %s\naws_secret_access_key = %s\n", creds.AccessKeyID, creds.SecretAccessKey)
	if creds.SessionToken != "" {
		fmt.Fprintf(&c, "aws_session_token = %s\n", creds.SessionToken)
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "[default]\nregion = %s\n", cfg.Region)
	if ep := EndpointURL(cfg); ep != "" {
		fmt.Fprintf(&conf, "endpoint_url = %s\n", ep)
	}
	return map[string][]byte{".aws/credentials": []byte(c.String()), ".aws/config": []byte(conf.String())}, nil
}
