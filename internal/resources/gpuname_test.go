package resources

import "testing"

func TestGPUName(t *testing.T) {
	tests := map[string]string{
		"NVIDIA A100-SXM4-80GB":   "A100-80GB",
		"NVIDIA A100-SXM4-40GB":   "A100",
		"NVIDIA A100 80GB PCIe":   "A100-80GB",
		"Tesla V100-SXM2-16GB":    "V100",
		"NVIDIA H100 80GB HBM3":   "H100",
		"NVIDIA GeForce RTX 4090": "RTX4090",
		"Tesla T4":                "T4",
		"NVIDIA L4":               "L4",
		"  ":                      "",
	}
	for in, want := range tests {
		if got := GPUName(in); got != want {
			t.Errorf("GPUName(%q) = %q, want %q", in, got, want)
		}
	}
}
