package core

import "encoding/json"

func jsonUnmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}

// rawMap decodes a stored JSON object for resources.Parse.
func rawMap(b []byte) map[string]any {
	var m map[string]any
	_ = jsonUnmarshal(b, &m)
	return m
}
