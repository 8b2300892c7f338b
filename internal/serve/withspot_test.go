package serve

import (
	"encoding/json"
	"testing"

	"github.com/skygo/skygo/internal/resources"
)

// TestWithSpot: an on-demand replica of a spot service asks for no spot
// instance in any of its candidates, and the service's own resources
// are left as they were.
func TestWithSpot(t *testing.T) {
	res, err := resources.ParseSpec(map[string]any{"use_spot": true, "cpus": "2+",
		"any_of": []any{map[string]any{"accelerators": "A100:1"}, map[string]any{"accelerators": "L4:1", "use_spot": true}}})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(res)
	got, _ := json.Marshal(withSpot(res, false))
	want := `{"any_of":[{"accelerators":"A100:1","use_spot":false},{"accelerators":"L4:1","use_spot":false}],"cpus":"2+","use_spot":false}`
	if string(got) != want {
		t.Errorf("withSpot(false) = %s\nwant %s", got, want)
	}
	if after, _ := json.Marshal(res); string(after) != string(before) {
		t.Errorf("withSpot changed its argument: %s, was %s", after, before)
	}
}
