package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestRunDispatch(t *testing.T) {
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{nil, 2, "", "usage: sky-lb serve-lb"},
		{[]string{"version"}, 0, "linux/" + runtime.GOARCH, ""},
		{[]string{"help"}, 0, "sky-lb serve-lb", ""},
		{[]string{"agent"}, 2, "", `unknown command "agent"`},
		{[]string{"serve-lb"}, 2, "", "--service"},
	} {
		var out, errOut bytes.Buffer
		code := run(c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String(), c.stdout) || !strings.Contains(errOut.String(), c.stderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out.String(), errOut.String(), c.code, c.stdout, c.stderr)
		}
	}
}
