package resources

import (
	"regexp"
	"strings"
)

var memSuffix = regexp.MustCompile(`(\d+)\s*GB`)

// GPUName maps a GPU product name (nvidia-smi's, GPU Feature
// Discovery's with its dashes read as spaces) to the accelerator name used in
// task YAMLs: "NVIDIA A100-SXM4-80GB" → "A100-80GB", "Tesla V100-SXM2-16GB"
// → "V100", "NVIDIA H100 80GB HBM3" → "H100", "NVIDIA GeForce RTX 4090" →
// "RTX4090". Only the A100 has a memory variant in the catalog.
func GPUName(smi string) string {
	s := strings.TrimSpace(smi)
	if s == "" {
		return ""
	}
	for _, p := range []string{"NVIDIA ", "Tesla ", "GeForce ", "Quadro "} {
		s = strings.TrimPrefix(s, p)
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '-' })
	if len(fields) == 0 {
		return ""
	}
	name := fields[0]
	if (name == "RTX" || name == "GTX") && len(fields) > 1 {
		name += fields[1]
	}
	if name == "A100" {
		if m := memSuffix.FindStringSubmatch(s); m != nil && m[1] == "80" {
			return "A100-80GB"
		}
	}
	return name
}
