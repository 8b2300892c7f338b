package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The transcripts of cli-output.md §Transcripts, replayed through the
// built binary with stdout piped (as CI pipelines and agents read it):
// the exact lines, their order, their stream, and which keep their ANSI
// codes. SkyPilot's smoke tests grep these; so do its users' scripts.

// SkyPilot's lines, byte for byte. Lines made on the server keep their
// codes in a pipe; the CLI's own lines have none there.
const (
	reset       = "\x1b[0m"
	launchingOn = reset + "⚙︎ Launching on Local."
	instanceUp  = "\x1b[2m└── " + reset + "Instance is up."
	setupDetach = reset + "\x1b[32m✓ Setup detached." + reset + reset
	jobStarted  = "\x1b[2m└── " + reset + "Job started. Streaming logs... \x1b[2m(Ctrl-C to exit log streaming; job will not be killed)" + reset
	waiting1    = "\x1b[2m├── " + reset + "\x1b[2mWaiting for task resources on 1 node." + reset
)

func clusterLaunched(c string) string {
	return reset + "\x1b[32m✓ Cluster launched: " + c + "." + reset + reset
}
func jobSubmitted(id int) string { return fmt.Sprintf(reset+"⚙︎ Job submitted, ID: %d", id) }
func jobFinished(st string) string {
	return reset + "\x1b[32m✓ Job finished (status: " + st + ")." + reset + reset
}

// prefixed is a job line with Ray's cyan prefix, any pid.
func prefixed(who, text string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta("\x1b[36m("+who) + `pid=[0-9]+\)` + regexp.QuoteMeta(reset+" "+text) + "$")
}

// usefulCommands is the block after a launch, plain (stdout is a pipe).
func usefulCommands(c string, job int) []string {
	out := []string{"", "📋 Useful Commands"}
	if job > 0 {
		out = append(out, fmt.Sprintf("Job ID: %d", job),
			fmt.Sprintf("├── To cancel the job:\t\tsky cancel %s %d", c, job),
			fmt.Sprintf("├── To stream job logs:\t\tsky logs %s %d", c, job),
			"└── To view job queue:\t\tsky queue "+c)
	}
	return append(out, "Cluster name: "+c,
		"├── To log into the head VM:\tssh "+c,
		"├── To submit a job:\t\tsky exec "+c+" yaml_file",
		"├── To stop the cluster:\tsky stop "+c,
		"└── To teardown the cluster:\tsky down "+c)
}

// optimizerTable is the plan a new local cluster's launch prints.
var optimizerTable = []any{
	"Considered resources (1 node):",
	regexp.MustCompile(`^-+$`),
	regexp.MustCompile(`^ INFRA +INSTANCE +vCPUs +Mem\(GB\) +GPUS +COST \(\$\) +CHOSEN$`),
	regexp.MustCompile(`^-+$`),
	regexp.MustCompile(`^ Local +- .* ✔$`),
	regexp.MustCompile(`^-+$`),
	"",
}

// expectLines fails unless out is exactly the lines of want, each a
// string (the whole line) or a *regexp.Regexp (matching it).
func expectLines(t *testing.T, what, out string, want ...any) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var flat []any
	for _, w := range want {
		switch w := w.(type) {
		case []string:
			for _, s := range w {
				flat = append(flat, s)
			}
		case []any:
			flat = append(flat, w...)
		default:
			flat = append(flat, w)
		}
	}
	ok := len(got) == len(flat)
	for i := 0; ok && i < len(got); i++ {
		switch w := flat[i].(type) {
		case string:
			ok = got[i] == w
		case *regexp.Regexp:
			ok = w.MatchString(got[i])
		}
		if !ok {
			t.Errorf("%s: line %d is %q, want %q", what, i+1, got[i], flat[i])
		}
	}
	if !ok {
		t.Errorf("%s: got %d lines:\n%s\nwant %d:\n%q", what, len(got), quoteLines(got), len(flat), flat)
	}
}

func quoteLines(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%3d %q\n", i+1, l)
	}
	return b.String()
}

// lineAfter reports whether the line after some line containing first
// contains every one of next (SkyPilot's `grep -A1 first | grep next`).
func lineAfter(out, first string, within int, next ...string) bool {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, first) {
			continue
		}
		for j := i + 1; j < len(lines) && j <= i+within; j++ {
			all := true
			for _, n := range next {
				all = all && strings.Contains(lines[j], n)
			}
			if all {
				return true
			}
		}
	}
	return false
}

// smokeTask is the task of SkyPilot's minimal smoke test, whose launch
// output VALIDATE_LAUNCH_OUTPUT checks.
const smokeTask = "name: min\nsetup: echo running setup\nrun: echo task run finish\n"

// validateLaunchOutput is SkyPilot's VALIDATE_LAUNCH_OUTPUT
// (smoke_tests_utils.py), line by line.
func validateLaunchOutput(t *testing.T, out string) {
	t.Helper()
	for _, c := range []struct {
		first  string
		within int
		next   []string
	}{
		{"Launching on", 1, []string{"is up."}},
		{"Setup detached", 5, []string{"Job submitted"}},
		{"Job submitted, ID:", 1, []string{"Waiting for task resources on "}},
		{"Job started. Streaming logs...", 1, []string{"(setup", "running setup"}},
		{"(setup", 1, []string{"(min, pid="}},
		{"task run finish", 1, []string{"Job finished (status: SUCCEEDED)"}},
		{"Job finished (status: SUCCEEDED)", 5, []string{"Job ID:"}},
		{"Useful Commands", 1, []string{"Job ID:"}},
	} {
		if !lineAfter(out, c.first, c.within, c.next...) {
			t.Errorf("VALIDATE_LAUNCH_OUTPUT: no line with %q within %d line(s) after %q:\n%s", c.next, c.within, c.first, out)
		}
	}
}

// want0 fails unless r exited 0 with nothing on stderr: every line of a
// transcript is on stdout.
func want0(t *testing.T, r result) {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Errorf("want exit 0 and an empty stderr:\n%s", r)
	}
}

func TestLaunchTranscript(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	yaml := writeFile(t, "min.yaml", smokeTask)
	setupLine, runLine := prefixed("setup ", "running setup"), prefixed("min, ", "task run finish")

	t.Run("new cluster", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "tr", yaml)
		want0(t, r)
		expectLines(t, "launch", r.stdout,
			"YAML to run: "+yaml, "Running on cluster: tr", optimizerTable,
			launchingOn, instanceUp, clusterLaunched("tr"), setupDetach, jobSubmitted(1),
			waiting1, jobStarted, setupLine, runLine, jobFinished("SUCCEEDED"),
			usefulCommands("tr", 1))
		validateLaunchOutput(t, r.stdout)
	})
	t.Run("existing cluster", func(t *testing.T) {
		// No optimizer, provisioning said again, setup run again in the job.
		r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "tr", yaml)
		want0(t, r)
		expectLines(t, "relaunch", r.stdout,
			"YAML to run: "+yaml, "Running on cluster: tr",
			launchingOn, instanceUp, clusterLaunched("tr"), setupDetach, jobSubmitted(2),
			waiting1, jobStarted, setupLine, runLine, jobFinished("SUCCEEDED"),
			usefulCommands("tr", 2))
		validateLaunchOutput(t, r.stdout)
	})
	t.Run("fast", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "launch", "-y", "--fast", "-c", "tr", yaml)
		want0(t, r)
		expectLines(t, "launch --fast", r.stdout,
			"YAML to run: "+yaml, "Running on cluster: tr", jobSubmitted(3),
			waiting1, jobStarted, runLine, jobFinished("SUCCEEDED"),
			usefulCommands("tr", 3))
	})
	t.Run("no setup, detached", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "launch", "-y", "--no-setup", "-d", "-c", "tr", yaml)
		want0(t, r)
		expectLines(t, "launch --no-setup -d", r.stdout,
			"YAML to run: "+yaml, "Running on cluster: tr",
			launchingOn, instanceUp, clusterLaunched("tr"), "Setup commands skipped.", jobSubmitted(4),
			usefulCommands("tr", 4))
		// test_basic.py: grep -oE "Job submitted, ID: [0-9]+" | awk '{print $4}'
		if m := regexp.MustCompile(`Job submitted, ID: [0-9]+`).FindString(r.stdout); strings.Fields(m)[3] != "4" {
			t.Errorf("grep -oE of the job id: %q", m)
		}
		e.waitJob("tr", 4, 30*time.Second, "SUCCEEDED", func(j job) bool { return j.Status == "SUCCEEDED" })
		logs := e.must("logs", "tr", "4")
		if strings.Contains(logs.stdout, "(setup") || !strings.Contains(logs.stdout, "task run finish") {
			t.Errorf("the --no-setup job ran setup, or not its run:\n%s", logs)
		}
	})
	t.Run("async", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "launch", "-y", "--async", "-c", "tr", yaml)
		want0(t, r)
		expectLines(t, "launch --async", r.stdout,
			"YAML to run: "+yaml, "Running on cluster: tr",
			regexp.MustCompile(`^Submitted sky\.launch request: [0-9a-f-]{36}$`),
			regexp.MustCompile(`^├── Check logs with: sky api logs [0-9a-f]{8}$`),
			regexp.MustCompile(fmt.Sprintf(`^├── Or, visit: http://127\.0\.0\.1:%d/api/stream\?request_id=[0-9a-f]{8}$`, e.port)),
			regexp.MustCompile(`^└── To cancel the request, run: sky api cancel [0-9a-f]{8}$`),
			"")
		// test_basic.py and test_cli.py pick the commands out with sed.
		id := regexp.MustCompile(`(?m)^Submitted.*request: (.*)$`).FindStringSubmatch(r.stdout)
		logsCmd := regexp.MustCompile(`(?m)^.*with: (sky api logs .*)$`).FindStringSubmatch(r.stdout)
		cancelCmd := regexp.MustCompile(`(?m)^.*run: (sky api cancel .*)$`).FindStringSubmatch(r.stdout)
		if id == nil || logsCmd == nil || cancelCmd == nil || !strings.HasSuffix(logsCmd[1], id[1][:8]) {
			t.Fatalf("async hint: request %v, logs %v, cancel %v", id, logsCmd, cancelCmd)
		}
		follow := e.exec(cmdTimeout, nil, strings.Fields(logsCmd[1])[1:]...)
		want0(t, follow)
		expectLines(t, logsCmd[1], follow.stdout,
			launchingOn, instanceUp, clusterLaunched("tr"), setupDetach, jobSubmitted(5),
			waiting1, jobStarted, setupLine, runLine, jobFinished("SUCCEEDED"))
	})
	t.Run("failing run", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "tr", "--", "echo before; exit 1")
		if r.code != 100 || r.stderr != "" {
			t.Errorf("launch of a failing job: want exit 100 and an empty stderr:\n%s", r)
		}
		expectLines(t, "failing launch", r.stdout,
			"Command to run: echo before; exit 1", "Running on cluster: tr",
			launchingOn, instanceUp, clusterLaunched("tr"), jobSubmitted(6),
			waiting1, jobStarted, prefixed("task, ", "before"),
			"ERROR: \x1b[31mJob 6 failed with return code list:"+reset+" [1] ",
			jobFinished("FAILED"), usefulCommands("tr", 6))
	})
	t.Run("failing setup", func(t *testing.T) {
		bad := writeFile(t, "bad.yaml", "name: min\nsetup: echo bad setup; exit 7\nrun: echo must-not-run\n")
		r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "tr", bad)
		if r.code != 100 || r.stderr != "" {
			t.Errorf("launch with a failing setup: want exit 100 and an empty stderr:\n%s", r)
		}
		expectLines(t, "failing setup", r.stdout,
			"YAML to run: "+bad, "Running on cluster: tr",
			launchingOn, instanceUp, clusterLaunched("tr"), setupDetach, jobSubmitted(7),
			waiting1, jobStarted, prefixed("setup ", "bad setup"),
			regexp.MustCompile(`^ERROR: \x1b\[31mJob 7's setup failed\. Failed workers: \(pid=[0-9]+, returncode=7\)\. See error logs above for more details\.\x1b\[0m$`),
			jobFinished("FAILED_SETUP"), usefulCommands("tr", 7))
		if j := e.queue("tr")[7]; j.Status != "FAILED_SETUP" {
			t.Errorf("job 7 = %+v, want FAILED_SETUP", j)
		}
	})
}

func TestExecAndLogsTranscript(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	yaml := writeFile(t, "min.yaml", smokeTask)
	e.must("launch", "-y", "-c", "ex", yaml)

	t.Run("exec", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "exec", "ex", "--", "echo exec-ran")
		want0(t, r)
		// No setup, no Useful Commands.
		expectLines(t, "exec", r.stdout,
			"Command to run: echo exec-ran", "Submitting job to cluster: ex", jobSubmitted(2),
			waiting1, jobStarted, prefixed("task, ", "exec-ran"), jobFinished("SUCCEEDED"))
	})
	t.Run("exec failing", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "exec", "ex", "exit 1")
		if r.code != 100 {
			t.Errorf("sky exec ex \"exit 1\": want exit 100:\n%s", r)
		}
	})
	t.Run("exec detached", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "exec", "-d", "ex", yaml)
		want0(t, r)
		expectLines(t, "exec -d", r.stdout, "YAML to run: "+yaml, "Submitting job to cluster: ex", jobSubmitted(4))
		e.waitJob("ex", 4, 30*time.Second, "finished", func(j job) bool { return j.EndAt != nil })
	})
	t.Run("logs", func(t *testing.T) {
		r := e.exec(cmdTimeout, nil, "logs", "ex", "1")
		want0(t, r)
		expectLines(t, "logs", r.stdout,
			"\x1b[33mTailing logs of job 1 on cluster 'ex'..."+reset,
			waiting1, jobStarted, prefixed("setup ", "running setup"), prefixed("min, ", "task run finish"), jobFinished("SUCCEEDED"))
		// exec runs no setup.
		r = e.exec(cmdTimeout, nil, "logs", "ex")
		want0(t, r)
		expectLines(t, "logs of the last job", r.stdout,
			"\x1b[33mTailing logs of the last job on cluster 'ex'..."+reset,
			waiting1, jobStarted, prefixed("min, ", "task run finish"), jobFinished("SUCCEEDED"))
		if r := e.exec(cmdTimeout, nil, "logs", "ex", "3"); r.code != 100 || !strings.Contains(r.stdout, jobFinished("FAILED")) {
			t.Errorf("logs of a failed job: want exit 100 and the FAILED line:\n%s", r)
		}
		r = e.exec(cmdTimeout, nil, "logs", "ex", "99")
		if r.code != 102 || !strings.Contains(r.stdout, "Job 99 not found (see `sky queue`).") {
			t.Errorf("logs of an unknown job: want exit 102 and its line:\n%s", r)
		}
	})
	t.Run("logs --status", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			code int
			want []string
		}{
			{[]string{"1"}, 0, []string{"Job 1: SUCCEEDED"}},
			{[]string{"3"}, 100, []string{"Job 3: FAILED"}},
			{nil, 0, []string{"Job 4: SUCCEEDED"}},
			{[]string{"99"}, 102, []string{"Job 99: None", "Job 99 not found"}},
		} {
			r := e.exec(cmdTimeout, nil, append([]string{"logs", "ex", "--status"}, c.args...)...)
			if r.code != c.code || r.stderr != "" {
				t.Errorf("want exit %d and an empty stderr:\n%s", c.code, r)
			}
			expectLines(t, "logs --status", r.stdout, c.want)
		}
	})
}

// TestTerminalShowsStages: on a terminal the same lines are printed, with
// the CLI's own lines styled, and SkyGo's stages drawn as a live line
// that is gone once the command ends: the final screen, codes aside, is
// the piped transcript.
func TestTerminalShowsStages(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	yaml := writeFile(t, "min.yaml", smokeTask)
	piped := e.must("launch", "-y", "-c", "tt", yaml).stdout
	e.must("down", "-y", "tt")

	raw, stderr, code := e.onTerminal(t, "launch", "-y", "-c", "tt", yaml)
	if code != 0 || stderr != "" {
		t.Fatalf("launch on a terminal: exit %d, stderr %q\n%q", code, stderr, raw)
	}
	for _, want := range []string{
		"\r\x1b[KProvisioning tt on Local (1 node)...",
		"\r\x1b[KStarting node agents...",
		"\x1b[36mYAML to run: " + reset + yaml,
		"\x1b[1msky cancel tt 1" + reset,
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("the terminal did not get %q:\n%q", want, raw)
		}
	}
	if strings.Contains(raw, "\x1b_") {
		t.Errorf("a status line reached the terminal undrawn:\n%q", raw)
	}
	pids := regexp.MustCompile(`pid=[0-9]+`)
	plain := func(s string) string { return pids.ReplaceAllString(stripANSI(s), "pid=N") }
	if got, want := plain(screen(raw)), plain(piped); got != want {
		t.Errorf("final screen differs from the piped output\nscreen:\n%s\npiped:\n%s", got, want)
	}
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// screen is what a terminal shows after out: "\r" returns to the line's
// start and "\x1b[K" erases to its end (the only cursor moves the CLI
// makes); other codes are kept as they are.
func screen(out string) string {
	var lines []string
	var cur []rune
	col := 0
	for i := 0; i < len(out); {
		switch {
		case strings.HasPrefix(out[i:], "\x1b[K"):
			cur = cur[:col]
			i += 3
		case out[i] == '\r':
			col = 0
			i++
		case out[i] == '\n':
			lines = append(lines, string(cur))
			cur, col = nil, 0
			i++
		default:
			r := []rune(out[i:])[0]
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
			i += len(string(r))
		}
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return strings.Join(lines, "\n") + "\n"
}

// onTerminal runs sky with stdout on a pseudo-terminal (stderr a pipe)
// and returns what the terminal received, with the terminal's "\r\n"
// for a newline made "\n" again. The API server must already run: one
// started from here would hold the terminal open.
func (e *skyEnv) onTerminal(t *testing.T, args ...string) (out, stderr string, code int) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer ptmx.Close()
	var unlock int32
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Fatalf("unlocking the pseudo-terminal: %v", errno)
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatalf("naming the pseudo-terminal: %v", errno)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bin, args...)
	cmd.Env = append(append([]string{}, e.env...), "TERM=xterm")
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = pts, &se
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var so bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&so, ptmx) // ends with EIO once the command's side is closed
	}()
	timer := time.AfterFunc(cmdTimeout, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err = cmd.Wait()
	timer.Stop()
	<-read
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(so.String(), "\r\n", "\n"), se.String(), code
}
