// Package s3bucket is the S3 operations on a bucket through the AWS SDK
// (internal/awsx): the API server creates, fills, lists and deletes
// buckets with it. It is apart from internal/storage, whose names, URIs
// and node scripts the task loader and the node agent use, so that
// neither links the SDK; nodes reach buckets with rclone.
package s3bucket

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/storage"
)

// Bucket is one S3 bucket reached through the SDK.
type Bucket struct {
	Name   string
	Region string
	c      *s3.Client
}

// OpenS3 is bucket name in region through cfg (awsx.Load).
func OpenS3(cfg aws.Config, name, region string) *Bucket {
	region = cmp.Or(region, awsx.DefaultRegion)
	return &Bucket{Name: name, Region: region, c: awsx.S3(cfg, region)}
}

// Exists reports whether the bucket exists and this identity may use it,
// and its region when S3 says. A bucket owned by someone else is an
// error saying so.
func (b *Bucket) Exists(ctx context.Context) (bool, string, error) {
	out, err := b.c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.Name)})
	if err == nil {
		return true, aws.ToString(out.BucketRegion), nil
	}
	var nf *types.NotFound
	var nsb *types.NoSuchBucket
	switch code := awsx.Code(err); {
	case errors.As(err, &nf), errors.As(err, &nsb), code == "NotFound", code == "NoSuchBucket", code == "404":
		return false, "", nil
	case code == "Forbidden", code == "403", code == "AccessDenied":
		return false, "", fmt.Errorf("S3 bucket %s exists but this AWS identity may not use it (owned by another account?); choose another name", b.Name)
	case awsx.CredentialCodes[code]:
		return false, "", fmt.Errorf("AWS credentials were refused (%s); run `aws configure` or fix ~/.aws/credentials", awsx.Message(err))
	}
	return false, "", fmt.Errorf("checking S3 bucket %s: %s", b.Name, awsx.Message(err))
}

// Create makes the bucket in its region.
func (b *Bucket) Create(ctx context.Context) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(b.Name)}
	if b.Region != "us-east-1" {
		// us-east-1 is the one region S3 refuses a location constraint for.
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(b.Region)}
	}
	if _, err := b.c.CreateBucket(ctx, in); err != nil {
		switch awsx.Code(err) {
		case "BucketAlreadyExists":
			return fmt.Errorf("failed to create S3 bucket %s: the name is taken by another AWS account; choose another name", b.Name)
		case "BucketAlreadyOwnedByYou":
			return nil
		}
		return fmt.Errorf("failed to create S3 bucket %s in %s: %s", b.Name, b.Region, awsx.Message(err))
	}
	return nil
}

// Object is one file to upload: a local path and its key.
type Object struct {
	Path, Key string
}

// Walk lists the regular files under root (a directory or one file) as
// objects under prefix. Symlinks are not followed, as SkyPilot's
// `aws s3 sync --no-follow-symlinks`.
func Walk(root, prefix string) ([]Object, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []Object{{Path: root, Key: prefix}}, nil
	}
	var out []Object
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out = append(out, Object{Path: p, Key: path.Join(prefix, filepath.ToSlash(rel))})
		return nil
	})
	return out, err
}

// Upload puts the objects, storage.Concurrency at a time.
func (b *Bucket) Upload(ctx context.Context, objs []Object) error {
	return each(ctx, len(objs), func(i int) error {
		f, err := os.Open(objs[i].Path)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		_, err = b.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.Name), Key: aws.String(objs[i].Key),
			Body: f, ContentLength: aws.Int64(fi.Size())})
		if err != nil {
			return fmt.Errorf("uploading %s to s3://%s/%s: %s", objs[i].Path, b.Name, objs[i].Key, awsx.Message(err))
		}
		return nil
	})
}

// List is the keys under prefix ("" = all).
func (b *Bucket) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(b.c, &s3.ListObjectsV2Input{Bucket: aws.String(b.Name), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing s3://%s/%s: %s", b.Name, prefix, awsx.Message(err))
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// Delete removes every object and then the bucket.
func (b *Bucket) Delete(ctx context.Context) error {
	keys, err := b.List(ctx, "")
	if err != nil {
		if awsx.Code(err) == "NoSuchBucket" {
			return nil
		}
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		ids := make([]types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		if _, err := b.c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b.Name),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			return fmt.Errorf("emptying S3 bucket %s: %s", b.Name, awsx.Message(err))
		}
		keys = keys[n:]
	}
	if _, err := b.c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b.Name)}); err != nil && awsx.Code(err) != "NoSuchBucket" {
		return fmt.Errorf("deleting S3 bucket %s: %s", b.Name, awsx.Message(err))
	}
	return nil
}

// each runs fn(0..n-1), storage.Concurrency at a time; the first error wins.
func each(ctx context.Context, n int, fn func(i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, storage.Concurrency)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return first
}
