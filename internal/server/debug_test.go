package server

import (
	"strings"
	"testing"
)

// TestDebugListenerOnlyOnLoopback: SKYGO_DEBUG_ADDR binds loopback
// addresses and refuses anything else, or a malformed value, with an
// error that names the variable.
func TestDebugListenerOnlyOnLoopback(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:0", true},
		{"localhost:0", true},
		{"0.0.0.0:0", false},
		{":0", false},
		{"10.1.2.3:6061", false},
		{"127.0.0.1", false},
	} {
		ln, err := debugListen(c.addr)
		if ln != nil {
			ln.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("debugListen(%q): %v, want ok=%v", c.addr, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), EnvDebugAddr) {
			t.Errorf("debugListen(%q): %v does not name %s", c.addr, err, EnvDebugAddr)
		}
	}
}
