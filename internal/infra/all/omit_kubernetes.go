//go:build skygo_omit_kubernetes

package all

import "github.com/skygo/skygo/internal/check"

func init() { check.Omit("kubernetes", "skygo_omit_kubernetes") }
