// Package ux is the shape of the lines SkyGo prints where SkyPilot users'
// scripts read them (cli-output.md §Transcripts): the glyph lines of a
// launch, the DIM tree prefixes, the ANSI codes around them, and the
// transient status lines a terminal shows as a live progress line.
//
// Lines made on the API server or a node (the backend's progress, the job
// stream) always carry their escape codes, as SkyPilot's do, even when the
// client's stdout is a pipe; the CLI's own lines are styled only on a
// terminal and are not made here.
package ux

import (
	"regexp"
	"strings"
)

// ANSI codes SkyPilot's lines use.
const (
	Reset  = "\x1b[0m"
	Bold   = "\x1b[1m"
	Dim    = "\x1b[2m"
	Red    = "\x1b[31m"
	Green  = "\x1b[32m"
	Yellow = "\x1b[33m"
	Blue   = "\x1b[34m"
	Cyan   = "\x1b[36m"
)

// Tree prefixes of a stage's sub-lines.
const (
	Branch = Dim + "├── " + Reset
	Last   = Dim + "└── " + Reset
)

// Starting is the line that opens a stage: "⚙︎ <msg>" (U+2699 U+FE0E).
func Starting(msg string) string { return Reset + "⚙︎ " + msg }

// Finishing is the line that closes a stage: a green "✓ <msg>".
func Finishing(msg string) string { return Reset + Green + "✓ " + msg + Reset + Reset }

// Failed is the line of a stage that failed: a red "⨯" then msg.
func Failed(msg string) string { return Reset + Red + "⨯" + Reset + " " + msg }

// Retrying is the line of a stage tried again: a yellow "↺" then msg.
func Retrying(msg string) string { return Reset + Yellow + "↺" + Reset + " " + msg }

// Styled wraps s in one ANSI style.
func Styled(style, s string) string { return style + s + Reset }

// A status line is a stage in progress ("Provisioning dev on Local (2
// nodes)..."): SkyPilot shows those as a spinner on a terminal and prints
// nothing of them into a pipe. SkyGo's server writes one as a whole line
// in an APC string (ESC _ ... ESC \), which terminals discard, so a client
// that does not know it shows nothing either; SkyGo's CLI draws it as the
// live line on a terminal and drops it otherwise. An empty message ends
// the stage.
const (
	statusOpen  = "\x1b_skygo-status "
	statusClose = "\x1b\\"
)

// Status is the status line for msg (without its newline).
func Status(msg string) string { return statusOpen + msg + statusClose }

// ParseStatus reports whether line (without its newline) is a status
// line, and its message.
func ParseStatus(line string) (msg string, ok bool) {
	rest, ok := strings.CutPrefix(line, statusOpen)
	if !ok {
		return "", false
	}
	msg, ok = strings.CutSuffix(rest, statusClose)
	return msg, ok
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// Strip removes ANSI colour and cursor codes.
func Strip(s string) string { return ansiRE.ReplaceAllString(s, "") }
