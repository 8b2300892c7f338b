// Package redact replaces known secret values in text. It is apart from
// the task loader, whose secrets it redacts, so that the node agent can
// redact its logs without linking the loader (its YAML, schema and
// resource parsing).
package redact

import (
	"sort"
	"strings"
)

// Redacted is what every printed form of a secret value shows.
const Redacted = "<redacted>"

// Redactor replaces known secret values in text with "<redacted>". Build
// one per task (task.Task.Redactor) or from any set of values, and pass every
// log line or output through it before it leaves the process.
type Redactor struct {
	values []string // longest first, so overlapping values redact fully
	repl   *strings.Replacer
}

// minSecretLen avoids turning every "1" or "a" in a log into <redacted>
// when someone sets a one-character secret.
const minSecretLen = 3

// New returns a Redactor for the given secret values. Empty and
// very short values are ignored (redacting them would mangle output
// without protecting anything meaningful).
func New(values ...string) *Redactor {
	uniq := map[string]bool{}
	for _, v := range values {
		if len(v) >= minSecretLen {
			uniq[v] = true
		}
	}
	r := &Redactor{}
	for v := range uniq {
		r.values = append(r.values, v)
	}
	sort.Slice(r.values, func(i, j int) bool {
		if len(r.values[i]) != len(r.values[j]) {
			return len(r.values[i]) > len(r.values[j])
		}
		return r.values[i] < r.values[j]
	})
	pairs := make([]string, 0, 2*len(r.values))
	for _, v := range r.values {
		pairs = append(pairs, v, Redacted)
	}
	r.repl = strings.NewReplacer(pairs...)
	return r
}

// Redact returns s with every secret value replaced.
func (r *Redactor) Redact(s string) string {
	if r == nil || len(r.values) == 0 {
		return s
	}
	return r.repl.Replace(s)
}
