// Command sky-lb is the SkyServe load balancer: one process per service,
// started by the API server's service controller on the server's machine
// (`sky-lb serve-lb --service NAME --listen HOST:PORT --control SOCKET`)
// and driven through its control socket (internal/serve/lb). It is a
// binary of its own, not a verb of a larger one, so a service pays in
// memory only for the proxy: no agent, no database driver, no SDK
// (deps_test.go).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/skygo/skygo/internal/serve/lb"
	"github.com/skygo/skygo/internal/version"
)

const usage = `usage: sky-lb serve-lb [flags]   a SkyServe load balancer (internal; started by the API server)
       sky-lb version            this build's version and platform`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run keeps the serve-lb verb of the command line the controller has
// always written: it finds its load balancers again after a restart by
// that word in /proc/PID/cmdline (internal/serve.lbCmdline).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve-lb":
		return lb.Main(args[1:], stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "sky-lb %s (commit %s) %s/%s\n", version.Version, version.Commit, runtime.GOOS, runtime.GOARCH)
		return 0
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sky-lb: unknown command %q\n%s\n", args[0], usage)
	return 2
}
