//go:build skygo_omit_aws

package kind

import "github.com/skygo/skygo/internal/infrakind"

// This build leaves the plug-in out (internal/infra/all): the kind stays
// known, but nothing can provision there.
func init() { infrakind.Omit(Name, "skygo_omit_aws") }
