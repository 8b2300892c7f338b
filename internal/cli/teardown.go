package cli

import (
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
)

// The lines of this file are the ones SkyPilot's client prints around
// stop, down, autostop and start (cli-output.md, "Transcripts"): scripts
// grep them, and a cleanup step must succeed when what it removes is
// already gone.

const (
	tipNotFound      = "Cluster(s) not found (tip: see `sky status`)."
	tipNotFoundStart = tipNotFound + " Do you mean to use `sky launch` to provision a new cluster?"
)

// resolveClusters returns the clusters a command acts on: the named ones
// that exist, in the order named, or with no names all of the caller's
// (every user's with allUsers). Named clusters are looked up among every
// user's, so that another user's cluster gets the server's ownership
// error rather than "not found". The status request's log is shown: it
// is where the server says which named clusters do not exist.
func (f *Factory) resolveClusters(names []string, allUsers bool) ([]api.ClusterRecord, error) {
	names = dedupe(names)
	body := api.ClustersBody{ClusterNames: names, AllUsers: allUsers || len(names) > 0}
	var recs []api.ClusterRecord
	if err := callOp(f, apiop.Status, body, &recs, callOptions{Stream: len(names) > 0}); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		// -a is the clusters the user launched: a managed job's cluster
		// is its controller's, which tears it down when the job ends
		// (`sky jobs cancel` ends it sooner); taking it here would only
		// make the job recover elsewhere.
		own := recs[:0]
		for _, r := range recs {
			if !r.IsManaged {
				own = append(own, r)
			}
		}
		return own, nil
	}
	byName := map[string]api.ClusterRecord{}
	for _, r := range recs {
		byName[r.Name] = r
	}
	var out []api.ClusterRecord
	for _, n := range names {
		if r, ok := byName[n]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

func dedupe(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func recordNames(recs []api.ClusterRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Name
	}
	return out
}

// clusterCount is "1 cluster", "2 clusters".
func clusterCount(n int) string {
	if n == 1 {
		return "1 cluster"
	}
	return fmt.Sprintf("%d clusters", n)
}

// clusterAction is stop, down or autostop as the client runs it: one
// request per cluster, each reported on its own line as it ends.
type clusterAction struct {
	// verb starts the prompt, the per-cluster lines and the progress
	// line: "Terminating", "Stopping", "Scheduling autostop on".
	verb string
	// send sends the request for one cluster.
	send func(name string, co callOptions) error
	// quoted clusters are 'c' in the per-cluster lines (autostop's).
	quoted bool
	// done ends a success line: "done." for stop and down, "done" for
	// autostop. after are the lines under it.
	done  string
	after func(name string) []string
	// rawFailures print a failure as the server's message alone; otherwise
	// only the types in rawTypes do, and the rest get "...failed." and a
	// Reason line.
	rawFailures bool
	// purgeHint: down's closing failure line tells about --purge.
	purgeHint bool
}

// rawTypes are the failures SkyPilot reports by their message alone.
var rawTypes = map[string]bool{"NotSupportedError": true, "ClusterOwnerIdentityMismatchError": true}

func (a *clusterAction) stage(name string) string {
	if a.quoted {
		name = "'" + name + "'"
	}
	return fmt.Sprintf("%s cluster %s...", a.verb, name)
}

type clusterFailure struct {
	name, reason string
}

// run asks once for all of names, then acts on them one at a time. A
// cluster that fails is reported and the others go on; as in SkyPilot the
// exit code stays 0, the failure lines say what went wrong. Only an error
// outside the requests (the server unreachable, Ctrl-C) stops the command.
func (a *clusterAction) run(f *Factory, names []string, yes, async bool) error {
	out := f.IO.Out
	if len(names) == 0 {
		fmt.Fprintln(out, tipNotFound)
		return nil
	}
	q := fmt.Sprintf("%s %s: %s. Proceed?", a.verb, clusterCount(len(names)), strings.Join(names, ", "))
	if err := f.IO.Confirm(q, yes); err != nil {
		return err
	}
	fmt.Fprintln(out)
	var ok []string
	var failed []clusterFailure
	for _, n := range names {
		if async {
			if err := a.send(n, callOptions{Async: true}); err != nil {
				return err
			}
			continue
		}
		w := out
		var pw *progressWriter
		if f.IO.IsTTY {
			// The stage stays on screen while the request runs and its
			// result line replaces it.
			pw = newProgressWriter(out)
			w = pw
			fmt.Fprintln(pw, a.stage(n))
		}
		err := a.send(n, callOptions{Stream: true, Progress: pw})
		if err != nil && errorType(err) == "" {
			if pw != nil {
				pw.Close()
			}
			return err
		}
		var lines []string
		if err == nil {
			ok = append(ok, n)
			lines = append([]string{f.IO.Green(a.stage(n) + a.done)}, a.after(n)...)
		} else {
			failed = append(failed, clusterFailure{n, err.Error()})
			lines = a.failureLines(f.IO, n, err)
		}
		fmt.Fprintln(w, strings.Join(lines, "\n"))
		if pw != nil {
			pw.Close()
		}
	}
	if async {
		return nil
	}
	if !f.IO.IsTTY {
		// SkyPilot's rich progress bar is transient on a terminal; piped,
		// its last state stays as one line, which scripts count.
		fmt.Fprintln(out, progressLine(a.verb+" "+clusterCount(len(names)), len(ok), len(names)))
	}
	if len(names) > 1 {
		fmt.Fprintln(out, "\nSummary:")
		if len(ok) > 0 {
			fmt.Fprintln(out, f.IO.Green("  ✓ Succeeded: "+strings.Join(ok, ", ")))
		}
		if len(failed) > 0 {
			parts := make([]string, len(failed))
			for i, fl := range failed {
				parts[i] = fmt.Sprintf("%s (%s)", fl.name, firstLine(fl.reason, 120))
			}
			fmt.Fprintln(out, f.IO.Red("  ✗ Failed: "+strings.Join(parts, ", ")))
		}
	}
	if len(failed) > 0 {
		msg := "Cluster(s) failed. See details above."
		if a.purgeHint {
			msg += " If you want to ignore the errors and remove the cluster(s) from the status table, use `sky down --purge`."
		}
		fmt.Fprintln(out, msg)
	}
	return nil
}

func (a *clusterAction) failureLines(io *IOStreams, name string, err error) []string {
	if a.rawFailures || rawTypes[errorType(err)] {
		return []string{err.Error()}
	}
	return []string{io.Red(a.stage(name) + "failed. "), "Reason: " + strings.TrimSuffix(err.Error(), ".") + "."}
}

// firstLine is the first line of s, cut to max runes.
func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > max {
		s = strings.TrimRight(string(r[:max]), " ") + "…"
	}
	return s
}

// progressLine is how rich leaves a finished progress bar on a pipe: the
// description, the completed part of a 40-column bar (a pipe has no
// colours, so the rest is blank), the percentage and the time left.
func progressLine(desc string, done, total int) string {
	const width = 40
	halves := width * 2 * done / total
	bar := strings.Repeat("━", halves/2)
	if halves%2 == 1 {
		bar += "╸"
	}
	bar += strings.Repeat(" ", width-halves/2-halves%2)
	left := "-:--:--"
	if done == total {
		left = "0:00:00"
	}
	return fmt.Sprintf("%s %s %3.0f%% %s", desc, bar, 100*float64(done)/float64(total), left)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func stopRunRemote(f *Factory, opts *StopOptions) error {
	s := opts.Select
	recs, err := f.resolveClusters(s.Clusters, s.AllUsers)
	if err != nil {
		return err
	}
	a := &clusterAction{verb: "Stopping", done: "done.",
		send: func(n string, co callOptions) error {
			return sendOp(f, apiop.Stop, opts.Graceful.apply(api.ClustersBody{ClusterNames: []string{n}, AllUsers: s.AllUsers}), co)
		},
		after: func(n string) []string {
			return []string{"  To restart the cluster, run: " + f.IO.Bold("sky start "+n)}
		}}
	return a.run(f, recordNames(recs), s.Yes, s.Async)
}

func downRunRemote(f *Factory, opts *DownOptions) error {
	s := opts.Select
	recs, err := f.resolveClusters(s.Clusters, s.AllUsers)
	if err != nil {
		return err
	}
	a := &clusterAction{verb: "Terminating", done: "done.", purgeHint: true,
		send: func(n string, co callOptions) error {
			return sendOp(f, apiop.Down, opts.Graceful.apply(api.ClustersBody{ClusterNames: []string{n}, AllUsers: s.AllUsers, Purge: opts.Purge}), co)
		},
		after: func(string) []string { return nil }}
	return a.run(f, recordNames(recs), s.Yes, s.Async)
}

func autostopRunRemote(f *Factory, opts *AutostopOptions) error {
	s := opts.Select
	idle := 5
	if opts.Autostop.IdleMinutes != nil {
		idle = *opts.Autostop.IdleMinutes
	}
	recs, err := f.resolveClusters(s.Clusters, s.AllUsers)
	if err != nil {
		return err
	}
	kind, passive := "autostop", "autostopped"
	if opts.Autostop.Down {
		kind, passive = "autodown", "autodowned"
	}
	verb := "Scheduling " + kind + " on"
	if opts.Cancel {
		verb = "Cancelling " + kind + " on"
	}
	a := &clusterAction{verb: verb, quoted: true, done: "done", rawFailures: true,
		send: func(n string, co callOptions) error {
			return sendOp(f, apiop.Autostop, api.AutostopBody{ClusterNames: []string{n}, AllUsers: s.AllUsers, IdleMinutes: idle,
				Down: opts.Autostop.Down, WaitFor: opts.Autostop.WaitFor, Cancel: opts.Cancel}, co)
		},
		after: func(n string) []string {
			if opts.Cancel {
				return nil
			}
			return []string{
				fmt.Sprintf("  The cluster will be %s after %d %s of idleness.", passive, idle, plural(idle, "minute")),
				fmt.Sprintf("  To cancel the %s, run: %s", kind, f.IO.Bold("sky autostop "+n+" --cancel")),
			}
		}}
	return a.run(f, recordNames(recs), s.Yes, s.Async)
}

// startRunRemote restarts clusters one request at a time, as SkyPilot's
// client does; UP clusters are left alone unless --force. A start that
// fails for a reason of the cluster's own (it cannot be stopped and
// started, it is another user's) is reported and the others go on; any
// other failure ends the command with exit 1.
func startRunRemote(f *Factory, opts *StartOptions) error {
	out := f.IO.Out
	recs, err := f.resolveClusters(opts.Clusters, false)
	if err != nil {
		return err
	}
	var names []string
	for _, r := range recs {
		if r.Status == "UP" && !opts.Force {
			if !opts.All {
				fmt.Fprintf(out, "Cluster %s already has status UP.\n", r.Name)
			}
			continue
		}
		names = append(names, r.Name)
	}
	if len(recs) == 0 || opts.All && len(names) == 0 {
		fmt.Fprintln(out, tipNotFoundStart)
		return nil
	}
	if len(names) == 0 {
		return nil
	}
	q := fmt.Sprintf("Restarting %s: %s. Proceed?", clusterCount(len(names)), strings.Join(names, ", "))
	if err := f.IO.Confirm(q, opts.Yes); err != nil {
		return err
	}
	for _, n := range names {
		err := sendOp(f, apiop.Start, api.ClustersBody{ClusterNames: []string{n}, Force: opts.Force, Retry: opts.Retry}, callOptions{Async: opts.Async, Stream: true})
		if rawTypes[errorType(err)] {
			fmt.Fprintln(out, err.Error())
			continue
		}
		if err != nil {
			return err
		}
		if opts.Async {
			continue
		}
		if a := opts.Autostop; a.IdleMinutes != nil {
			b := api.AutostopBody{ClusterNames: []string{n}, IdleMinutes: *a.IdleMinutes, Down: a.Down, WaitFor: a.WaitFor}
			if err := sendOp(f, apiop.Autostop, b, callOptions{}); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, f.IO.Green(fmt.Sprintf("Cluster %s started.", n)))
	}
	return nil
}
