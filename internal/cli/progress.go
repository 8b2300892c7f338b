package cli

import (
	"bytes"
	"io"
	"regexp"
	"strings"
)

// progressWriter shows a request log on a terminal with one live progress
// line: a stage line of the backend ("Provisioning dev on Local...",
// "Starting node agents...": text ending in "..." that is not a node's
// prefixed output) is drawn without a newline and replaced by the next
// stage; a line that completes the stage on screen ("Terminating cluster
// dev..." then "Terminating cluster dev...done.") replaces it too; any other
// line ends the stage line and is printed as it is. Piped output never goes
// through here: it stays plain lines.
type progressWriter struct {
	w       io.Writer
	buf     []byte
	pending bool   // a stage line is on screen without its newline
	stage   string // that line
}

func newProgressWriter(w io.Writer) *progressWriter { return &progressWriter{w: w} }

// clearLine returns the cursor to column 0 and erases the line.
const clearLine = "\r\x1b[K"

// ansiRE matches the colour and style sequences this CLI writes.
var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

func isStage(line string) bool {
	return strings.HasSuffix(line, "...") && !strings.HasPrefix(line, "(")
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(p.buf[:i])
		p.buf = p.buf[i+1:]
		var out string
		switch {
		case isStage(line) && p.pending:
			out = clearLine + line
			p.stage = line
		case isStage(line):
			out = line
			p.pending, p.stage = true, line
		case p.pending && strings.HasPrefix(ansiRE.ReplaceAllString(line, ""), p.stage):
			out = clearLine + line + "\n"
			p.pending = false
		case p.pending:
			out = "\n" + line + "\n"
			p.pending = false
		default:
			out = line + "\n"
		}
		if _, err := io.WriteString(p.w, out); err != nil {
			return 0, err
		}
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
