package cli

import (
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/ux"
)

// The lines the CLI prints itself around a launch or an exec, in
// SkyPilot's words (cli-output.md §Transcripts). Like SkyPilot's click
// output they are styled only when stdout is a terminal; the lines the
// server streams keep their codes either way.

// style wraps v in an ANSI style when colour is allowed.
func (s *IOStreams) style(code, v string) string {
	if !s.Color {
		return v
	}
	return ux.Styled(code, v)
}

// Dim styles v dim when colour is allowed (tree prefixes).
func (s *IOStreams) Dim(v string) string { return s.style(ux.Dim, v) }

// Cyan styles v cyan when colour is allowed.
func (s *IOStreams) Cyan(v string) string { return s.style(ux.Cyan, v) }

// printEntrypoint is the first line of launch and exec: what will run.
func printEntrypoint(s *IOStreams, in *taskInput) {
	switch {
	case in.Entry.YAMLPath != "":
		fmt.Fprintln(s.Out, s.Cyan("YAML to run: ")+in.Entry.YAMLPath)
	case in.Entry.Command != "":
		fmt.Fprintln(s.Out, s.Cyan("Command to run: ")+in.Entry.Command)
	}
}

// tree prints a heading and its items as a DIM-branched tree; each item
// is a label and a command, the command in bold.
func tree(s *IOStreams, heading string, items [][2]string) {
	fmt.Fprintln(s.Out, heading)
	for i, it := range items {
		branch := "├── "
		if i == len(items)-1 {
			branch = "└── "
		}
		fmt.Fprintln(s.Out, s.Dim(branch)+it[0]+s.Bold(it[1]))
	}
}

// printUsefulCommands is the block after `sky launch` (never after
// `sky exec`): the job's commands when there is a job, then the
// cluster's. Scripts read "Job ID:" on the line right after the heading.
// ssh says whether `ssh <cluster>` works; SkyPilot always lists it, but
// a hint that fails is worse than none.
func printUsefulCommands(s *IOStreams, cluster string, jobID int, ssh bool) {
	fmt.Fprintln(s.Out)
	fmt.Fprintln(s.Out, s.Bold("📋 Useful Commands"))
	if jobID > 0 {
		tree(s, fmt.Sprintf("%s%d", s.Cyan("Job ID: "), jobID), [][2]string{
			{"To cancel the job:\t\t", fmt.Sprintf("sky cancel %s %d", cluster, jobID)},
			{"To stream job logs:\t\t", fmt.Sprintf("sky logs %s %d", cluster, jobID)},
			{"To view job queue:\t\t", "sky queue " + cluster},
		})
	}
	var items [][2]string
	if ssh {
		items = append(items, [2]string{"To log into the head VM:\t", "ssh " + cluster})
	}
	items = append(items,
		[2]string{"To submit a job:\t\t", "sky exec " + cluster + " yaml_file"},
		[2]string{"To stop the cluster:\t", "sky stop " + cluster},
		[2]string{"To teardown the cluster:\t", "sky down " + cluster})
	tree(s, s.Cyan("Cluster name: ")+cluster, items)
}

// printAsyncHint is what an --async command prints: the request and how
// to follow or cancel it, by the 8-character prefix of its id.
func printAsyncHint(s *IOStreams, name, id, endpoint string) {
	short := id
	if len(short) > 8 {
		short = short[:8]
	}
	fmt.Fprintf(s.Out, "%s %s request: %s\n", s.Cyan("Submitted"), name, id)
	fmt.Fprintln(s.Out, s.Dim("├── ")+"Check logs with: "+s.Bold("sky api logs "+short))
	fmt.Fprintln(s.Out, s.Dim("├── ")+"Or, visit: "+s.Bold(strings.TrimRight(endpoint, "/")+"/api/stream?request_id="+short))
	fmt.Fprintln(s.Out, s.Dim("└── ")+"To cancel the request, run: "+s.Bold("sky api cancel "+short))
	fmt.Fprintln(s.Out)
}
