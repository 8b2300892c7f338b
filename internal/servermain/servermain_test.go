package servermain

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/jobs"
	"github.com/skygo/skygo/internal/serve"
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
	verbs := 0
	for _, k := range infrakind.All() {
		for _, v := range k.Verbs {
			verbs++
			var out, errOut bytes.Buffer
			code := Main([]string{v}, strings.NewReader(""), &out, &errOut)
			// Without arguments a served verb answers its usage; a verb of
			// a kind this build leaves out names the tag that did it.
			wantCode, want := 2, "usage: sky "+v
			if tag := infrakind.OmittedBy(k.Name); tag != "" {
				wantCode, want = 1, tag
			}
			if code != wantCode || !strings.Contains(errOut.String(), want) {
				t.Errorf("%s (%s): exit %d, stderr %q; want %d and %q", v, k.Name, code, errOut.String(), wantCode, want)
			}
		}
	}
	if verbs == 0 {
		t.Fatal("no infrastructure declares a verb; the test would prove nothing")
	}
}

// The test knobs reach the controllers' timings; unset ones stay zero
// (SkyPilot's), and a value that is no positive duration stops the
// server with what to do rather than being ignored.
func TestReadTestKnobs(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	k, err := readTestKnobs(env())
	if err != nil || k != (testKnobs{}) {
		t.Fatalf("no knobs set: %+v, %v; want zero timings", k, err)
	}
	k, err = readTestKnobs(env(EnvJobsRetryGap, "1s", EnvServeDecisionInterval, "2s", EnvServeQPSWindow, "10s",
		EnvServeRetryGap, "3s", EnvUploadMaxAge, "90m"))
	if err != nil {
		t.Fatal(err)
	}
	want := testKnobs{jobs: jobs.Timings{RetryGap: time.Second},
		serve:        serve.Timings{DecisionInterval: 2 * time.Second, QPSWindow: 10 * time.Second, RetryGap: 3 * time.Second},
		uploadMaxAge: 90 * time.Minute}
	if k != want {
		t.Fatalf("knobs = %+v, want %+v", k, want)
	}
	for _, bad := range []string{"soon", "0s", "-1s", "10"} {
		_, err := readTestKnobs(env(EnvServeQPSWindow, bad))
		if err == nil || !strings.Contains(err.Error(), EnvServeQPSWindow) || !strings.Contains(err.Error(), "positive duration") {
			t.Errorf("%s=%q: err = %v, want one naming the variable and what it takes", EnvServeQPSWindow, bad, err)
		}
	}
}
