// Command sky-node is SkyGo's node runtime: the agent that runs on every
// cluster node (`sky-node agent <verb>`, and the processes the agent
// starts from its own executable: the daemon, ranks, pid-init, the
// sandbox, the SSH server), with the node side of each infrastructure
// (internal/agent/all). It links no cloud SDK, no cobra, no database
// driver of the server (deps_test.go), so it stays small enough to copy
// to a node on every first launch and starts in a few milliseconds. The
// API server copies the build for the node's architecture to
// ~/.sky/bin/sky-node (internal/infra.EnsureBinary).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/skygo/skygo/internal/agent"
	_ "github.com/skygo/skygo/internal/agent/all" // the infrastructures' transports and rank environments
	"github.com/skygo/skygo/internal/version"
)

const usage = `usage: sky-node agent <verb> [flags]   the node agent (internal; see sky-node agent help)
       sky-node version                 this build's version and platform`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "agent":
		return agent.Main(context.Background(), args[1:], stdin, stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "sky-node %s (commit %s) %s/%s\n", version.Version, version.Commit, runtime.GOOS, runtime.GOARCH)
		return 0
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sky-node: unknown command %q\n%s\n", args[0], usage)
	return 2
}
