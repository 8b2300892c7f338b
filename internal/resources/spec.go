package resources

import (
	"encoding/json"
	"errors"

	"github.com/skygo/skygo/internal/fielderr"
)

// Spec is a Resources as the API and the stored records carry it (the
// resources of api.TaskSpec): encoded as its canonical mapping (ToMap),
// with nothing redacted, since the nodes need all of it, and decoded
// with Parse, so a value that is not a resources mapping fails to decode,
// its error naming the field. A task's resources are thus checked once,
// where they enter a program (the server's edge, a stored record's
// read), and passed on typed.
type Spec struct {
	Resources
}

// SpecOf is r as a Spec; a nil r is the zero Spec (run anywhere).
func SpecOf(r *Resources) Spec {
	if r == nil {
		return Spec{}
	}
	return Spec{Resources: *r.Copy()}
}

// IsZero reports whether nothing at all was asked for; such a Spec is
// left out of a record (json omitzero), as an empty mapping was.
func (s Spec) IsZero() bool { return s.Resources.IsZero() }

// MarshalJSON writes the canonical mapping, secrets included (Resources'
// own MarshalJSON, for display, redacts them).
func (s Spec) MarshalJSON() ([]byte, error) { return json.Marshal(s.ToMap()) }

// UnmarshalJSON reads any form Parse accepts; an error is a
// *fielderr.Error whose path starts at "resources".
func (s *Spec) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r, err := Parse(v)
	if err != nil {
		var fe *fielderr.Error
		if errors.As(err, &fe) {
			return fe.Under("resources")
		}
		return err
	}
	s.Resources = *r
	return nil
}

// ParseSpec is Parse for a Spec: resources built as a mapping in code
// (or decoded from YAML) rather than received as JSON.
func ParseSpec(v any) (Spec, error) {
	r, err := Parse(v)
	if err != nil {
		return Spec{}, err
	}
	return Spec{Resources: *r}, nil
}

// DecodeJSON reads resources stored as their canonical mapping (a
// cluster's record and its history): none at all is the zero Resources.
func DecodeJSON(b []byte) (*Resources, error) {
	var s Spec
	if len(b) > 0 {
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, err
		}
	}
	return &s.Resources, nil
}

// OpenAPISchema describes a Spec in the API's description: an object,
// the resources: section of a task (its fields are the task schema's,
// not repeated here).
func (Spec) OpenAPISchema() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": map[string]any{"description": "any JSON value"}}
}
