package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
	"github.com/skygo/skygo/internal/version"
)

func TestColorDecision(t *testing.T) {
	tests := []struct {
		tty  bool
		env  map[string]string
		want bool
	}{
		{tty: true, env: map[string]string{"TERM": "xterm-256color"}, want: true},
		{tty: false, env: map[string]string{"TERM": "xterm"}, want: false},
		{tty: true, env: map[string]string{"NO_COLOR": "1", "TERM": "xterm"}, want: false},
		{tty: true, env: map[string]string{"NO_COLOR": "", "TERM": "xterm"}, want: true},
		{tty: true, env: map[string]string{"TERM": "dumb"}, want: false},
	}
	for _, tc := range tests {
		got := colorAllowed(tc.tty, func(k string) string { return tc.env[k] })
		if got != tc.want {
			t.Errorf("tty=%v env=%v: color %v, want %v", tc.tty, tc.env, got, tc.want)
		}
	}
	io, _, _ := testIO("", true)
	io.Color = false
	if s := io.Bold("x"); s != "x" {
		t.Errorf("Bold without colour = %q", s)
	}
	io.Color = true
	if s := io.Bold("x"); s != "\x1b[1mx\x1b[0m" {
		t.Errorf("Bold with colour = %q", s)
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("boom"), 1},
		{flagErrorf("bad flag"), 2},
		{fmt.Errorf("wrapped: %w", flagErrorf("bad")), 2},
		{&ExitError{Code: 100}, 100},
		{&ExitError{Code: 103, Msg: "cancelled"}, 103},
		{notAvailable("down", "x"), 1},
	}
	for _, tc := range tests {
		if got := exitCodeFor(tc.err); got != tc.want {
			t.Errorf("exitCodeFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	var buf bytes.Buffer
	printError(&buf, &ExitError{Code: 101})
	if buf.Len() != 0 {
		t.Errorf("silent ExitError printed %q", buf.String())
	}
	printError(&buf, errors.New("cluster dev not found"))
	if buf.String() != "Error: cluster dev not found\n" {
		t.Errorf("printError = %q", buf.String())
	}
}

func TestTableAndJSON(t *testing.T) {
	tb := newTable(nil, "NAME", "INFRA", "STATUS")
	tb.addRow("dev", "AWS (us-east-1)", "UP")
	tb.addRow("a-much-longer-name", "-", "STOPPED")
	var buf bytes.Buffer
	if err := tb.render(&buf); err != nil {
		t.Fatal(err)
	}
	want := "NAME                INFRA            STATUS\n" +
		"dev                 AWS (us-east-1)  UP\n" +
		"a-much-longer-name  -                STOPPED\n"
	if buf.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	type rec struct {
		Name   string `json:"name"`
		Nodes  int    `json:"nodes"`
		Status string `json:"status"`
	}
	if err := printJSON(&buf, []rec{{"dev", 2, "UP"}}); err != nil {
		t.Fatal(err)
	}
	if want := "[\n  {\n    \"name\": \"dev\",\n    \"nodes\": 2,\n    \"status\": \"UP\"\n  }\n]\n"; buf.String() != want {
		t.Errorf("json = %q, want %q", buf.String(), want)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"launch", "--cpu", "4"}, "did you mean --cpus?"},
		{[]string{"lanch"}, `did you mean "launch"?`},
		{[]string{"jobs", "lanch"}, `did you mean "launch"?`},
		{[]string{"status", "-o", "yaml"}, "choose table or json"},
		{[]string{"logs"}, "missing argument(s); expected CLUSTER [JOB_IDS]..."},
		{[]string{"down", "--graceful-timeout", "5", "x"}, "only applies with --graceful"},
		{[]string{"launch", "--num-nodes", "many"}, "invalid argument"},
		{[]string{"launch", "--num-nodes", "1e3", "--", "echo"}, "invalid argument"},
		{[]string{"launch", "--num-nodes", "99999999999999999999", "--", "echo"}, "invalid argument"},
		{[]string{"launch", "--num-nodes", "3000000000", "--", "echo"}, "out of range, must be at most 2147483647"},
		{[]string{"exec", "-c", "c", "--num-nodes", "0", "--", "echo"}, "must be a positive integer"},
		{[]string{"launch", "--config", "no-such-file.yaml", "--", "echo"}, "invalid --config"},
		{[]string{"jobs", "launch", "-o", "yaml", "--", "echo"}, "choose one of id, json"},
		{[]string{"serve", "up"}, "expected SERVICE_YAML"},
	}
	for _, tc := range tests {
		out, errOut, code := runInProcess(t, tc.args...)
		if code != 2 {
			t.Errorf("sky %v: exit %d, want 2 (stderr %q)", tc.args, code, errOut)
		}
		if !strings.HasPrefix(errOut, "Error: ") || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "--help' for more information") {
			t.Errorf("sky %v: stderr %q, want Error: ...%s... and a usage hint", tc.args, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("sky %v: stdout %q, want nothing", tc.args, out)
		}
	}
}

// A command whose machinery is missing still checks all its input, then
// says so in one line and exits 1.
func TestNotAvailableYet(t *testing.T) {
	tests := []struct {
		args []string
		line string
	}{
		{[]string{"dashboard"}, "Error: sky dashboard: the dashboard is not available in this build yet.\n"},
	}
	for _, tc := range tests {
		out, errOut, code := runBinary(t, nil, tc.args...)
		if code != 1 || errOut != tc.line || out != "" {
			t.Errorf("sky %v: exit %d stdout %q stderr %q; want exit 1 and %q", tc.args, code, out, errOut, tc.line)
		}
	}
	// Input is checked first: a broken YAML is reported, not the stand-in.
	bad := writeFile(t, "bad.yaml", "resources:\n  cpus: four\nrun: echo\n")
	_, errOut, code := runBinary(t, nil, "launch", bad)
	if code != 1 || !strings.Contains(errOut, "bad.yaml:2:") || strings.Contains(errOut, "not available") {
		t.Errorf("launch bad.yaml: exit %d stderr %q; want the loader's file:line error", code, errOut)
	}
}

// `sky serve up` and `sky serve update` make SkyPilot's checks of
// serve-up time before anything reaches a server, with the YAML's line.
func TestServeChecksBeforeAnyRequest(t *testing.T) {
	noService := writeFile(t, "job.yaml", "run: echo hi\n")
	mixed := writeFile(t, "mixed.yaml", "service:\n  readiness_probe: /\nresources:\n  ports: 8080\n  any_of:\n    - use_spot: true\n    - use_spot: false\nrun: echo\n")
	noPort := writeFile(t, "noport.yaml", "service:\n  readiness_probe: /\nrun: echo\n")
	pool := writeFile(t, "pool.yaml", "pool:\n  workers: 1\nrun: echo\n")
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "up", "-y", noService}, []string{"job.yaml", "Service section not found in the YAML file"}},
		{[]string{"serve", "up", "-y", pool}, []string{"pool.yaml is a pool YAML", "sky jobs pool apply"}},
		{[]string{"serve", "up", "-y", mixed}, []string{"mixed.yaml:3:", "Resources must either all use spot or none use spot"}},
		{[]string{"serve", "update", "-y", "svc", noPort}, []string{"noport.yaml", "Must only specify one port in resources"}},
		// The flag is applied before the check: --ports gives the port.
		{[]string{"serve", "up", "-y", "--use-spot", "--ports", "8080,8081", noPort}, []string{"got ports 8080-8081"}},
		{[]string{"serve", "up", "-y", "-n", "1bad", noPort}, []string{"invalid service name \"1bad\""}},
		{[]string{"serve", "status", "--endpoint"}, []string{"--endpoint needs exactly one SERVICE_NAME"}},
		{[]string{"serve", "status", "-o", "yaml"}, []string{"-o/--output"}},
		{[]string{"serve", "down", "-y", "--replica-id", "1", "a", "b"}, []string{"--replica-id needs exactly one SERVICE_NAME"}},
		{[]string{"serve", "logs", "svc"}, []string{"choose exactly one of --controller, --load-balancer or a replica ID"}},
	}
	for _, tc := range tests {
		out, errOut, code := runInProcess(t, tc.args...)
		if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 && !strings.Contains(errOut, "--help") {
			t.Errorf("sky %v: exit %d, stderr %q; want a one-line refusal", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("sky %v: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
		if out != "" {
			t.Errorf("sky %v: stdout %q, want nothing", tc.args, out)
		}
	}
}

func TestVersionAndCompletion(t *testing.T) {
	out, _, code := runBinary(t, nil, "--version")
	// The binary's commit is stamped by the build (-ldflags), so only its
	// presence is checked.
	if code != 0 || !strings.Contains(out, version.Version) || !strings.Contains(out, "commit ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, errOut, code := runInProcess(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "sky") || len(out) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, code, len(out), errOut)
		}
	}
	if _, _, code := runInProcess(t, "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
}

// TestValidateExamples runs `sky validate` on the project's example
// tasks: a summary line per task, and a located error for a broken file.
func TestValidateExamples(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"task-minimal.yaml", []string{"YAML is valid.", "minimal: aws"}},
		{"task-rocm-ddp.yaml", []string{"YAML is valid.", "rocm-ddp: kubernetes", "gpus=MI300:4", "cpus=128", "mem=512+", "image=docker:rocm/pytorch:latest"}},
		{"pipeline-train-eval.yaml", []string{"YAML is valid.", "train: ", "eval: ", "gpus=A100:1"}},
	}
	for _, tc := range tests {
		out, errOut, code := runBinary(t, []string{"NO_COLOR=1"}, "validate", testutil.Testdata("tasks", tc.file))
		if code != 0 {
			t.Errorf("validate %s: exit %d, stderr %q", tc.file, code, errOut)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("validate %s: output %q lacks %q", tc.file, out, w)
			}
		}
	}
	_, errOut, code := runBinary(t, nil, "validate", testutil.Testdata("tasks", "invalid", "memory-not-number.yaml"))
	if code != 1 || !regexpMatch(`memory-not-number.yaml:4:\d+: `, errOut) {
		t.Errorf("invalid YAML: exit %d, stderr %q; want exit 1 with file:line:col", code, errOut)
	}
}

func regexpMatch(pattern, s string) bool {
	return regexpMust(pattern).MatchString(s)
}

// A --secret value never shows up in any output, whatever the command does
// with it: success, a load error, or the not-available stand-in.
func TestSecretNeverPrinted(t *testing.T) {
	const secret = "s3cr3t-Value-9f8e7d"
	good := writeFile(t, "task.yaml", "name: sec\nsecrets:\n  API_KEY: null\nenvs:\n  SHOWN: $API_KEY\nrun: echo $API_KEY\n")
	bad := writeFile(t, "bad.yaml", "secrets:\n  API_KEY: null\nresources:\n  cpus: nope\nrun: echo\n")
	dotenv := writeFile(t, "secrets.env", "OTHER="+secret+"\n")
	runs := [][]string{
		{"validate", good, "--secret", "API_KEY=" + secret},
		{"validate", good, "--secret-file", dotenv, "--secret", "API_KEY=" + secret},
		{"validate", bad, "--secret", "API_KEY=" + secret},
		{"launch", good, "--secret", "API_KEY=" + secret},
		{"launch", good, "--secret", "bad key=" + secret},
		{"jobs", "launch", good, "--secret", "API_KEY=" + secret, "-o", "json"},
	}
	for _, args := range runs {
		out, errOut, _ := runBinary(t, []string{"NO_COLOR=1"}, args...)
		if strings.Contains(out+errOut, secret) {
			t.Errorf("sky %v printed the secret:\nstdout %q\nstderr %q", args[:2], out, errOut)
		}
	}
}

// BenchmarkHelp measures `sky --help` as a whole process against /bin/true
// in the same run, so the ratio says how much our start-up adds.
func BenchmarkHelp(b *testing.B) {
	bin := testutil.SkyBinary(b)
	timeIt := func(name string, args ...string) time.Duration {
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if err := exec.Command(name, args...).Run(); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	b.ResetTimer()
	base := timeIt("/bin/true")
	sky := timeIt(bin, "--help")
	b.ReportMetric(float64(sky.Microseconds()), "sky-us/op")
	b.ReportMetric(float64(base.Microseconds()), "true-us/op")
	b.ReportMetric(float64(sky)/float64(base), "ratio")
}

func regexpMust(p string) *regexp.Regexp { return regexp.MustCompile(p) }
