package config

import (
	"fmt"
	"strings"
	"sync/atomic"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/config/configdoc"
)

// schemaValidator is the JSON-Schema check of config sources, set by the
// binaries that link it (the API server's operations install
// internal/config/configschema). Without it, as in the CLI, a source is
// parsed and merged with the checks this package makes itself, and the
// server checks the config a request carries against the schema.
var schemaValidator atomic.Pointer[configdoc.Validator]

// SetSchemaValidator installs the schema check.
func SetSchemaValidator(v configdoc.Validator) { schemaValidator.Store(&v) }

// schemaCheck runs the schema check when this binary has one.
func schemaCheck(v any, hooks bool) (*configdoc.Issue, error) {
	if p := schemaValidator.Load(); p != nil {
		return (*p).Check(v, hooks)
	}
	return nil, nil
}

// suggest returns the allowed name closest to name, if it is a plausible
// typo.
func suggest(name string, allowed []string) string { return configdoc.Suggest(name, allowed) }

// ValidationError says that one config source is invalid: which source,
// where in it (line:column when the source is a file) and what is expected.
type ValidationError struct {
	Source string // file path, "--config", "task config", ...
	Line   int    // 1-based; 0 when unknown
	Column int
	Path   string // dotted key path, e.g. jobs.controller.resources
	Msg    string
}

func (e *ValidationError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Invalid config YAML from (%s): ", e.Source)
	switch {
	case e.Line > 0 && e.Column > 0:
		fmt.Fprintf(&sb, "line %d, column %d: ", e.Line, e.Column)
	case e.Line > 0:
		fmt.Fprintf(&sb, "line %d: ", e.Line)
	}
	if e.Path != "" {
		sb.WriteString(e.Path + ": ")
	}
	sb.WriteString(e.Msg)
	return sb.String()
}

// Validate checks a decoded config that has no source text (the config a
// request carries, merged by the client) against the schema; source names
// it in the error.
func Validate(m map[string]any, source string) error {
	return validateDoc(&doc{value: m}, source)
}

// validateDoc checks a parsed source against the full config schema and
// the rules a schema cannot express, and ties the error to source.
func validateDoc(d *doc, source string) error {
	if _, ok := d.value.(map[string]any); !ok {
		e := &ValidationError{Source: source, Msg: fmt.Sprintf("the config must be a mapping of keys to values, got %s", kindOf(d.value))}
		setPos(e, d.root)
		return e
	}
	issue, err := schemaCheck(d.value, false)
	if err != nil {
		return err
	}
	if issue == nil {
		return nil
	}
	e := &ValidationError{Source: source, Path: dotted(issue.Path), Msg: issue.Msg}
	if d.root != nil {
		setPos(e, locate(d.root, issue.Path, issue.AtKey))
	}
	return e
}

func setPos(e *ValidationError, n *yaml.Node) {
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
