package check

import "sync"

// A build can leave an infrastructure out (internal/infra/all's
// skygo_omit_* tags). Its checker still runs here, where it costs no
// dependency, but its result must not say "enabled": the optimizer would
// then offer a place nothing in this build can provision.
var (
	omitMu  sync.Mutex
	omitted = map[string]string{}
)

// Omit records that this build leaves out the infrastructure name (as in
// allowed_clouds: "aws", "kubernetes") because of the build tag tag.
// Called from init, before any Run.
func Omit(name, tag string) {
	omitMu.Lock()
	defer omitMu.Unlock()
	omitted[name] = tag
}

// OmittedBy returns the build tag that left name out, or "".
func OmittedBy(name string) string {
	omitMu.Lock()
	defer omitMu.Unlock()
	return omitted[name]
}
