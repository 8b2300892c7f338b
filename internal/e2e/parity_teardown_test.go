package e2e

import (
	"strings"
	"testing"
)

// The transcripts of cli-output.md ("`sky down` / `sky stop` / `sky
// autostop` / `sky start`", "`sky cancel`", "Confirmation prompts"), replayed
// through the built binary: SkyPilot users' scripts grep these lines and
// branch on these exit codes.

const (
	tipNotFound      = "Cluster(s) not found (tip: see `sky status`).\n"
	tipNotFoundStart = "Cluster(s) not found (tip: see `sky status`). Do you mean to use `sky launch` to provision a new cluster?\n"
)

// notFound is the server's line naming missing clusters; it keeps its bold
// even on a pipe, as server lines do.
func notFound(names string) string {
	return "Cluster(s) not found: \x1b[1m" + names + "\x1b[0m.\n"
}

// bar is how the finished progress bar of N clusters stays on a pipe.
func bar(desc string) string {
	return desc + " " + strings.Repeat("━", 40) + " 100% 0:00:00\n"
}

// sh runs a shell line with $SKY naming the binary, for stdin as scripts
// give it (`yes |`, `</dev/null`).
func (e *skyEnv) sh(line string) result {
	e.t.Helper()
	return runCmd(e.t, cmdTimeout, append(append([]string{}, e.env...), "SKY="+e.bin), "bash", "-c", line)
}

// stdin runs sky with the given standard input.
func (e *skyEnv) stdin(in string, args ...string) result {
	e.t.Helper()
	return runCmdStdin(e.t, cmdTimeout, e.env, in, e.bin, args...)
}

func wantRun(t *testing.T, r result, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code || r.stdout != stdout || r.stderr != stderr {
		t.Errorf("%s\nwant exit %d\n--- stdout:\n%q\n--- stderr:\n%q\n--- got stdout:\n%q", r, code, stdout, stderr, r.stdout)
	}
}

// TestTeardownOfMissingClusters: a cleanup step naming what is already
// gone succeeds (exit 0, no prompt: stdin is empty, so a prompt would
// abort), saying so in SkyPilot's two lines; cancel calls it a usage error.
func TestTeardownOfMissingClusters(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("status") // the server is up: what follows prints only its own lines
	wantRun(t, e.exec(cmdTimeout, nil, "down", "nope"), 0, notFound("nope")+tipNotFound, "")
	wantRun(t, e.exec(cmdTimeout, nil, "stop", "nope", "other"), 0, notFound("nope, other")+tipNotFound, "")
	wantRun(t, e.exec(cmdTimeout, nil, "autostop", "nope", "-i", "5"), 0, notFound("nope")+tipNotFound, "")
	wantRun(t, e.exec(cmdTimeout, nil, "autostop", "nope", "--cancel"), 0, notFound("nope")+tipNotFound, "")
	wantRun(t, e.exec(cmdTimeout, nil, "start", "nope"), 0, notFound("nope")+tipNotFoundStart, "")
	// -a with nothing there: only the tip.
	wantRun(t, e.exec(cmdTimeout, nil, "down", "-a"), 0, tipNotFound, "")
	wantRun(t, e.exec(cmdTimeout, nil, "stop", "-a", "-y"), 0, tipNotFound, "")
	wantRun(t, e.exec(cmdTimeout, nil, "start", "-a"), 0, tipNotFoundStart, "")

	for _, args := range [][]string{{"cancel", "-y", "nope", "1"}, {"cancel", "-y", "nope"}, {"cancel", "-y", "-a", "nope"}} {
		r := e.exec(cmdTimeout, nil, args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "Error: Cluster 'nope' does not exist.\n") {
			t.Errorf("%s\nwant exit 2 and stderr starting %q", r, "Error: Cluster 'nope' does not exist.")
		}
	}
	// Without a name or -a it is a usage error, not a no-op.
	if r := e.exec(cmdTimeout, nil, "down"); r.code != 2 || !strings.Contains(r.stderr,
		"Error: `sky down` requires either a cluster name or glob (see `sky status`), or the -a/--all flag for all your clusters, or the -u/--all-users flag for all clusters in your team.\n") {
		t.Errorf("%s\nwant the usage error of SkyPilot, exit 2", r)
	}
}

// TestTeardownSomeMissing: the missing ones are named once, the rest are
// stopped, started, scheduled and torn down, each on its own line, with
// the Summary when there are several.
func TestTeardownSomeMissing(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-c", "pa", "--", "true")
	e.must("launch", "-y", "-c", "pb", "--", "true")

	wantRun(t, e.exec(cmdTimeout, nil, "autostop", "-y", "pa", "nope", "-i", "30"), 0, notFound("nope")+"\n"+
		"Scheduling autostop on cluster 'pa'...done\n"+
		"  The cluster will be autostopped after 30 minutes of idleness.\n"+
		"  To cancel the autostop, run: sky autostop pa --cancel\n"+
		bar("Scheduling autostop on 1 cluster"), "")
	wantRun(t, e.exec(cmdTimeout, nil, "autostop", "-y", "pa", "--cancel"), 0, "\n"+
		"Cancelling autostop on cluster 'pa'...done\n"+bar("Cancelling autostop on 1 cluster"), "")

	wantRun(t, e.exec(cmdTimeout, nil, "stop", "-y", "pa", "nope", "pb"), 0, notFound("nope")+"\n"+
		"Stopping cluster pa...done.\n"+
		"  To restart the cluster, run: sky start pa\n"+
		"Stopping cluster pb...done.\n"+
		"  To restart the cluster, run: sky start pb\n"+
		bar("Stopping 2 clusters")+
		"\nSummary:\n"+
		"  ✓ Succeeded: pa, pb\n", "")
	for _, n := range []string{"pa", "pb"} {
		if c := e.status(false)[n]; c.Status != "STOPPED" {
			t.Errorf("after stop: %s is %+v, want STOPPED", n, c)
		}
	}

	// A failure is reported and the command still exits 0, as SkyPilot's.
	r := e.exec(cmdTimeout, nil, "autostop", "-y", "pa", "-i", "30")
	if r.code != 0 || !strings.Contains(r.stdout, "\"pa\" is STOPPED") || !strings.HasSuffix(r.stdout, "Cluster(s) failed. See details above.\n") {
		t.Errorf("%s\nwant exit 0, the reason, and the failure line last", r)
	}

	r = e.exec(cmdTimeout, nil, "start", "-y", "pa", "nope")
	if r.code != 0 || !strings.HasPrefix(r.stdout, notFound("nope")) || !strings.HasSuffix(r.stdout, "Cluster pa started.\n") {
		t.Errorf("%s\nwant exit 0, the missing one named first and 'Cluster pa started.' last", r)
	}
	if c := e.status(false)["pa"]; c.Status != "UP" {
		t.Errorf("after start: %+v, want UP", c)
	}
	// UP already: said so, nothing asked (stdin is empty).
	wantRun(t, e.exec(cmdTimeout, nil, "start", "pa"), 0, "Cluster pa already has status UP.\n", "")

	// SkyPilot's smoke test counts exactly 5 non-empty lines here.
	r = e.sh(`"$SKY" down -y pa pb 2>&1`)
	var lines []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	want := []string{"Terminating cluster pa...done.", "Terminating cluster pb...done.",
		strings.TrimSuffix(bar("Terminating 2 clusters"), "\n"), "Summary:", "  ✓ Succeeded: pa, pb"}
	if r.code != 0 || strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s\nwant exit 0 and exactly these non-empty lines:\n%s", r, strings.Join(want, "\n"))
	}
	if left := e.status(false); len(left) != 0 {
		t.Errorf("after down: %v", left)
	}
}

// TestPromptsReadStdin: the answer to a prompt comes from stdin, terminal
// or not; no, or no answer at all, aborts and leaves the cluster alone.
func TestPromptsReadStdin(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	const ask = "Terminating 1 cluster: pc. Proceed? [Y/n]: "

	// yes | sky launch: a new cluster is asked about and launched.
	r := e.sh(`yes | "$SKY" launch -c pc -- echo launched-by-yes`)
	// SkyPilot's first line says what will run; the optimizer's table
	// (what would be provisioned, at what price) and the question follow.
	ask0 := "\nLaunching a new cluster 'pc'. Proceed? [Y/n]: "
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Command to run: echo launched-by-yes\nConsidered resources (1 node):\n") ||
		!strings.Contains(r.stdout, "----\n"+ask0) || !strings.Contains(r.stdout, "(task, pid=") {
		t.Fatalf("%s\nwant the launch prompt answered by yes, and the job's output", r)
	}
	// An UP cluster of one's own is reused without a question.
	if r := e.sh(`"$SKY" launch -c pc -- echo reused </dev/null`); r.code != 0 || strings.Contains(r.stdout, "Proceed?") || !strings.Contains(r.stdout, "reused") {
		t.Errorf("%s\nwant no prompt on an UP cluster", r)
	}

	wantRun(t, e.stdin("n\n", "down", "pc"), 1, ask, "Aborted!\n")
	wantRun(t, e.sh(`"$SKY" down pc </dev/null`), 1, ask, "Aborted!\n")
	wantRun(t, e.stdin("nope\nNO\n", "down", "pc"), 1, ask+"Error: invalid input\n"+ask, "Aborted!\n")
	wantRun(t, e.stdin("", "cancel", "pc", "1"), 1, "Cancelling job 1 on cluster(s): pc. Proceed? [Y/n]: ", "Aborted!\n")
	wantRun(t, e.stdin("", "cancel", "pc"), 1, "No job IDs or --all/--all-users provided; cancelling the latest running job.\n"+
		"Cancelling the latest running job on cluster(s): pc. Proceed? [Y/n]: ", "Aborted!\n")
	wantRun(t, e.stdin("n\n", "autostop", "pc", "-i", "30"), 1, "Scheduling autostop on 1 cluster: pc. Proceed? [Y/n]: ", "Aborted!\n")
	if c := e.status(false)["pc"]; c.Status != "UP" || c.Autostop != -1 {
		t.Fatalf("after refused prompts: %+v, want UP without autostop", c)
	}

	// An empty answer takes the default, yes; the answer is not echoed, so
	// what follows starts on the prompt's line.
	wantRun(t, e.stdin("\n", "stop", "pc"), 0, "Stopping 1 cluster: pc. Proceed? [Y/n]: \n"+
		"Stopping cluster pc...done.\n  To restart the cluster, run: sky start pc\n"+bar("Stopping 1 cluster"), "")
	if c := e.status(false)["pc"]; c.Status != "STOPPED" {
		t.Fatalf("after stop: %+v, want STOPPED", c)
	}
	wantRun(t, e.sh(`"$SKY" launch -c pc -- true </dev/null`), 1, "Command to run: true\nRestarting the stopped cluster 'pc'. Proceed? [Y/n]: ", "Aborted!\n")
	wantRun(t, e.stdin("no\n", "start", "pc"), 1, "Restarting 1 cluster: pc. Proceed? [Y/n]: ", "Aborted!\n")
	if c := e.status(false)["pc"]; c.Status != "STOPPED" {
		t.Fatalf("after refused restarts: %+v, want STOPPED", c)
	}
	if r := e.stdin("Y\n", "start", "pc"); r.code != 0 || !strings.HasSuffix(r.stdout, "Cluster pc started.\n") {
		t.Errorf("%s\nwant the start answered", r)
	}

	// Other text asks again; then y goes ahead.
	wantRun(t, e.sh(`printf 'maybe\ny\n' | "$SKY" down pc`), 0, ask+"Error: invalid input\n"+ask+"\n"+
		"Terminating cluster pc...done.\n"+bar("Terminating 1 cluster"), "")
	if _, ok := e.status(false)["pc"]; ok {
		t.Errorf("pc survived an answered down")
	}

	e.must("launch", "-y", "-c", "pd", "--", "true")
	if r := e.sh(`printf 'y\n' | "$SKY" down pd`); r.code != 0 || !strings.Contains(r.stdout, "Terminating cluster pd...done.\n") {
		t.Errorf("%s\nwant printf 'y\\n' | sky down pd to tear it down", r)
	}
	if _, ok := e.status(false)["pd"]; ok {
		t.Errorf("pd survived an answered down")
	}
}
