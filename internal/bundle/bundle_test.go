package bundle

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The build ID read here is the one `go tool buildid` prints, for the
// test binary itself (a Go ELF file like sky-server).
func TestGoBuildIDMatchesGoTool(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Skipf("go tool buildid: %v", err)
	}
	got, err := GoBuildID(exe)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("GoBuildID = %q, go tool buildid = %q", got, want)
	}
}
