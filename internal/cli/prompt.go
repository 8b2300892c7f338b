package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Confirm asks question (which ends in "Proceed?") with yes as the default
// answer; yes (from -y/--yes) skips it. It returns errAborted when the
// answer is no.
func (s *IOStreams) Confirm(question string, yes bool) error {
	if yes {
		return nil
	}
	return s.confirm(question, true)
}

// confirm asks a yes/no question as SkyPilot's click prompts do, because
// scripts answer those through a pipe (`yes | sky launch ...`,
// `echo y | sky down c`): stdin is read whether or not it is a terminal.
// The prompt goes to stdout without a newline and the answer is not
// echoed. An empty answer takes the default; an answer that is neither
// yes nor no is refused and the question asked again; no, or the end of
// input before any answer, aborts (even when the default is yes: a script
// that gives no answer has not agreed).
func (s *IOStreams) confirm(question string, defaultYes bool) error {
	choices := " [y/N]: "
	if defaultYes {
		choices = " [Y/n]: "
	}
	for {
		fmt.Fprint(s.Out, question+choices)
		line, err := readLine(s.In)
		if err != nil {
			if s.InTTY {
				// Ctrl-D leaves the cursor on the prompt line.
				fmt.Fprintln(s.Out)
			}
			return errAborted
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "":
			if defaultYes {
				return nil
			}
			return errAborted
		case "y", "yes":
			return nil
		case "n", "no":
			return errAborted
		}
		fmt.Fprintln(s.Out, "Error: invalid input")
	}
}

// readLine reads one line, without its newline, a byte at a time: a
// buffered reader would swallow the answers to later prompts of the same
// command. A last line without a newline still counts as an answer; only
// the end of input before any byte is an error.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n == 1 {
			if one[0] == '\n' {
				return b.String(), nil
			}
			b.WriteByte(one[0])
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && b.Len() > 0 {
				return b.String(), nil
			}
			return "", err
		}
	}
}
