package task

import (
	"fmt"
	"regexp"

	"github.com/skygo/skygo/internal/redact"
)

// Redacted is what every printed form of a secret value shows.
const Redacted = redact.Redacted

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

// Redactor replaces known secret values in text (redact.Redactor).
type Redactor = redact.Redactor

// NewRedactor is redact.New.
func NewRedactor(values ...string) *Redactor { return redact.New(values...) }

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
