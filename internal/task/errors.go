package task

import (
	"fmt"
	"strings"
)

// Error is one problem in a YAML file, located as precisely as the loader
// could: file, line and column of the offending key or value, and the field
// path inside the document ("resources.any_of[1].cpus").
type Error struct {
	File string
	Line int // 1-based; 0 when unknown
	Col  int // 1-based; 0 when unknown
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is several independent problems found in one pass (schema
// validation reports every violation, not just the first).
type ErrorList []*Error

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// asError returns err itself when it holds exactly one problem, so callers
// that only print get the simplest shape.
func (l ErrorList) asError() error {
	switch len(l) {
	case 0:
		return nil
	case 1:
		return l[0]
	}
	return l
}
