package cli

import (
	"bytes"
	"io"
	"regexp"
	"strings"

	"github.com/skygo/skygo/internal/ux"
)

// streamWriter prints a request log. Its lines are SkyPilot's transcript
// and go out unchanged, terminal or pipe, so scripts read the same lines
// either way. The stages in progress the server sends as ux status lines
// ("Provisioning dev on Local (1 node)...") are SkyGo's progress display:
// on a terminal the current one is one live line under the printed ones,
// replaced by the next stage and erased when the stage ends; into a pipe
// they are dropped, as SkyPilot's spinners are.
type streamWriter struct {
	w    io.Writer
	tty  bool
	buf  []byte
	live string // the stage on screen, "" when none
}

func newStreamWriter(w io.Writer, tty bool) *streamWriter { return &streamWriter{w: w, tty: tty} }

// clearLine returns the cursor to column 0 and erases the line.
const clearLine = "\r\x1b[K"

func (p *streamWriter) Write(b []byte) (int, error) {
	return writeLines(p.w, &p.buf, b, p.render)
}

// writeLines adds b to buf and writes what render makes of each complete
// line in it, keeping a last partial line in buf for the next write.
func writeLines(w io.Writer, buf *[]byte, b []byte, render func(line string) string) (int, error) {
	*buf = append(*buf, b...)
	for {
		i := bytes.IndexByte(*buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string((*buf)[:i])
		*buf = (*buf)[i+1:]
		if _, err := io.WriteString(w, render(line)); err != nil {
			return 0, err
		}
	}
}

// render is what one complete line puts on the screen.
func (p *streamWriter) render(line string) string {
	msg, isStatus := ux.ParseStatus(line)
	switch {
	case isStatus && !p.tty:
		return ""
	case isStatus:
		prev := p.live
		p.live = msg
		if prev == "" && msg == "" {
			return ""
		}
		return clearLine + msg
	case p.live != "":
		// Print above the live line, then draw it again.
		return clearLine + line + "\n" + p.live
	default:
		return line + "\n"
	}
}

// Close writes a last partial line and erases the live line.
func (p *streamWriter) Close() error {
	var out string
	if len(p.buf) > 0 {
		out = p.render(string(p.buf))
		p.buf = nil
	}
	if p.live != "" {
		out += clearLine
		p.live = ""
	}
	_, err := io.WriteString(p.w, out)
	return err
}

// progressWriter is the terminal display of a command that prints its own
// stage lines (teardown: "Terminating cluster dev..." drawn while the
// request runs, completed in place by "Terminating cluster dev...done."):
// a line ending in "..." that is not a node's prefixed output is drawn
// without a newline and replaced by the next one; a line that completes it
// replaces it too; any other line ends it and is printed as it is. Piped
// output never goes through here: it stays plain lines.
type progressWriter struct {
	w       io.Writer
	buf     []byte
	pending bool   // a stage line is on screen without its newline
	stage   string // that line
}

func newProgressWriter(w io.Writer) *progressWriter { return &progressWriter{w: w} }

// ansiRE matches the colour and style sequences this CLI writes.
var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

func isStage(line string) bool {
	return strings.HasSuffix(line, "...") && !strings.HasPrefix(line, "(")
}

func (p *progressWriter) Write(b []byte) (int, error) {
	return writeLines(p.w, &p.buf, b, p.render)
}

// render is what one complete line puts on the screen.
func (p *progressWriter) render(line string) string {
	if _, isStatus := ux.ParseStatus(line); isStatus {
		return "" // the server's stage markers are for streamWriter
	}
	switch {
	case isStage(line) && p.pending:
		p.stage = line
		return clearLine + line
	case isStage(line):
		p.pending, p.stage = true, line
		return line
	case p.pending && strings.HasPrefix(ansiRE.ReplaceAllString(line, ""), p.stage):
		p.pending = false
		return clearLine + line + "\n"
	case p.pending:
		p.pending = false
		return "\n" + line + "\n"
	default:
		return line + "\n"
	}
}

// Close ends a pending stage line and writes a last partial line.
func (p *progressWriter) Close() error {
	var out string
	if p.pending {
		out = "\n"
		p.pending = false
	}
	if len(p.buf) > 0 {
		out += string(p.buf) + "\n"
		p.buf = nil
	}
	_, err := io.WriteString(p.w, out)
	return err
}
