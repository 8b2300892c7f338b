//go:build !skygo_omit_slurm

package all

import _ "github.com/skygo/skygo/internal/infra/slurm" // Slurm clusters through their login nodes
