// Package storage is SkyGo's buckets: the S3 operations through the AWS
// SDK (internal/awsx) and the per-node scripts that copy or mount a
// bucket. The naming rules live in storage/bucketname, which the task
// loader uses without the SDK. The lifecycle that runs them on a cluster,
// and the records, live in the backend and state; this package holds the
// rules once for both.
package storage

import "github.com/skygo/skygo/internal/storage/bucketname"

// The naming rules, here under the names the lifecycle has always used.
const (
	S3           = bucketname.S3
	DefaultStore = bucketname.DefaultStore
)

// Prefixes are the store URI prefixes a bucket name may not start with.
var Prefixes = bucketname.Prefixes

// CheckStore says whether store (upper-case) can be used in this build.
func CheckStore(store string) error { return bucketname.CheckStore(store) }

// ParseURI splits a bucket URI into its store, bucket and key prefix.
func ParseURI(uri string) (store, bucket, prefix string, err error) { return bucketname.ParseURI(uri) }

// ValidateName checks a bucket name against the store's rules.
func ValidateName(store, name string) error { return bucketname.ValidateName(store, name) }

// URI is the bucket's URI in its store, with an optional key prefix.
func URI(store, bucket, prefix string) string { return bucketname.URI(store, bucket, prefix) }
