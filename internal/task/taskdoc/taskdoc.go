// Package taskdoc is what the task loader (internal/task) and its schema
// check (internal/task/taskschema) share: the field path syntax, how a
// value is shown in a message, and the seam between them. The schema
// check links a JSON-Schema library whose start-up and size the CLI must
// not pay, so it plugs into the loader from the binaries that validate
// (the API server); both sides import only this small package.
package taskdoc

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

var identKey = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_\-]*$`)

// JoinKey appends a mapping key to a path. Keys that are not plain words
// (paths like /data, keys with dots) are quoted in brackets so the path
// stays unambiguous: file_mounts["/data/x.y"].
func JoinKey(prefix, key string) string {
	if !identKey.MatchString(key) {
		return prefix + "[" + strconv.Quote(key) + "]"
	}
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// JoinIndex appends a list index to a path.
func JoinIndex(prefix string, i int) string { return prefix + "[" + strconv.Itoa(i) + "]" }

// Describe shows a value in an error message: short, quoted when a string.
func Describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 60 {
			x = x[:57] + "..."
		}
		return fmt.Sprintf("%q", x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case bool:
		return fmt.Sprint(x)
	case json.Number:
		return x.String()
	}
	return fmt.Sprint(v)
}

// Locator says where a field path was written in the loaded file.
type Locator interface {
	// Lookup is the position of path p, or of its nearest written
	// ancestor; preferKey asks for the key's position.
	Lookup(p string, preferKey bool) (line, col int)
	// ParentPath is the enclosing path of p; false for the root.
	ParentPath(p string) (string, bool)
}

// Issue is one schema violation, located.
type Issue struct {
	Path      string
	Line, Col int
	Msg       string
}

// Validator checks decoded task and volume documents against their
// schemas. Issues come sorted by position, at most ten.
type Validator interface {
	// Ready reports a schema that cannot be used (it does not compile).
	Ready() error
	Task(v any, loc Locator) []Issue
	Volume(v any, loc Locator) []Issue
}
