package infra

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNodeArch(t *testing.T) {
	for _, c := range []struct {
		machine, want, errHas string
	}{
		{"x86_64", "amd64", ""},
		{"x86_64\n", "amd64", ""},
		{"amd64", "amd64", ""},
		{"aarch64", "arm64", ""},
		{"arm64", "arm64", ""},
		{"armv7l", "", `"armv7l"`},
		{"riscv64", "", "x86_64 and aarch64"},
		{"aarch64_be", "", "has no SkyGo node runtime"},
		{"", "", "printed nothing"},
	} {
		got, err := NodeArch(c.machine)
		if got != c.want || (c.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.errHas)) {
			t.Errorf("NodeArch(%q) = %q, %v; want %q and an error saying %q", c.machine, got, err, c.want, c.errHas)
		}
	}
}

func TestParseProbe(t *testing.T) {
	for _, c := range []struct{ out, machine, hash string }{
		{"aarch64\n0123abcd  /root/.sky/bin/sky-node\n", "aarch64", "0123abcd"},
		{"x86_64\n", "x86_64", ""},
		{"x86_64", "x86_64", ""},
		{"", "", ""},
	} {
		m, h := parseProbe([]byte(c.out))
		if m != c.machine || h != c.hash {
			t.Errorf("parseProbe(%q) = %q, %q; want %q, %q", c.out, m, h, c.machine, c.hash)
		}
	}
	if got := probeCommand(`"$HOME"/'.sky/bin/sky-node'`); got != `uname -m; sha256sum "$HOME"/'.sky/bin/sky-node' 2>/dev/null || true` {
		t.Errorf("probe command %q", got)
	}
}

// The runtime directory wins over the sky binary's; a build missing from
// both is an error naming the file and how to build it.
func TestNodeBinariesBeside(t *testing.T) {
	skyDir, rtDir := t.TempDir(), t.TempDir()
	write := func(dir, goarch string) string {
		p := filepath.Join(dir, NodeBinaryName(goarch))
		if err := os.WriteFile(p, []byte(goarch), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	besideAMD := write(skyDir, "amd64")
	besideARM := write(skyDir, "arm64")
	rtARM := write(rtDir, "arm64")
	bins := NodeBinariesBeside(filepath.Join(skyDir, "sky"))

	t.Setenv(EnvRuntimeDir, "")
	for goarch, want := range map[string]string{"amd64": besideAMD, "arm64": besideARM} {
		if got, err := bins(goarch); err != nil || got != want {
			t.Errorf("without %s: %s -> %q, %v; want %q", EnvRuntimeDir, goarch, got, err, want)
		}
	}
	t.Setenv(EnvRuntimeDir, rtDir)
	if got, err := bins("arm64"); err != nil || got != rtARM {
		t.Errorf("with %s: arm64 -> %q, %v; want %q", EnvRuntimeDir, got, err, rtARM)
	}
	if got, err := bins("amd64"); err != nil || got != besideAMD {
		t.Errorf("with %s lacking amd64: -> %q, %v; want the one beside sky, %q", EnvRuntimeDir, got, err, besideAMD)
	}
	_, err := bins("riscv64")
	if err == nil || !strings.Contains(err.Error(), "sky-node-linux-riscv64") || !strings.Contains(err.Error(), "make build") ||
		!strings.Contains(err.Error(), rtDir) || !strings.Contains(err.Error(), skyDir) {
		t.Errorf("missing build: err = %v; want it to name the file, both places looked and make build", err)
	}
}

func TestLBBinaryBeside(t *testing.T) {
	skyDir := t.TempDir()
	t.Setenv(EnvRuntimeDir, "")
	if _, err := LBBinaryBeside(filepath.Join(skyDir, "sky")); err == nil || !strings.Contains(err.Error(), "sky-lb is not in "+skyDir) ||
		!strings.Contains(err.Error(), "make build") {
		t.Errorf("missing sky-lb: err = %v; want it to name the file, where it looked and make build", err)
	}
	p := filepath.Join(skyDir, LBBinaryName)
	if err := os.WriteFile(p, []byte("lb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := LBBinaryBeside(filepath.Join(skyDir, "sky")); err != nil || got != p {
		t.Errorf("sky-lb beside sky: %q, %v; want %q", got, err, p)
	}
}
