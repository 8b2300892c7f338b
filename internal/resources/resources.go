// Package resources is the resources: section of a task: parsing from
// decoded YAML, validation, canonical string and JSON forms.
package resources

// Resources is one resource request. The resources helper owns its fields.
type Resources struct {
	// filled in by the resources work
}

// Parse validates v (a value decoded from YAML: map[string]any, []any,
// string, int, float64, bool or nil) and returns the Resources.
// Errors are *fielderr.Error with a path relative to resources.
func Parse(v any) (*Resources, error) {
	return &Resources{}, nil
}
