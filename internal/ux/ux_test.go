package ux

import "testing"

// The bytes of cli-output.md §Conventions, written out so a change to a
// helper cannot silently change what scripts read.
func TestGlyphLinesAreSkyPilots(t *testing.T) {
	for got, want := range map[string]string{
		Starting("Launching on Local."):   "\x1b[0m⚙︎ Launching on Local.",
		Finishing("Setup detached."):      "\x1b[0m\x1b[32m✓ Setup detached.\x1b[0m\x1b[0m",
		Failed("Failed to provision."):    "\x1b[0m\x1b[31m⨯\x1b[0m Failed to provision.",
		Retrying("Trying other ones."):    "\x1b[0m\x1b[33m↺\x1b[0m Trying other ones.",
		Branch + "x":                      "\x1b[2m├── \x1b[0mx",
		Last + "x":                        "\x1b[2m└── \x1b[0mx",
		Styled(Yellow, "Tailing logs..."): "\x1b[33mTailing logs...\x1b[0m",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestStatusLines(t *testing.T) {
	for _, msg := range []string{"Provisioning dev on Local (2 nodes)...", ""} {
		if got, ok := ParseStatus(Status(msg)); !ok || got != msg {
			t.Errorf("ParseStatus(Status(%q)) = %q, %v", msg, got, ok)
		}
	}
	for _, line := range []string{"Provisioning...", Starting("x"), "\x1b_skygo-status unterminated"} {
		if _, ok := ParseStatus(line); ok {
			t.Errorf("ParseStatus(%q) took an ordinary line for a status", line)
		}
	}
	if got := Strip(Finishing("Job finished (status: SUCCEEDED).")); got != "✓ Job finished (status: SUCCEEDED)." {
		t.Errorf("Strip = %q", got)
	}
}
