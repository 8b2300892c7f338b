package cli

import (
	"bytes"
	"testing"

	"github.com/skygo/skygo/internal/ux"
)

// A launch's request log as the server writes it, split the way a stream
// delivers it: stages in progress as status lines between SkyPilot's lines.
var agents = ux.Status("Starting node agents...") + "\n"

var launchLog = []string{
	"Considered resources (1 node):\n",
	ux.Starting("Launching on Local.") + "\n" + ux.Status("Provisioning dev on Local (1 node)...") + "\n",
	ux.Status("") + "\n" + ux.Last + "Instance is up.\n" + agents[:10],
	agents[10:],
	"(task, pid=7) loading...\n", // a line printed while a stage is on
	ux.Status("") + "\n" + ux.Finishing("Cluster launched: dev.") + "\n",
	ux.Starting("Job submitted, ID: 1") + "\n",
	"(task, pid=7) hi\n",
}

func writeAll(t *testing.T, tty bool) string {
	t.Helper()
	var out bytes.Buffer
	p := newStreamWriter(&out, tty)
	for _, chunk := range launchLog {
		if _, err := p.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestStreamWriterPipeDropsStages(t *testing.T) {
	want := "Considered resources (1 node):\n" +
		ux.Starting("Launching on Local.") + "\n" +
		ux.Last + "Instance is up.\n" +
		"(task, pid=7) loading...\n" +
		ux.Finishing("Cluster launched: dev.") + "\n" +
		ux.Starting("Job submitted, ID: 1") + "\n" +
		"(task, pid=7) hi\n"
	if got := writeAll(t, false); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestStreamWriterTerminalShowsStagesLive(t *testing.T) {
	want := "Considered resources (1 node):\n" +
		ux.Starting("Launching on Local.") + "\n" +
		"\r\x1b[KProvisioning dev on Local (1 node)..." +
		"\r\x1b[K" + ux.Last + "Instance is up.\n" +
		"\r\x1b[KStarting node agents..." +
		// A line during a stage goes above it; the stage stays live.
		"\r\x1b[K(task, pid=7) loading...\nStarting node agents..." +
		"\r\x1b[K" + ux.Finishing("Cluster launched: dev.") + "\n" +
		ux.Starting("Job submitted, ID: 1") + "\n" +
		"(task, pid=7) hi\n"
	if got := writeAll(t, true); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestStreamWriterCloseErasesStageAndFlushesPartialLine(t *testing.T) {
	var out bytes.Buffer
	p := newStreamWriter(&out, true)
	p.Write([]byte(ux.Status("Syncing...") + "\nno newline"))
	p.Close()
	if want := "\r\x1b[KSyncing...\r\x1b[Kno newline\nSyncing...\r\x1b[K"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}
