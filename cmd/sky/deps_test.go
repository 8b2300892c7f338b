package main

import (
	"os/exec"
	"path"
	"strings"
	"testing"
)

// forbidden are what the sky command line must not link: each path and
// every package below it: the server side (operations, state, agent, load balancer,
// infrastructures) and the libraries whose size and package inits made
// `sky --help` cost 30 ms and 40 MiB. The server program (sky-server)
// has them; sky hands its verbs over to it.
var forbidden = []string{
	"github.com/skygo/skygo/internal/core",
	"github.com/skygo/skygo/internal/server",
	"github.com/skygo/skygo/internal/servermain",
	"github.com/skygo/skygo/internal/state",
	"github.com/skygo/skygo/internal/agent", // agentapi, the protocol's words, is allowed
	"github.com/skygo/skygo/internal/backend",
	"github.com/skygo/skygo/internal/controller",
	"github.com/skygo/skygo/internal/jobs",
	"github.com/skygo/skygo/internal/serve",
	"github.com/skygo/skygo/internal/infra",
	"github.com/skygo/skygo/internal/storage/s3bucket", // storage itself (names, node scripts) links no SDK
	"github.com/skygo/skygo/internal/awsx",
	"github.com/skygo/skygo/internal/catalog",
	"github.com/skygo/skygo/internal/optimizer",
	"github.com/skygo/skygo/internal/task/taskschema",
	"github.com/skygo/skygo/internal/config/configschema",
	"github.com/aws",
	"k8s.io",
	"sigs.k8s.io",
	"github.com/jackc/pgx",
	"modernc.org/sqlite",
	"github.com/prometheus",
	"github.com/santhosh-tekuri/jsonschema",
}

// allowed are exceptions to a forbidden prefix; a * stands for one path
// element. An infrastructure's descriptor (internal/infra/<name>/kind:
// its names, config section, credential check) and its command-line
// extras (internal/infra/<name>/cliext: the commands it adds) are the
// parts of a plug-in the command line links, with the converter of
// `sky slurm convert`.
var allowed = []string{
	"github.com/skygo/skygo/internal/agent/agentapi",
	"github.com/skygo/skygo/internal/infra/*/kind",
	"github.com/skygo/skygo/internal/infra/*/cliext",
	"github.com/skygo/skygo/internal/infra/slurm/convert",
}

// TestDeps (Tailscale's deptest idea): the packages `go list -deps
// ./cmd/sky` names include none of the forbidden ones.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps named only %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		if bad := forbiddenBy(d); bad != "" {
			t.Errorf("cmd/sky links %s (forbidden: %s and below)", d, bad)
		}
	}
}

func forbiddenBy(pkg string) string {
	for _, a := range allowed {
		if ok, _ := path.Match(a, pkg); ok || strings.HasPrefix(pkg, a+"/") {
			return ""
		}
	}
	for _, f := range forbidden {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return f
		}
	}
	return ""
}

// The matcher itself: a path catches the packages below it, allowances
// win, and a look-alike name is not caught.
func TestForbiddenBy(t *testing.T) {
	for pkg, want := range map[string]string{
		"github.com/aws/aws-sdk-go-v2/service/ec2":         "github.com/aws",
		"k8s.io/client-go/kubernetes/scheme":               "k8s.io",
		"github.com/skygo/skygo/internal/infra/aws":        "github.com/skygo/skygo/internal/infra",
		"github.com/skygo/skygo/internal/infra/aws/kind":   "",
		"github.com/skygo/skygo/internal/infra/ssh/cliext": "",
		"github.com/skygo/skygo/internal/infra/slurm/node": "github.com/skygo/skygo/internal/infra",
		"github.com/skygo/skygo/internal/infra/aws/iam":    "github.com/skygo/skygo/internal/infra",
		"github.com/skygo/skygo/internal/agent":            "github.com/skygo/skygo/internal/agent",
		"github.com/skygo/skygo/internal/agent/agentapi":   "",
		"github.com/skygo/skygo/internal/serverless":       "",
		"github.com/skygo/skygo/internal/client":           "",
		"github.com/skygo/skygo/internal/storage":          "",
		"github.com/skygo/skygo/internal/storage/s3bucket": "github.com/skygo/skygo/internal/storage/s3bucket",
		"github.com/santhosh-tekuri/jsonschema/v6":         "github.com/santhosh-tekuri/jsonschema",
	} {
		if got := forbiddenBy(pkg); got != want {
			t.Errorf("forbiddenBy(%s) = %q, want %q", pkg, got, want)
		}
	}
}
