// Package configdoc is what the config loader (internal/config) and its
// schema check (internal/config/configschema) share: the seam between them
// and the typo suggestion both use. The schema check links a JSON-Schema
// library whose start-up and size the CLI must not pay, so it plugs into
// the loader from the API server; both sides import only this package.
package configdoc

import (
	"strings"

	"github.com/skygo/skygo/internal/editdist"
)

// Issue is one problem found by the schema, before it is tied to a
// source: path tokens plus message, and whether it is about a key.
type Issue struct {
	Path  []string
	Msg   string
	AtKey bool
}

// Validator checks a decoded config value against the config schema.
type Validator interface {
	// Check returns the most useful issue with v, or nil; hooks checks v
	// as the hooks section alone (a task's config.hooks), not the whole
	// config. An error is a schema that cannot be used.
	Check(v any, hooks bool) (*Issue, error)
}

// Suggest returns the allowed name closest to name, if it is close enough
// to be a plausible typo.
func Suggest(name string, allowed []string) string {
	best, bestD := "", 1<<30
	for _, a := range allowed {
		if d := editdist.Levenshtein(strings.ToLower(name), strings.ToLower(a)); d < bestD {
			best, bestD = a, d
		}
	}
	limit := len(name) / 3
	if limit < 2 {
		limit = 2
	}
	if bestD <= limit || (best != "" && (strings.Contains(best, name) || strings.Contains(name, best)) && len(name) >= 3) {
		return best
	}
	return ""
}
