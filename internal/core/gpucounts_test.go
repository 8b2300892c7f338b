package core

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestAcceleratorCounts(t *testing.T) {
	for _, c := range []struct {
		name, js string
		want     map[string][]float64
		wantErr  string
	}{
		{"distinct counts ascending", `{"A100": [{"accelerator_count": 8}, {"accelerator_count": 1}, {"accelerator_count": 8}]}`,
			map[string][]float64{"A100": {1, 8}}, ""},
		{"fractional counts kept", `{"T4": [{"accelerator_count": 0.5}, {"accelerator_count": 1}]}`,
			map[string][]float64{"T4": {0.5, 1}}, ""},
		{"an offering without a count adds none", `{"H100": [{"cloud": "Slurm"}]}`,
			map[string][]float64{"H100": {}}, ""},
		{"nothing offered", `{}`, map[string][]float64{}, ""},
		{"no listing", ``, map[string][]float64{}, ""},
		{"not a listing", `[1]`, nil, "reading the accelerator listing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := acceleratorCounts(json.RawMessage(c.js))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("acceleratorCounts = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
