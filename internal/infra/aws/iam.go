package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/provision"
)

// The role the skypilot-v1 instance profile carries: EC2 and S3 for
// what runs on the nodes (managed-job controllers, bucket mounts), and
// passing itself on.
const (
	trustPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	passRoleTpl = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["iam:GetRole","iam:PassRole"],"Resource":"arn:aws:iam::%[1]s:role/%[2]s"},{"Effect":"Allow","Action":"iam:GetInstanceProfile","Resource":"arn:aws:iam::%[1]s:instance-profile/%[2]s"}]}`
)

var rolePolicies = []string{"arn:aws:iam::aws:policy/AmazonEC2FullAccess", "arn:aws:iam::aws:policy/AmazonS3FullAccess"}

// instanceProfile is the profile the instances get: skypilot-v1 (made
// with its role when missing) for SkyPilot's three identities, or the
// named profile of any other aws.remote_identity value, used as is.
func (p *Provisioner) instanceProfile(ctx context.Context, ss *session, cluster string) (string, error) {
	ident, err := awsx.RemoteIdentity(ss.s.RemoteIdentity, cluster)
	if err != nil {
		return "", &provision.ConfigError{Where: p.where(), Err: err}
	}
	switch ident {
	case awsx.IdentityLocal, awsx.IdentityServiceAccount, awsx.IdentityNoUpload:
	default:
		return ident, nil
	}
	c := awsx.IAM(ss.cfg)
	prof, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profileName)})
	if awsx.Code(err) == "NoSuchEntity" {
		if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(profileName)}); err != nil &&
			awsx.Code(err) != "EntityAlreadyExists" {
			return "", p.classify("creating instance profile "+profileName, err)
		}
		prof, err = c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profileName)})
	}
	if err != nil {
		return "", p.classify("reading instance profile "+profileName, err)
	}
	if len(prof.InstanceProfile.Roles) == 0 {
		if err := p.ensureRole(ctx, c, ss); err != nil {
			return "", err
		}
		if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profileName),
			RoleName: aws.String(profileName)}); err != nil && awsx.Code(err) != "LimitExceeded" {
			return "", p.classify("adding role "+profileName+" to its instance profile", err)
		}
	}
	return aws.ToString(prof.InstanceProfile.Arn), nil
}

func (p *Provisioner) ensureRole(ctx context.Context, c *iam.Client, ss *session) error {
	_, err := c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(profileName)})
	if err == nil {
		return nil
	}
	if awsx.Code(err) != "NoSuchEntity" {
		return p.classify("reading role "+profileName, err)
	}
	if _, err := c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(profileName), AssumeRolePolicyDocument: aws.String(trustPolicy)}); err != nil &&
		awsx.Code(err) != "EntityAlreadyExists" {
		return p.classify("creating role "+profileName, err)
	}
	for _, arn := range rolePolicies {
		if _, err := c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(profileName), PolicyArn: aws.String(arn)}); err != nil {
			return p.classify("attaching "+arn+" to role "+profileName, err)
		}
	}
	id, err := awsx.STS(ss.cfg).GetCallerIdentity(ctx, nil)
	if err != nil {
		return p.classify("reading the account id", err)
	}
	_, err = c.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(profileName), PolicyName: aws.String("SkyPilotPassRolePolicy"),
		PolicyDocument: aws.String(fmt.Sprintf(passRoleTpl, aws.ToString(id.Account), profileName))})
	return p.classify("giving role "+profileName+" its pass-role policy", err)
}
