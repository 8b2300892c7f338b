// Command sky is SkyGo: SkyPilot's model in one static binary.
package main

import (
	"os"

	"github.com/skygo/skygo/internal/cli"
	"github.com/skygo/skygo/internal/core"
)

func main() {
	cli.ServerOps = core.Ops
	os.Exit(cli.Execute())
}
