//go:build !skygo_omit_aws

package backend

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/storage"
	"github.com/skygo/skygo/internal/storage/s3bucket"
)

// objectStore opens S3 with the server's AWS configuration (aws.profile
// of the config) for region, and returns the config it read.
func (b *Backend) objectStore(ctx context.Context, region string) (objectStore, *config.Config, error) {
	cfg, err := config.Load(config.LoadOptions{Home: b.Home})
	if err != nil {
		return nil, nil, err
	}
	ac, err := awsx.Load(ctx, awsx.Options{Home: b.Home, Profile: cfg.GetString("aws.profile", ""), Region: region})
	if err != nil {
		return nil, nil, err
	}
	return s3Store{cfg: ac}, cfg, nil
}

type s3Store struct{ cfg aws.Config }

func (s s3Store) Bucket(name, region string) bucket {
	return s3Bucket{s3bucket.OpenS3(s.cfg, name, region)}
}

func (s s3Store) NodeOptions(region string) storage.NodeOptions {
	return storage.NodeOptions{Region: region, Endpoint: awsx.EndpointURL(s.cfg)}
}

func (s s3Store) NodeCredentials(ctx context.Context, remoteIdentity any, cluster string) (map[string][]byte, error) {
	identity, err := awsx.RemoteIdentity(remoteIdentity, cluster)
	if err != nil || identity != awsx.IdentityLocal {
		return nil, err
	}
	return awsx.NodeCredentialFiles(ctx, s.cfg)
}

type s3Bucket struct{ *s3bucket.Bucket }

func (b s3Bucket) UploadTree(ctx context.Context, src, prefix string) error {
	objs, err := s3bucket.Walk(src, prefix)
	if err != nil {
		return fmt.Errorf("reading the upload of %s: %w", src, err)
	}
	return b.Upload(ctx, objs)
}
