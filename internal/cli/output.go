package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/skygo/skygo/internal/task"
)

// Exit codes. Commands return errors; Execute turns them into these codes in
// one place (exitCodeFor) so no command calls os.Exit.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// ExitError asks Execute to exit with Code. Msg, when set, is printed as an
// ordinary error first; an empty Msg exits silently (the command already
// printed what the user needs, e.g. `sky logs --status` prints the status
// line and exits 100..103).
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// FlagError is a mistake in how the command was called (unknown flag,
// bad flag value, wrong number of arguments). Execute prints it with a
// short usage hint and exits 2.
type FlagError struct {
	Err error
}

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// flagErrorf builds a FlagError from a format string.
func flagErrorf(format string, a ...any) error {
	return &FlagError{Err: fmt.Errorf(format, a...)}
}

// kindAsFlagError reports a YAML of the wrong kind for the command as a
// usage error; other errors pass unchanged.
func kindAsFlagError(err error) error {
	var ke *task.KindError
	if errors.As(err, &ke) {
		return &FlagError{Err: err}
	}
	return err
}

// errAborted is returned when the user answers "no" to a confirmation (or
// gives no answer). Execute prints it as click does, `Aborted!` on stderr,
// and exits 1.
var errAborted error = abortedError{}

type abortedError struct{}

func (abortedError) Error() string { return "Aborted!" }

// NotAvailableError is the stand-in error of commands whose machinery is not
// built yet. Execute prints it as one line and exits 1.
type NotAvailableError struct {
	Cmd        string // command path after "sky", e.g. "jobs launch"
	Capability string // what is missing, e.g. "the managed jobs controller"
}

func (e *NotAvailableError) Error() string {
	return "sky " + e.Cmd + ": " + e.Capability + " is not available in this build yet."
}

// notAvailable is the single stand-in for commands that parse and validate
// their input but have nothing to run it yet. Replace the call in a
// command's run function when its machinery lands.
func notAvailable(cmd, capability string) error {
	return &NotAvailableError{Cmd: cmd, Capability: capability}
}

// exitCodeFor maps an error returned by a command to the process exit code.
func exitCodeFor(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	var fe *FlagError
	if errors.As(err, &fe) {
		return exitUsage
	}
	return exitError
}

// printError writes err as one plain "Error: ..." line (no stack, no usage).
// A message that already ends in a period keeps it; none is added.
func printError(w io.Writer, err error) {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Msg == "" {
		return
	}
	if errors.Is(err, errAborted) {
		fmt.Fprintln(w, errAborted.Error())
		return
	}
	msg := strings.TrimSpace(err.Error())
	if msg == "" {
		return
	}
	fmt.Fprintf(w, "Error: %s\n", msg)
}

// printJSON writes v as JSON with two-space indentation, as SkyPilot's
// `-o json` does. Callers pass structs (not maps) so the key order is stable.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table is an aligned, borderless table in SkyPilot's style: left-aligned
// columns separated by two spaces, upper-case headers, no trailing blanks.
type table struct {
	headers []string
	rows    [][]string
	bold    func(string) string
}

// newTable starts a table with the given headers. bold styles the header row
// (pass the IOStreams colour scheme's Bold so pipes get plain text).
func newTable(bold func(string) string, headers ...string) *table {
	if bold == nil {
		bold = func(s string) string { return s }
	}
	return &table{headers: headers, bold: bold}
}

// addRow appends one row; missing cells are blank, extra cells are dropped.
func (t *table) addRow(cells ...string) {
	row := make([]string, len(t.headers))
	copy(row, cells)
	t.rows = append(t.rows, row)
}

// render writes the table to w.
func (t *table) render(w io.Writer) error {
	widths := make([]int, len(t.headers))
	for i, h := range t.headers {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if n := utf8.RuneCountInString(c); n > widths[i] {
				widths[i] = n
			}
		}
	}
	var b strings.Builder
	writeLine := func(cells []string, style func(string) string) {
		var line strings.Builder
		for i, c := range cells {
			if i == len(cells)-1 {
				line.WriteString(style(c))
				break
			}
			line.WriteString(style(c))
			line.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	writeLine(t.headers, t.bold)
	for _, r := range t.rows {
		writeLine(r, func(s string) string { return s })
	}
	_, err := io.WriteString(w, b.String())
	return err
}
