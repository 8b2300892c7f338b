package infra

import (
	"reflect"
	"testing"
)

func TestPricingHourly(t *testing.T) {
	p := Pricing{CPU: 0.5, Memory: 0.1, Accelerators: map[string]float64{"H100": 4}}
	cases := []struct {
		cpus, mem float64
		acc       string
		count     float64
		want      float64
	}{
		{4, 16, "", 0, 4*0.5 + 16*0.1},
		{32, 256, "H100", 8, 32}, // CPU and memory not charged with an accelerator
		{32, 0, "h100", 2, 8},
		{32, 0, "A100", 2, 0}, // unlisted accelerator
	}
	for _, c := range cases {
		if got := p.Hourly(c.cpus, c.mem, c.acc, c.count); got != c.want {
			t.Errorf("Hourly(%+v) = %v, want %v", c, got, c.want)
		}
	}
	if (Pricing{}).Hourly(4, 4, "", 0) != 0 {
		t.Error("no pricing costs 0")
	}
}

func TestPricingOverlay(t *testing.T) {
	var p Pricing
	for _, v := range []any{
		map[string]any{"cpu": 0.5, "accelerators": map[string]any{"H100": 3, "A100": 2}},
		nil,
		map[string]any{"cpu": 0.25, "memory": 0.05, "accelerators": map[string]any{"H100": 3.5}},
	} {
		if err := p.Overlay(v); err != nil {
			t.Fatal(err)
		}
	}
	want := Pricing{CPU: 0.25, Memory: 0.05, Accelerators: map[string]float64{"H100": 3.5, "A100": 2}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("overlaid %+v, want %+v", p, want)
	}
	for _, bad := range []any{"cheap", map[string]any{"cpu": -1}, map[string]any{"gpu": 1}, map[string]any{"accelerators": []any{"H100"}}} {
		if err := (&Pricing{}).Overlay(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
