// Package bucketname is the naming rules of SkyGo's buckets: store types,
// bucket URIs and bucket names. The task loader checks them, so they live
// apart from the S3 operations (internal/storage, which links the AWS SDK):
// the CLI and the node agent load tasks and must stay slim.
package bucketname

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Store types as SkyPilot names them.
const (
	S3 = "S3"
	// DefaultStore is the store of a bucket whose task names none: S3 is
	// the only store of this build, so it is always the first enabled
	// one SkyPilot would pick.
	DefaultStore = S3
)

// knownStores are SkyPilot's store types; all but S3 are refused here.
var knownStores = map[string]string{
	"S3": "s3://", "GCS": "gs://", "AZURE": "https://", "R2": "r2://", "IBM": "cos://", "OCI": "oci://",
	"NEBIUS": "nebius://", "COREWEAVE": "cw://", "VASTDATA": "vastdata://", "HF": "hf://", "VOLUME": "",
}

// Prefixes are the store URI prefixes a bucket name may not start with.
var Prefixes = []string{"s3://", "gs://", "https://", "r2://", "cos://", "oci://", "nebius://", "cw://", "vastdata://", "hf://"}

// CheckStore says whether store (upper-case) can be used in this build.
func CheckStore(store string) error {
	if store == S3 {
		return nil
	}
	if _, ok := knownStores[store]; ok {
		return fmt.Errorf("store %s is not available in this build; use an S3 bucket (store: s3, or an s3:// source)", store)
	}
	return fmt.Errorf("unknown store %q; valid stores are S3, GCS, AZURE, R2, IBM, OCI, NEBIUS, COREWEAVE, VASTDATA, HF, VOLUME (this build implements S3)", store)
}

// ParseURI splits a bucket URI into its store, bucket and key prefix (no
// leading or trailing slash).
func ParseURI(uri string) (store, bucket, prefix string, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" {
		return "", "", "", fmt.Errorf("%q is not a bucket URI (want s3://<bucket>[/<path>])", uri)
	}
	scheme := strings.ToLower(u.Scheme) + "://"
	for st, p := range knownStores {
		if p != "" && p == scheme {
			store = st
		}
	}
	if store == "" {
		return "", "", "", fmt.Errorf("%q: unknown storage scheme %s; this build reads s3:// buckets", uri, scheme)
	}
	if store != S3 {
		return store, "", "", fmt.Errorf("%q: store %s is not available in this build; use an s3:// bucket", uri, store)
	}
	return store, u.Host, strings.Trim(u.Path, "/"), nil
}

var s3NameRE = regexp.MustCompile(`^[a-z0-9][-a-z0-9.]*[a-z0-9]$`)

// ValidateName checks a bucket name against the store's rules (S3's:
// 3-63 characters of lower-case letters, digits, dots and hyphens, not an
// IP address, no reserved prefix or suffix).
func ValidateName(store, name string) error {
	if name == "" {
		return fmt.Errorf("the bucket has no name: give `name`, or an s3:// source")
	}
	for _, p := range Prefixes {
		if strings.HasPrefix(name, p) {
			//lint:ignore ST1005 SkyPilot's message, word for word
			return fmt.Errorf("Prefix detected: `name` cannot start with %s; give the bare bucket name", p)
		}
	}
	if store != S3 {
		return nil
	}
	bad := func(why string) error {
		return fmt.Errorf("invalid S3 bucket name %q: %s; see https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html", name, why)
	}
	switch {
	case len(name) < 3 || len(name) > 63:
		return bad("it must be 3 to 63 characters long")
	case !s3NameRE.MatchString(name):
		return bad("it may contain only lower-case letters, digits, dots and hyphens, and must start and end with a letter or digit")
	case strings.Contains(name, ".."):
		return bad("it must not contain two adjacent periods")
	case net.ParseIP(name) != nil:
		return bad("it must not be formatted as an IP address")
	case strings.HasPrefix(name, "xn--"):
		return bad("it must not start with xn--")
	case strings.HasSuffix(name, "-s3alias"), strings.HasSuffix(name, "--ol-s3"):
		return bad("it must not end with -s3alias or --ol-s3")
	}
	return nil
}

// URI is the bucket's URI in its store, with an optional key prefix.
func URI(store, bucket, prefix string) string {
	u := strings.ToLower(knownStores[store]) + bucket
	if store == S3 {
		u = "s3://" + bucket
	}
	if prefix != "" {
		u += "/" + prefix
	}
	return u
}
