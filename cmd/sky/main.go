// Command sky is SkyGo: SkyPilot's model in one static binary. It is the
// command line; the API server and the other runtime programs it starts
// travel inside it (internal/bundle).
package main

import (
	"os"

	"github.com/skygo/skygo/internal/bundle"
	"github.com/skygo/skygo/internal/cli"
)

func main() {
	os.Exit(cli.Execute(bundle.Path))
}
