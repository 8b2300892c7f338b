// Package awsx is SkyGo's one way to reach AWS: configuration loaded by
// the SDK's own loaders (environment, shared files, profiles, SSO cache,
// web identity) for a home directory and a profile, with
// AWS_ENDPOINT_URL honoured by every client made from it. Both the EC2
// infrastructure and S3 storage build their clients here, so a test
// pointing AWS_ENDPOINT_URL at an emulator reaches nothing else.
package awsx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// DefaultRegion is where region-less calls (STS, IAM, new buckets
// without a cluster region) go, as SkyPilot's us-east-1.
const DefaultRegion = "us-east-1"

// Options says whose AWS configuration to load.
type Options struct {
	// Home is the user's home; its ~/.aws files are read unless
	// AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE name others.
	Home string
	// Profile is aws.profile of the workspace config ("" = AWS_PROFILE or
	// default).
	Profile string
	// Region overrides the profile's region.
	Region string
}

// Load returns the SDK configuration for opts. Credentials are resolved
// lazily by the SDK, so a missing one surfaces on the first call.
func Load(ctx context.Context, opts Options) (aws.Config, error) {
	var lo []func(*awsconfig.LoadOptions) error
	if opts.Home != "" {
		if os.Getenv("AWS_SHARED_CREDENTIALS_FILE") == "" {
			lo = append(lo, awsconfig.WithSharedCredentialsFiles([]string{filepath.Join(opts.Home, ".aws", "credentials")}))
		}
		if os.Getenv("AWS_CONFIG_FILE") == "" {
			lo = append(lo, awsconfig.WithSharedConfigFiles([]string{filepath.Join(opts.Home, ".aws", "config")}))
		}
	}
	if opts.Profile != "" {
		lo = append(lo, awsconfig.WithSharedConfigProfile(opts.Profile))
	}
	region := opts.Region
	lo = append(lo, awsconfig.WithRetryer(func() aws.Retryer {
		// SkyPilot retries server-side errors 12 times; the SDK's
		// standard retryer classifies them the same way. A name that does
		// not resolve or an address that refuses is not retried: on a
		// machine without the network that would only add minutes.
		return noDialRetry{retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 12 })}
	}))
	cfg, err := awsconfig.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if region != "" {
		cfg.Region = region
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	return cfg, nil
}

// EndpointURL is the endpoint every client goes to instead of AWS's
// (AWS_ENDPOINT_URL), "" for AWS itself.
func EndpointURL(cfg aws.Config) string {
	if cfg.BaseEndpoint != nil {
		return *cfg.BaseEndpoint
	}
	return os.Getenv("AWS_ENDPOINT_URL")
}

// EC2 is an EC2 client in region.
func EC2(cfg aws.Config, region string) *ec2.Client {
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		if region != "" {
			o.Region = region
		}
	})
}

// S3 is an S3 client in region. An endpoint other than AWS's is
// addressed by path (bucket names in the path): emulators and most
// S3-compatible stores serve no per-bucket host names.
func S3(cfg aws.Config, region string) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if region != "" {
			o.Region = region
		}
		if EndpointURL(cfg) != "" {
			o.UsePathStyle = true
		}
	})
}

// STS is an STS client.
func STS(cfg aws.Config) *sts.Client { return sts.NewFromConfig(cfg) }

// IAM is an IAM client.
func IAM(cfg aws.Config) *iam.Client { return iam.NewFromConfig(cfg) }

// Code is the AWS error code of err ("InvalidGroup.Duplicate",
// "InsufficientInstanceCapacity"), "" when err is not an API error.
func Code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Message is the AWS error message of err, or for an endpoint that
// cannot be reached the network's own words, or err's text.
func Message(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "AWS cannot be reached: " + dns.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return "AWS cannot be reached: " + op.Error()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if m := ae.ErrorMessage(); m != "" {
			return ae.ErrorCode() + ": " + m
		}
		return ae.ErrorCode()
	}
	return err.Error()
}

// CredentialCodes are the error codes that mean the credentials
// themselves are bad: they block all of AWS, not one region.
var CredentialCodes = map[string]bool{
	"ExpiredTokenException": true, "ExpiredToken": true, "RequestExpired": true,
	"InvalidClientTokenId": true, "InvalidClientToken": true, "AuthFailure": true,
	"UnrecognizedClientException": true, "SignatureDoesNotMatch": true,
}

// noDialRetry is the standard retryer, except that failures to reach the
// endpoint at all (DNS, connection refused, no route) are final.
type noDialRetry struct{ aws.RetryerV2 }

func (r noDialRetry) IsErrorRetryable(err error) bool {
	if Unreachable(err) {
		return false
	}
	return r.RetryerV2.IsErrorRetryable(err)
}

// Unreachable reports whether err is a failure to reach the endpoint at
// all rather than an answer from it.
func Unreachable(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// CapacityCodes are EC2's answers that a place has no room now: retrying
// the same call there is pointless, the next zone or region is not.
var CapacityCodes = map[string]bool{
	"InsufficientInstanceCapacity": true, "InsufficientHostCapacity": true, "InsufficientReservedInstanceCapacity": true,
	"InsufficientCapacity": true, "InstanceLimitExceeded": true, "VcpuLimitExceeded": true, "MaxSpotInstanceCountExceeded": true,
	"SpotMaxPriceTooLow": true, "Unsupported": true, "InsufficientFreeAddressesInSubnet": true,
}

// FailFast is the option of a launch call (RunInstances): a capacity
// answer comes back at once, while throttling and server faults are
// still retried as by every other call.
func FailFast(o *ec2.Options) {
	o.Retryer = noDialRetry{retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = 12
		so.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			if CapacityCodes[Code(err)] {
				return aws.FalseTernary
			}
			return aws.UnknownTernary
		})}, so.Retryables...)
	})}
}
