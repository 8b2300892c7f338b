// Package all links in every infrastructure of this build, one import line
// each; the server imports it, and nothing else names an infrastructure.
package all

import (
	_ "github.com/skygo/skygo/internal/infra/aws"        // EC2
	_ "github.com/skygo/skygo/internal/infra/kubernetes" // pods, through client-go
	_ "github.com/skygo/skygo/internal/infra/local"      // this machine
	_ "github.com/skygo/skygo/internal/infra/slurm"      // Slurm clusters through their login nodes
	_ "github.com/skygo/skygo/internal/infra/ssh"        // SSH node pools
)
