// Package catalog reads SkyPilot's instance and price catalogs (the
// skypilot-catalog CSV format, schema v8) and answers the optimizer's and
// `sky gpus list`'s questions: which instance types fit a request, where they
// are offered, and what they cost.
//
// Files come from, in order: Options.Dir (config `catalog.dir`) or the
// SKYPILOT_CATALOG_DIR environment variable; else the cache
// ~/.sky/catalogs/<version>/<cloud>/vms.csv; else SkyPilot's hosted catalog,
// downloaded into that cache and fetched again once older than Options.TTL.
// Each cloud's file is read and indexed the first time that cloud is
// queried, so asking about AWS never parses the 3 MB Azure file.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/paths"
)

// Defaults for Options fields left empty.
const (
	DefaultVersion = "v8"
	DefaultBaseURL = "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs"
	// MirrorBaseURL is tried when DefaultBaseURL fails.
	MirrorBaseURL = "https://skypilot-catalog.s3.us-east-1.amazonaws.com/catalogs"
	// DefaultTTL matches the hosted catalog's refresh period (about 7 hours).
	DefaultTTL = 7 * time.Hour
	// EnvDir names a directory laid out as <dir>/<cloud>/vms.csv.
	EnvDir = "SKYPILOT_CATALOG_DIR"
)

// Clouds lists the clouds that publish a vms.csv in the v8 catalog, in the
// order used for display and tie-breaks.
var Clouds = []string{
	"aws", "gcp", "azure", "oci", "lambda", "runpod", "nebius", "vast",
	"cudo", "primeintellect", "shadeform", "seeweb", "hyperbolic", "hyperstack",
	"jarvislabs", "lium", "daytona", "mithril", "spheron", "verda", "yotta",
}

// IsCatalogCloud reports whether name (lower case) has a price catalog.
func IsCatalogCloud(name string) bool { return slices.Contains(Clouds, name) }

// Options configures where catalog files come from.
type Options struct {
	// Dir, when set, is read directly (<Dir>/<cloud>/vms.csv) and nothing is
	// downloaded. Overrides SKYPILOT_CATALOG_DIR.
	Dir string
	// CacheDir is the root of the download cache; default ~/.sky/catalogs.
	CacheDir string
	// Version is the catalog schema version directory; default v8.
	Version string
	// BaseURLs are tried in order for downloads; default the hosted catalog
	// and its S3 mirror.
	BaseURLs []string
	// TTL is how old a cached file may get before it is downloaded again;
	// default DefaultTTL. A failed refresh keeps using the stale copy.
	TTL time.Duration
	// HTTPClient is used for downloads; default a client with a 60 s timeout.
	HTTPClient *http.Client
	// Now is the clock used for TTL checks; default time.Now.
	Now func() time.Time
}

// Catalog answers queries over all clouds' catalogs. It is safe for
// concurrent use; each cloud is loaded at most once.
type Catalog struct {
	opts Options

	mu     sync.Mutex
	clouds map[string]*cloudEntry

	accOnce sync.Once
	acc     *accelNames
}

type cloudEntry struct {
	once sync.Once
	idx  *index
	err  error
}

// New returns a Catalog; nothing is read until the first query.
func New(opts Options) *Catalog {
	if opts.Dir == "" {
		opts.Dir = os.Getenv(EnvDir)
	}
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	if opts.CacheDir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			opts.CacheDir = paths.CatalogCache(home)
		}
	}
	if len(opts.BaseURLs) == 0 {
		opts.BaseURLs = []string{DefaultBaseURL, MirrorBaseURL}
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Catalog{opts: opts, clouds: map[string]*cloudEntry{}}
}

// ErrNoCatalog means a cloud has no catalog file anywhere (not in the
// directory, not in the cache, and not downloadable).
var ErrNoCatalog = errors.New("no catalog for cloud")

// cloud returns the index for one cloud, loading it on first use.
func (c *Catalog) cloud(ctx context.Context, name string) (*index, error) {
	name = strings.ToLower(name)
	c.mu.Lock()
	e := c.clouds[name]
	if e == nil {
		e = &cloudEntry{}
		c.clouds[name] = e
	}
	c.mu.Unlock()
	e.once.Do(func() {
		path, err := c.locate(ctx, name, "vms.csv")
		if err != nil {
			e.err = err
			return
		}
		f, err := os.Open(path)
		if err != nil {
			e.err = fmt.Errorf("opening %s catalog: %w", name, err)
			return
		}
		defer f.Close()
		rows, err := parseVMs(name, f)
		if err != nil {
			e.err = fmt.Errorf("%s: %w (fix or delete the file to re-download it)", path, err)
			return
		}
		e.idx = buildIndex(name, rows)
	})
	return e.idx, e.err
}

// locate finds (or downloads) one catalog file and returns its path.
func (c *Catalog) locate(ctx context.Context, cloud, file string) (string, error) {
	if c.opts.Dir != "" {
		p := filepath.Join(c.opts.Dir, cloud, file)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w %s: %s not found in catalog dir %s", ErrNoCatalog, cloud, file, c.opts.Dir)
		}
		return p, nil
	}
	if c.opts.CacheDir == "" {
		return "", fmt.Errorf("%w %s: no home directory for the catalog cache; set %s", ErrNoCatalog, cloud, EnvDir)
	}
	p := filepath.Join(c.opts.CacheDir, c.opts.Version, cloud, file)
	st, statErr := os.Stat(p)
	if statErr == nil && c.opts.Now().Sub(st.ModTime()) < c.opts.TTL {
		return p, nil
	}
	err := c.download(ctx, cloud, file, p)
	if err == nil {
		return p, nil
	}
	if statErr == nil {
		return p, nil // stale but usable: better than failing offline
	}
	return "", fmt.Errorf("%w %s: %v", ErrNoCatalog, cloud, err)
}

// accelerators reads common/accelerators.csv for canonical names; a missing file
// only disables canonicalisation, it is not an error for queries.
func (c *Catalog) accelerators(ctx context.Context) *accelNames {
	c.accOnce.Do(func() {
		c.acc = &accelNames{byLower: map[string]string{}}
		path, err := c.locate(ctx, "common", "accelerators.csv")
		if err != nil {
			return
		}
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		if a, err := parseAccelerators(f); err == nil {
			c.acc = a
		}
	})
	return c.acc
}
