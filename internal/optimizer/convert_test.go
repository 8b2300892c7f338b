package optimizer

import (
	"reflect"
	"testing"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/resources"
)

func TestFromResources(t *testing.T) {
	tests := []struct {
		name        string
		yaml        map[string]any
		want        []Request
		wantOrdered bool
	}{
		{"empty", map[string]any{}, []Request{{}}, false},
		{"gpu, infra, spot, cpus",
			map[string]any{"accelerators": "H100:8", "infra": "aws/us-east-1", "use_spot": true, "cpus": "8+", "memory": 64},
			[]Request{{Cloud: "aws", Region: "us-east-1", AccName: "H100", AccCount: 8, UseSpot: true,
				CPUs: catalog.Bound{Value: 8, AtLeast: true}, Memory: catalog.Bound{Value: 64}}}, false},
		{"accelerator list is ordered",
			map[string]any{"accelerators": []any{"H100:8", "A100:8"}},
			[]Request{{AccName: "H100", AccCount: 8}, {AccName: "A100", AccCount: 8}}, true},
		{"any_of with docker image",
			map[string]any{"image_id": "docker:ubuntu", "any_of": []any{map[string]any{"infra": "gcp"}, map[string]any{"infra": "lambda"}}},
			[]Request{{Cloud: "gcp", ImageID: "docker:ubuntu"}, {Cloud: "lambda", ImageID: "docker:ubuntu"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := resources.Parse(tt.yaml)
			if err != nil {
				t.Fatal(err)
			}
			got, ordered := FromResources(r)
			if !reflect.DeepEqual(got, tt.want) || ordered != tt.wantOrdered {
				t.Errorf("got %+v ordered=%v\nwant %+v ordered=%v", got, ordered, tt.want, tt.wantOrdered)
			}
		})
	}
}
