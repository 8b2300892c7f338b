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
		{nil, 2, "", "usage: sky-node agent"},
		{[]string{"version"}, 0, "linux/" + runtime.GOARCH, ""},
		{[]string{"help"}, 0, "sky-node agent", ""},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"agent", "ping", "--json"}, 0, `{"ok":true}`, ""},
		{[]string{"agent"}, 2, "", "usage: sky agent <verb>"},
		{[]string{"serve-lb"}, 2, "", `unknown command "serve-lb"`},
	} {
		var out, errOut bytes.Buffer
		code := run(c.args, strings.NewReader(""), &out, &errOut)
		if code != c.code || !strings.Contains(out.String(), c.stdout) || !strings.Contains(errOut.String(), c.stderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out.String(), errOut.String(), c.code, c.stdout, c.stderr)
		}
	}
}
