// Package fielderr is the shared error type for "this field of a document is
// wrong". Packages that validate parts of a YAML document (resources, config,
// task) return it with a path relative to the part they were given; the
// loader that owns the YAML nodes prefixes the path and turns it into a
// file:line:column message.
package fielderr

import "strings"

// Error says that the value at Path is wrong, and why.
// Path uses dots for keys and [i] for list items: "any_of[1].cpus".
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// New returns an error for path.
func New(path, msg string) *Error { return &Error{Path: path, Msg: msg} }

// Under returns a copy of e with prefix put in front of its path.
func (e *Error) Under(prefix string) *Error {
	switch {
	case prefix == "":
		return &Error{Path: e.Path, Msg: e.Msg}
	case e.Path == "":
		return &Error{Path: prefix, Msg: e.Msg}
	case strings.HasPrefix(e.Path, "["):
		return &Error{Path: prefix + e.Path, Msg: e.Msg}
	default:
		return &Error{Path: prefix + "." + e.Path, Msg: e.Msg}
	}
}
