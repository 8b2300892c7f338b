// Command sky is SkyGo: SkyPilot's model in one static binary.
package main

import (
	"os"

	"github.com/skygo/skygo/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
