package editdist

import "testing"

func TestDistances(t *testing.T) {
	tests := []struct {
		a, b     string
		lev, osa int
		sim      float64
	}{
		{"", "", 0, 0, 1},
		{"cpus", "cpus", 0, 0, 1},
		{"cpu", "cpus", 1, 1, 6.0 / 7},
		{"asw", "aws", 2, 1, 4.0 / 6},
		{"nodes", "num_nodes", 4, 4, 10.0 / 14},
		{"abc", "xyz", 3, 3, 0},
	}
	for _, tc := range tests {
		if got := Levenshtein(tc.a, tc.b); got != tc.lev {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.lev)
		}
		if got := OSA(tc.a, tc.b); got != tc.osa {
			t.Errorf("OSA(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.osa)
		}
		if got := Similarity(tc.a, tc.b); got != tc.sim {
			t.Errorf("Similarity(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.sim)
		}
	}
}
