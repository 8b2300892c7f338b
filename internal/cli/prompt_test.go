package cli

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestConfirmReadsStdin(t *testing.T) {
	const q = "Terminating 1 cluster: dev. Proceed?"
	const ask = q + " [Y/n]: "
	tests := []struct {
		name    string
		input   string
		tty     bool
		abort   bool
		wantOut string // all of stdout: the prompt, re-asks, nothing echoed
	}{
		{name: "y", input: "y\n", wantOut: ask},
		{name: "yes, any case, padded", input: "  YeS \n", wantOut: ask},
		{name: "Y", input: "Y\n", wantOut: ask},
		{name: "empty line takes the default", input: "\n", wantOut: ask},
		{name: "last line without newline counts", input: "y", wantOut: ask},
		{name: "crlf", input: "y\r\n", wantOut: ask},
		{name: "n", input: "n\n", abort: true, wantOut: ask},
		{name: "NO", input: "NO\n", abort: true, wantOut: ask},
		{name: "end of input aborts despite default yes", input: "", abort: true, wantOut: ask},
		{name: "end of input on a terminal ends the prompt line", input: "", tty: true, abort: true, wantOut: ask + "\n"},
		{name: "other text asks again", input: "maybe\ny\n", wantOut: ask + "Error: invalid input\n" + ask},
		{name: "asks until an answer or the end", input: "1\nok\n", abort: true,
			wantOut: ask + "Error: invalid input\n" + ask + "Error: invalid input\n" + ask},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, out, errOut := testIO(tc.input, tc.tty)
			err := s.Confirm(q, false)
			if tc.abort != errors.Is(err, errAborted) || !tc.abort && err != nil {
				t.Fatalf("err = %v, want aborted %v", err, tc.abort)
			}
			if out.String() != tc.wantOut {
				t.Errorf("stdout %q\nwant   %q", out.String(), tc.wantOut)
			}
			if errOut.Len() != 0 {
				t.Errorf("stderr %q, want nothing (Execute prints Aborted!)", errOut.String())
			}
		})
	}
}

func TestConfirmYesSkipsThePrompt(t *testing.T) {
	s, out, _ := testIO("n\n", false)
	if err := s.Confirm("Stopping 1 cluster: dev. Proceed?", true); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("-y printed %q", out.String())
	}
}

func TestConfirmDefaultNo(t *testing.T) {
	for input, proceed := range map[string]bool{"\n": false, "y\n": true, "": false} {
		s, out, _ := testIO(input, false)
		err := s.confirm("Proceed anyway?", false)
		if (err == nil) != proceed {
			t.Errorf("input %q: err %v, want proceed %v", input, err, proceed)
		}
		if out.String() != "Proceed anyway? [y/N]: " {
			t.Errorf("input %q: stdout %q", input, out.String())
		}
	}
}

// Two prompts of one command read one line each: the first must not
// swallow the answer to the second, even when stdin hands over all its
// bytes at once.
func TestConfirmLeavesLaterAnswers(t *testing.T) {
	in := strings.NewReader("y\nn\n")
	s := &IOStreams{In: in, Out: io.Discard, ErrOut: io.Discard}
	if err := s.Confirm("first. Proceed?", false); err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := s.Confirm("second. Proceed?", false); !errors.Is(err, errAborted) {
		t.Fatalf("second: %v, want aborted", err)
	}
}

func TestReadLineOneByteReads(t *testing.T) {
	got, err := readLine(iotest.OneByteReader(strings.NewReader("yes\nrest")))
	if err != nil || got != "yes" {
		t.Fatalf("readLine = %q, %v", got, err)
	}
	if _, err := readLine(iotest.ErrReader(errors.New("closed"))); err == nil {
		t.Fatal("a read error is not an answer")
	}
}

func TestAbortedPrintsLikeClick(t *testing.T) {
	var buf bytes.Buffer
	printError(&buf, errAborted)
	if buf.String() != "Aborted!\n" {
		t.Errorf("printError(errAborted) = %q, want %q", buf.String(), "Aborted!\n")
	}
	if exitCodeFor(errAborted) != 1 {
		t.Errorf("exit code %d, want 1", exitCodeFor(errAborted))
	}
}
