//go:build !skygo_omit_kubernetes

package all

import _ "github.com/skygo/skygo/internal/infra/kubernetes" // pods, through client-go
