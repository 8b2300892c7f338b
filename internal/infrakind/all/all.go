// Package all links in what every infrastructure of SkyGo says of itself
// (internal/infra/<name>/kind): the light half of each plug-in, which the
// command line, the server and the tools read through internal/infrakind.
// The build's provisioning plug-ins are internal/infra/all, linked by the
// server alone. A kind is known here even when a build leaves its plug-in
// out (skygo_omit_* tags): asking for it then says which tag took it out.
package all

import (
	_ "github.com/skygo/skygo/internal/infra/aws/kind"        // EC2
	_ "github.com/skygo/skygo/internal/infra/kubernetes/kind" // pods
	_ "github.com/skygo/skygo/internal/infra/local/kind"      // this machine
	_ "github.com/skygo/skygo/internal/infra/slurm/kind"      // Slurm clusters
	_ "github.com/skygo/skygo/internal/infra/ssh/kind"        // SSH node pools
)
