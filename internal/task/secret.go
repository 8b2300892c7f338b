package task

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Redacted is what every printed form of a secret value shows.
const Redacted = "<redacted>"

// Secret is a secret value. Every way of printing it (fmt verbs, JSON,
// YAML, text marshalling) yields "<redacted>"; only Reveal returns the
// value, so a secret cannot leak through a log line or a dump by accident.
type Secret string

// Reveal returns the real value; call it only where the value is handed to
// the job environment.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string   { return Redacted }
func (s Secret) GoString() string { return fmt.Sprintf("task.Secret(%q)", Redacted) }

// Format makes %v, %s, %q, %x ... all print the redacted form.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", Redacted)
		return
	}
	fmt.Fprint(f, Redacted)
}

// MarshalText covers encoding/json, yaml and any text encoder.
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// MarshalYAML is needed because yaml.v3 ignores MarshalText for strings.
func (s Secret) MarshalYAML() (any, error) { return Redacted, nil }

// Redactor replaces known secret values in text with "<redacted>". Build
// one per task (Task.Redactor) or from any set of values, and pass every
// log line or output through it before it leaves the process.
type Redactor struct {
	values []string // longest first, so overlapping values redact fully
	repl   *strings.Replacer
}

// minSecretLen avoids turning every "1" or "a" in a log into <redacted>
// when someone sets a one-character secret.
const minSecretLen = 3

// NewRedactor returns a Redactor for the given secret values. Empty and
// very short values are ignored (redacting them would mangle output
// without protecting anything meaningful).
func NewRedactor(values ...string) *Redactor {
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

// Redactor returns a Redactor for the task's inline secrets.
func (t *Task) Redactor() *Redactor {
	vals := make([]string, 0, len(t.Secrets))
	for _, v := range t.Secrets {
		vals = append(vals, v.Reveal())
	}
	return NewRedactor(vals...)
}

// Redactor returns a Redactor for the inline secrets of every task.
func (d *DAG) Redactor() *Redactor {
	var vals []string
	for _, t := range d.Tasks {
		for _, v := range t.Secrets {
			vals = append(vals, v.Reveal())
		}
	}
	return NewRedactor(vals...)
}

// secretArgRE finds the value of a `--secret K=V` or `--secret=K=V`
// argument in a command line joined with spaces. "--secret-file" does not
// match: its argument is a path, not a value.
var secretArgRE = regexp.MustCompile(`(--secret(?:=|\s+))([A-Za-z_][A-Za-z0-9_]*)=\S*`)

// RedactCommandLine returns a recorded command line ("sky launch ...")
// safe to store and show: known secret values are replaced first (a value
// with spaces lost its quotes when the line was joined, so only the full
// value catches all of it), then whatever still follows a `--secret K=`,
// which covers values too short for a Redactor.
func RedactCommandLine(cmd string, values ...string) string {
	cmd = NewRedactor(values...).Redact(cmd)
	return secretArgRE.ReplaceAllString(cmd, "${1}${2}="+Redacted)
}
