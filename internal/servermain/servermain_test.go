package servermain

import (
	"bytes"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/infrakind"
)

// The program's own dispatch: what sky hands over reaches its verb, and
// a wrong command line is a usage error that names what went wrong. (The
// server itself is exercised end to end by the e2e suites through sky.)
func TestMainDispatch(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{nil, 2, "", "usage: sky-server api start"},
		{[]string{"launch"}, 2, "", `unknown command "launch"`},
		{[]string{"api", "stop"}, 2, "", "usage: sky-server api start"},
		{[]string{"api", "start", "--foreground", "--bogus"}, 1, "", "flag provided but not defined: -bogus"},
		{[]string{"api", "start", "--foreground", "extra"}, 1, "", `unexpected arguments ["extra"]`},
		{[]string{"--version"}, 0, "sky-server ", ""},
		{[]string{"k8s-exec"}, 2, "", "usage: sky k8s-exec"},
		{[]string{"serve-lb"}, 2, "", `unknown command "serve-lb"`},
		{[]string{"agent", "ping"}, 2, "", `unknown command "agent"`},
	} {
		var out, errOut bytes.Buffer
		code := Main(tc.args, strings.NewReader(""), &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(errOut.String(), tc.wantErr) {
			t.Errorf("Main(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.wantOut, tc.wantErr)
		}
	}
}

// What sky hands over (every kind's verbs) is what this program serves,
// in a build that leaves the kind out too (with a message saying so).
func TestHandoverVerbsAreServed(t *testing.T) {
	var verbs []string
	for _, k := range infrakind.All() {
		verbs = append(verbs, k.Verbs...)
	}
	if len(verbs) == 0 {
		t.Fatal("no infrastructure declares a verb; the test would prove nothing")
	}
	for _, v := range verbs {
		var out, errOut bytes.Buffer
		if code := Main([]string{v}, strings.NewReader(""), &out, &errOut); strings.Contains(errOut.String(), "unknown command") {
			t.Errorf("%s: exit %d, %s", v, code, errOut.String())
		}
	}
}
