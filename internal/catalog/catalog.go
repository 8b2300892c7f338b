// Package catalog reads SkyPilot's instance and price catalogs (the
// skypilot-catalog CSV format, schema v8) and answers the optimizer's and
// `sky gpus list`'s questions: which instance types fit a request, where they
// are offered, and what they cost.
//
// Files come from, in order: Options.Dir (config `catalog.dir`) or the
// SKYPILOT_CATALOG_DIR environment variable; else the cache
// ~/.sky/catalogs/<version>/<cloud>/vms.csv while younger than Options.TTL;
// else SkyPilot's hosted catalog, downloaded into that cache; else (offline,
// or the download failed) the stale cache or, without one, the snapshot
// built into the binary (internal/catalog/embedded). Falling back is quiet:
// one debug log line, no error, and no new download attempt for a while.
// Each cloud's file is read and indexed the first time that cloud is
// queried, so asking about AWS never parses the 3 MB Azure file; an index
// built from a file that has since gone stale is rebuilt on the next query,
// and one not queried for Options.Keep is let go.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/catalog/embedded"
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
	// EnvURL, when set, replaces the hosted catalog's base URLs (a mirror,
	// or a closed port in tests that must not reach the network).
	EnvURL = "SKYGO_CATALOG_URL"
	// offlineBackoff is how long downloads are skipped after the hosted
	// catalog could not be reached, so an offline machine does not try
	// (and wait) once per cloud and per request.
	offlineBackoff = 10 * time.Minute
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
	// NoEmbedded turns off the built-in snapshot, so a cloud without a
	// file in the directory, the cache or the hosted catalog is an error
	// (tests of the download path).
	NoEmbedded bool
	// Logger gets the one debug line said when the hosted catalog cannot
	// be reached; default slog.Default().
	Logger *slog.Logger
	// Keep is how long a cloud's index stays in memory after its last
	// query; default DefaultKeep. A long-lived process (the API server)
	// then holds no catalog while nobody asks for prices, and a burst of
	// queries (a launch, `sky gpus list`) parses each file once.
	Keep time.Duration
}

// DefaultKeep is Options.Keep's default.
const DefaultKeep = 2 * time.Minute

// Catalog answers queries over all clouds' catalogs. It is safe for
// concurrent use; each cloud is loaded once, and again when its file expires.
type Catalog struct {
	opts Options

	mu     sync.Mutex
	clouds map[string]*cloudEntry
	// offlineUntil: no download is tried before this time (the last
	// attempt could not reach any base URL); saidOffline: the debug line
	// has been logged.
	offlineUntil time.Time
	saidOffline  bool

	accOnce sync.Once
	acc     *accelNames
}

// cloudEntry is one cloud's index. mu serialises its (re)load, so a cloud is
// parsed once however many queries arrive together; expires is when the
// file it came from should be looked up again (zero: never).
type cloudEntry struct {
	mu      sync.Mutex
	loaded  bool
	expires time.Time
	idx     *index
	err     error
	// used is the last query's time; drop lets the index go Keep after it.
	used time.Time
	drop *time.Timer
}

// release forgets a cloud's index once it has not been queried for
// Keep; the next query loads it again.
func (c *Catalog) release(e *cloudEntry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if time.Since(e.used) < c.opts.Keep {
		return // queried while the timer fired; its Reset fires again
	}
	e.loaded, e.idx, e.err = false, nil, nil
}

// touch records a query of e (e.mu held) and (re)arms its release.
func (c *Catalog) touch(e *cloudEntry) {
	e.used = time.Now()
	if e.drop == nil {
		e.drop = time.AfterFunc(c.opts.Keep, func() { c.release(e) })
	} else {
		e.drop.Reset(c.opts.Keep)
	}
}

// New returns a Catalog; nothing is read until the first query.
func New(opts Options) *Catalog {
	if opts.Dir == "" {
		opts.Dir = os.Getenv(EnvDir)
	}
	if len(opts.BaseURLs) == 0 {
		if u := os.Getenv(EnvURL); u != "" {
			opts.BaseURLs = []string{u}
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
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
		// A short dial timeout: an unreachable network must not hold a
		// query for long before the fallback answers it.
		opts.HTTPClient = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
			TLSHandshakeTimeout: 5 * time.Second,
		}}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	return &Catalog{opts: opts, clouds: map[string]*cloudEntry{}}
}

// ErrNoCatalog means a cloud has no catalog file anywhere (not in the
// directory, not in the cache, and not downloadable).
var ErrNoCatalog = errors.New("no catalog for cloud")

// cloud returns the index for one cloud, loading it on first use and again
// once the file it came from has expired.
func (c *Catalog) cloud(ctx context.Context, name string) (*index, error) {
	name = strings.ToLower(name)
	c.mu.Lock()
	e := c.clouds[name]
	if e == nil {
		e = &cloudEntry{}
		c.clouds[name] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	c.touch(e)
	if e.loaded && (e.expires.IsZero() || c.opts.Now().Before(e.expires)) {
		return e.idx, e.err
	}
	f, src, err := c.open(ctx, name, "vms.csv")
	e.loaded, e.expires = true, src.expires
	if err != nil {
		e.idx, e.err = nil, err
		return nil, err
	}
	defer f.Close()
	rows, err := parseVMs(name, f)
	if err != nil {
		e.idx, e.err = nil, fmt.Errorf("%s: %w (fix or delete the file to re-download it)", src.name, err)
		return nil, e.err
	}
	e.idx, e.err = buildIndex(name, rows), nil
	return e.idx, nil
}

// source says where a file was read from and until when that holds.
type source struct {
	name    string    // path, or the embedded snapshot
	expires time.Time // zero: for the life of the Catalog
}

// open finds (or downloads) one catalog file, in the order of the package
// doc, and opens it.
func (c *Catalog) open(ctx context.Context, cloud, file string) (io.ReadCloser, source, error) {
	if c.opts.Dir != "" {
		p := filepath.Join(c.opts.Dir, cloud, file)
		f, err := os.Open(p)
		if err != nil {
			return nil, source{}, fmt.Errorf("%w %s: %s not found in catalog dir %s", ErrNoCatalog, cloud, file, c.opts.Dir)
		}
		return f, source{name: p}, nil
	}
	var p string
	var statErr error = os.ErrNotExist
	var mtime time.Time
	if c.opts.CacheDir != "" {
		p = filepath.Join(c.opts.CacheDir, c.opts.Version, cloud, file)
		var st os.FileInfo
		if st, statErr = os.Stat(p); statErr == nil {
			mtime = st.ModTime()
			if c.opts.Now().Sub(mtime) < c.opts.TTL {
				if f, err := os.Open(p); err == nil {
					return f, source{name: p, expires: mtime.Add(c.opts.TTL)}, nil
				}
			}
		}
		dlErr := c.refresh(ctx, cloud, file, p)
		if dlErr == nil {
			if f, err := os.Open(p); err == nil {
				return f, source{name: p, expires: c.opts.Now().Add(c.opts.TTL)}, nil
			}
		}
		// Retry once the offline back-off is over, not on every query.
		retry := c.retryAt()
		if statErr == nil {
			if f, err := os.Open(p); err == nil {
				return f, source{name: p, expires: retry}, nil // stale but usable
			}
		}
		if c.opts.NoEmbedded {
			return nil, source{}, fmt.Errorf("%w %s: %v", ErrNoCatalog, cloud, dlErr)
		}
		if f, err := embedded.Open(cloud, file); err == nil {
			return f, source{name: embedded.Source, expires: retry}, nil
		}
		return nil, source{}, fmt.Errorf("%w %s: %v", ErrNoCatalog, cloud, dlErr)
	}
	if !c.opts.NoEmbedded {
		if f, err := embedded.Open(cloud, file); err == nil {
			return f, source{name: embedded.Source}, nil
		}
	}
	return nil, source{}, fmt.Errorf("%w %s: no home directory for the catalog cache; set %s", ErrNoCatalog, cloud, EnvDir)
}

// refresh downloads one file into the cache unless the hosted catalog was
// found unreachable a short while ago. An unreachable network starts the
// back-off and is said once, at debug level; a missing file (HTTP 404) is
// just this file's error.
func (c *Catalog) refresh(ctx context.Context, cloud, file, dest string) error {
	c.mu.Lock()
	skip := c.opts.Now().Before(c.offlineUntil)
	c.mu.Unlock()
	if skip {
		return errOffline
	}
	err := c.download(ctx, cloud, file, dest)
	var ne net.Error
	if err != nil && errors.As(err, &ne) {
		c.mu.Lock()
		c.offlineUntil = c.opts.Now().Add(offlineBackoff)
		say := !c.saidOffline
		c.saidOffline = true
		c.mu.Unlock()
		if say {
			c.opts.Logger.Debug("hosted price catalog unreachable; using the cached or built-in catalog", "error", err)
		}
	}
	return err
}

var errOffline = errors.New("hosted catalog unreachable a moment ago; not retried yet")

// retryAt is when a file that could not be downloaded should be tried again.
func (c *Catalog) retryAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.offlineUntil.After(c.opts.Now()) {
		return c.offlineUntil
	}
	return c.opts.Now().Add(offlineBackoff)
}

// accelerators reads common/accelerators.csv for canonical names; a missing file
// only disables canonicalisation, it is not an error for queries.
func (c *Catalog) accelerators(ctx context.Context) *accelNames {
	c.accOnce.Do(func() {
		c.acc = &accelNames{byLower: map[string]string{}}
		f, _, err := c.open(ctx, "common", "accelerators.csv")
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

// Preload loads the given clouds (all of Clouds when none) side by side, so
// a query over many clouds, or a server warming up, does not parse them one
// after the other. Errors are left for the queries to report.
func (c *Catalog) Preload(ctx context.Context, clouds ...string) {
	if len(clouds) == 0 {
		clouds = Clouds
	}
	var wg sync.WaitGroup
	for _, name := range clouds {
		if !IsCatalogCloud(strings.ToLower(name)) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.cloud(ctx, name)
		}()
	}
	c.accelerators(ctx)
	wg.Wait()
}
