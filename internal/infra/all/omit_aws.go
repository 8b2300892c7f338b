//go:build skygo_omit_aws

package all

import "github.com/skygo/skygo/internal/check"

func init() { check.Omit("aws", "skygo_omit_aws") }
