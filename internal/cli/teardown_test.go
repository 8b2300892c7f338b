package cli

import (
	"bytes"
	"testing"
)

func TestProgressLine(t *testing.T) {
	bar := "━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━"
	if got, want := progressLine("Terminating 2 clusters", 2, 2), "Terminating 2 clusters "+bar+" 100% 0:00:00"; got != want {
		t.Errorf("all done:\n got %q\nwant %q", got, want)
	}
	half := "━━━━━━━━━━━━━━━━━━━━" + "                    "
	if got, want := progressLine("Stopping 2 clusters", 1, 2), "Stopping 2 clusters "+half+"  50% -:--:--"; got != want {
		t.Errorf("half done:\n got %q\nwant %q", got, want)
	}
	sixth := "━━━━━━╸" + "                                 "
	if got, want := progressLine("Stopping 6 clusters", 1, 6), "Stopping 6 clusters "+sixth+"  17% -:--:--"; got != want {
		t.Errorf("a sixth done:\n got %q\nwant %q", got, want)
	}
}

func TestFirstLine(t *testing.T) {
	if got := firstLine("  boom\nsecond line", 120); got != "boom" {
		t.Errorf("firstLine = %q", got)
	}
	long := ""
	for range 130 {
		long += "é"
	}
	if got := firstLine(long, 120); len([]rune(got)) != 121 || got[len(got)-len("…"):] != "…" {
		t.Errorf("cut to %d runes: %q", len([]rune(got)), got)
	}
}

func TestCancelWhat(t *testing.T) {
	tests := []struct {
		opts CancelOptions
		want string
	}{
		{CancelOptions{JobIDs: []int{1}}, "job 1"},
		{CancelOptions{JobIDs: []int{1, 2}}, "jobs 1 2"},
		{CancelOptions{All: true}, "all your jobs"},
		{CancelOptions{AllUsers: true}, "all users' jobs"},
		{CancelOptions{}, "the latest running job"},
	}
	for _, tc := range tests {
		if got := cancelWhat(&tc.opts); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.opts, got, tc.want)
		}
	}
}

// On a terminal the client draws "Terminating cluster dev..." while the
// request runs; its result line takes the stage's place, coloured or not,
// and anything the server printed in between stays above it.
func TestProgressWriterCompletesStage(t *testing.T) {
	var out bytes.Buffer
	p := newProgressWriter(&out)
	p.Write([]byte("Terminating cluster dev...\n"))
	p.Write([]byte("\x1b[32mTerminating cluster dev...done.\x1b[0m\n"))
	p.Write([]byte("Stopping cluster b...\n"))
	p.Write([]byte("Warning: ssh config left behind\n"))
	p.Write([]byte("Stopping cluster b...done.\n"))
	p.Close()
	want := "Terminating cluster dev..." + "\r\x1b[K\x1b[32mTerminating cluster dev...done.\x1b[0m\n" +
		"Stopping cluster b..." + "\nWarning: ssh config left behind\n" + "Stopping cluster b...done.\n"
	if out.String() != want {
		t.Errorf("got  %q\nwant %q", out.String(), want)
	}
}
