package task

import (
	"sync/atomic"

	"github.com/skygo/skygo/internal/task/taskdoc"
)

// schemaValidator is the JSON-Schema check of task and volume documents,
// set by the binaries that link it (the API server imports
// internal/task/taskschema, which sets it). Without it the loader still
// decodes and checks every field it builds, with the same positions; what
// only the schema catches (an unknown field, say) then passes here, and
// the CLI, which loads without it, has the server validate the YAML first.
var schemaValidator atomic.Pointer[taskdoc.Validator]

// SetSchemaValidator installs the schema check.
func SetSchemaValidator(v taskdoc.Validator) { schemaValidator.Store(&v) }

// SchemaChecked says whether this binary checks task YAML against the
// schema (false in the CLI).
func SchemaChecked() bool { return schemaValidator.Load() != nil }

func schemaReady() error {
	if v := schemaValidator.Load(); v != nil {
		return (*v).Ready()
	}
	return nil
}

// schemaIssues runs one of the validator's checks on a decoded document
// and locates its issues in file.
func schemaIssues(file string, m any, idx *posIndex, check func(taskdoc.Validator, any, taskdoc.Locator) []taskdoc.Issue) ErrorList {
	v := schemaValidator.Load()
	if v == nil {
		return nil
	}
	var out ErrorList
	for _, is := range check(*v, m, idx) {
		out = append(out, &Error{File: file, Line: is.Line, Col: is.Col, Path: is.Path, Msg: is.Msg})
	}
	return out
}
