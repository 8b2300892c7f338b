package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
)

// probeClient is shared by every probe: no keep-alive, since a probe
// must see a replica that stopped accepting connections, and no proxy
// from the server's environment.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

// probe is one readiness probe of a replica (service.md §Readiness
// probing): GET the path, or POST post_data as JSON, with the probe's
// headers; ready iff HTTP 200 within timeout_seconds.
func probe(ctx context.Context, base string, p api.ProbeSpec) error {
	if base == "" {
		return fmt.Errorf("the replica has no address yet")
	}
	timeout := time.Duration(max(p.TimeoutSeconds, 0.1) * float64(time.Second))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	method, body := http.MethodGet, io.Reader(nil)
	if p.PostData != "" {
		method, body = http.MethodPost, strings.NewReader(p.PostData)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+p.Path, body)
	if err != nil {
		return err
	}
	if p.PostData != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: no answer within %g s", method, p.Path, p.TimeoutSeconds)
		}
		return fmt.Errorf("%s %s: %v", method, p.Path, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d", method, p.Path, resp.StatusCode)
	}
	return nil
}
