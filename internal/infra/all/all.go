// Package all links in the infrastructures of this build, one file each;
// the server imports it, and nothing else names an infrastructure.
//
// The ones with heavy SDKs or rarely needed can be left out of a build
// with a tag: `go build -tags skygo_omit_aws,skygo_omit_kubernetes
// ./cmd/...`. A left-out kind is still known by name, so asking for it
// says which tag took it out instead of "unknown infrastructure".
package all

import (
	_ "github.com/skygo/skygo/internal/infra/local" // this machine
	_ "github.com/skygo/skygo/internal/infra/ssh"   // SSH node pools
)
