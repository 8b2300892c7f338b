// Command sky-server is SkyGo's API server and the verbs that need its
// heavy packages (infrastructures, cloud SDKs, the state database). Users
// run sky, which carries this binary and starts it (internal/bundle).
package main

import (
	"os"

	"github.com/skygo/skygo/internal/servermain"
)

func main() {
	os.Exit(servermain.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
