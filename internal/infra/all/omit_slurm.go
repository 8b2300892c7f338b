//go:build skygo_omit_slurm

package all

import "github.com/skygo/skygo/internal/check"

func init() { check.Omit("slurm", "skygo_omit_slurm") }
