package cli

import (
	"bytes"
	"testing"
)

func TestProgressWriterReplacesStageLines(t *testing.T) {
	var out bytes.Buffer
	p := newProgressWriter(&out)
	// Split writes, as a stream delivers them.
	for _, chunk := range []string{
		"Considered resources (1 node):\n",
		"Provisioning dev on Local (1 node)...\nStarting node",
		" agents...\n",
		"(task, pid=7) loading...\n",
		"Job submitted, ID: 1\n",
		"(task, pid=7) hi\n",
		"Terminating cluster dev...\n",
	} {
		if _, err := p.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	want := "Considered resources (1 node):\n" +
		"Provisioning dev on Local (1 node)..." +
		"\r\x1b[KStarting node agents..." +
		"\n(task, pid=7) loading...\n" + // node output is never a stage line
		"Job submitted, ID: 1\n" +
		"(task, pid=7) hi\n" +
		"Terminating cluster dev...\n"
	if got := out.String(); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestProgressWriterFlushesPartialLine(t *testing.T) {
	var out bytes.Buffer
	p := newProgressWriter(&out)
	p.Write([]byte("no newline"))
	p.Close()
	if out.String() != "no newline\n" {
		t.Fatalf("got %q", out.String())
	}
}
