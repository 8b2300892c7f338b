package main

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// forbidden are the import path prefixes the node runtime and the load
// balancer must not link, even indirectly: the cloud and Kubernetes SDKs,
// the server's PostgreSQL driver, the CLI's command framework and the
// server's metrics. Each would make every node and every service pay
// for what only the API server or the CLI uses.
var forbidden = []string{
	"github.com/aws/", "k8s.io/", "sigs.k8s.io/", "github.com/jackc/pgx", "github.com/spf13/cobra",
	"github.com/prometheus/",
	// SkyGo's own packages that bring them in.
	"github.com/skygo/skygo/internal/awsx", "github.com/skygo/skygo/internal/storage/s3bucket",
	"github.com/skygo/skygo/internal/infra/aws", "github.com/skygo/skygo/internal/infra/kubernetes",
	"github.com/skygo/skygo/internal/cli", "github.com/skygo/skygo/internal/server", "github.com/skygo/skygo/internal/core",
}

// lbForbidden is what the load balancer must not link besides: the
// node agent and its database, which a proxy has no use for.
var lbForbidden = []string{"github.com/skygo/skygo/internal/agent", "modernc.org/sqlite", "modernc.org/libc"}

// TestDeps is Tailscale's deptest for the node runtime and the load
// balancer: `go list -deps` of each binary for each architecture it is built for, against the
// forbidden list.
func TestDeps(t *testing.T) {
	for _, pkg := range []string{"github.com/skygo/skygo/cmd/sky-node", "github.com/skygo/skygo/cmd/sky-lb"} {
		for _, goarch := range []string{"amd64", "arm64"} {
			cmd := exec.Command("go", "list", "-deps", pkg)
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s (linux/%s): %v\n%s", pkg, goarch, err, stderr.String())
			}
			deps := strings.Fields(string(out))
			if len(deps) < 10 {
				t.Fatalf("go list -deps %s listed only %q", pkg, deps)
			}
			not := forbidden
			if strings.HasSuffix(pkg, "/sky-lb") {
				not = append(slices.Clone(forbidden), lbForbidden...)
			}
			for _, d := range deps {
				if pluginNotNodeSide(d) {
					t.Errorf("%s (linux/%s) depends on %s; of an infrastructure the node runtime links only its node side (internal/infra/<name>/node)", pkg, goarch, d)
				}
				for _, f := range not {
					if strings.HasPrefix(d, f) {
						t.Errorf("%s (linux/%s) depends on %s; the node runtime must not link it (find the import with `go list -deps -f '{{.ImportPath}}: {{.Imports}}' %s`)", pkg, goarch, d, pkg)
					}
				}
			}
		}
	}
}

// pluginNotNodeSide reports whether d is an infrastructure's package other
// than its node side, the one part of a plug-in sky-node may link.
func pluginNotNodeSide(d string) bool {
	const infra = "github.com/skygo/skygo/internal/infra"
	return (d == infra || strings.HasPrefix(d, infra+"/")) && !strings.HasSuffix(d, "/node")
}
