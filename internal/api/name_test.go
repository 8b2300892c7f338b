package api

import (
	"strings"
	"testing"
)

func TestCheckClusterName(t *testing.T) {
	good := []string{"a", "a..b", "a.b-c_d", "A1", "x" + strings.Repeat("y", MaxClusterNameLen-1)}
	for _, n := range good {
		if err := CheckClusterName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	bad := []string{"", "1a", "-a", "a-", "a.", "..", "../etc", "a/b", "a b", "a\nb", "é", "x" + strings.Repeat("y", MaxClusterNameLen)}
	for _, n := range bad {
		if err := CheckClusterName(n); err == nil {
			t.Errorf("%q accepted", n)
		}
	}
}
