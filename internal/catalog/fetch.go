package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// maxCatalogBytes bounds one download; the largest upstream file is ~4 MiB.
const maxCatalogBytes = 64 << 20

// download fetches <base>/<version>/<cloud>/<file> from each base URL in
// turn and atomically replaces dest (write to a temp file, then rename), so
// a concurrent reader never sees half a file.
func (c *Catalog) download(ctx context.Context, cloud, file, dest string) error {
	var errs []error
	for _, base := range c.opts.BaseURLs {
		url := strings.TrimRight(base, "/") + "/" + c.opts.Version + "/" + cloud + "/" + file
		err := c.fetchTo(ctx, url, dest)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("downloading %s catalog: %w", cloud, errors.Join(errs...))
}

func (c *Catalog) fetchTo(ctx context.Context, url, dest string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("creating catalog cache dir: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".download-*")
	if err != nil {
		return fmt.Errorf("creating catalog cache file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, maxCatalogBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: reading body: %w", url, err)
	}
	if n > maxCatalogBytes {
		return fmt.Errorf("%s: larger than %d bytes; refusing", url, maxCatalogBytes)
	}
	if n == 0 {
		return fmt.Errorf("%s: empty body", url)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("saving catalog to %s: %w", dest, err)
	}
	return nil
}
