package core

import "encoding/json"

// rawMap decodes a stored JSON object (a history's resources, as the
// cost report shows them).
func rawMap(b []byte) map[string]any {
	var m map[string]any
	if len(b) > 0 {
		_ = json.Unmarshal(b, &m)
	}
	return m
}
