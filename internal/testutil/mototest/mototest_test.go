package mototest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/skygo/skygo/internal/awsx"
)

// The environment a sky API server gets reaches the server through
// awsx.Load, and the server ends by its pid.
func TestStartEnvAndStop(t *testing.T) {
	s := Start(t, Options{})
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	cfg, err := awsx.Load(ctx, awsx.Options{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := awsx.EndpointURL(cfg); got != s.Endpoint {
		t.Fatalf("endpoint %q, want %q", got, s.Endpoint)
	}
	id, err := awsx.STS(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(id.Account) != AccountID {
		t.Fatalf("account %q, want %s", aws.ToString(id.Account), AccountID)
	}
	// MOTO_IAM_LOAD_MANAGED_POLICIES=true
	if _, err := awsx.IAM(cfg).GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String("arn:aws:iam::aws:policy/AmazonEC2FullAccess")}); err != nil {
		t.Fatalf("managed policy missing: %v", err)
	}

	s.Stop()
	if err := syscall.Kill(s.PID, 0); err == nil {
		t.Fatalf("moto pid %d still alive after Stop", s.PID)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still answers after Stop", s.Endpoint)
	}
}

// Config reaches the server whatever this process's environment says.
func TestConfig(t *testing.T) {
	s := Start(t, Options{})
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	id, err := awsx.STS(s.Config(t, "")).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(id.Account) != AccountID {
		t.Fatalf("account %q", aws.ToString(id.Account))
	}
}
