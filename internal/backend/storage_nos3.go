//go:build skygo_omit_aws

package backend

import (
	"context"
	"errors"

	"github.com/skygo/skygo/internal/config"
)

// errNoObjectStore is every bucket operation's error in a build without
// the AWS SDK: buckets are S3 buckets, and the tag left S3 out.
var errNoObjectStore = errors.New("bucket storage uses S3, which this build of SkyGo leaves out (built with -tags skygo_omit_aws); use a build without that tag, or volumes and plain file_mounts instead")

func (b *Backend) objectStore(context.Context, string) (objectStore, *config.Config, error) {
	return nil, nil, errNoObjectStore
}
