package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the test binary stand in for `sky agent sandbox-exec`,
// which is what SandboxCommand runs.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "agent" && os.Args[2] == SandboxVerb {
		os.Exit(SandboxMain(os.Args[3:]))
	}
	if len(os.Args) > 2 && os.Args[1] == "agent" && os.Args[2] == PIDInitVerb {
		os.Exit(PIDInitMain())
	}
	os.Exit(m.Run())
}

func TestHiddenDir(t *testing.T) {
	for home, want := range map[string]string{
		"/home/u/.sky/skygo/local/clusters/c/node-0":  "/home/u/.sky",
		"/home/u/.sky/skygo/local/clusters/c/node-0/": "/home/u/.sky",
		"/tmp/TestX/001":           "",
		"/home/u/.sky/skygo/other": "",
	} {
		if got := HiddenDir(home); got != want {
			t.Errorf("HiddenDir(%q) = %q, want %q", home, got, want)
		}
	}
}

func TestSandboxHidesTheServersSkyDir(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := SandboxAvailable(); err != nil {
		t.Skipf("this machine allows no node sandbox: %v", err)
	}
	sky := filepath.Join(t.TempDir(), ".sky")
	home := filepath.Join(sky, "skygo", "local", "clusters", "c", "node-0")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(sky, "skygo", "state.db"), filepath.Join(sky, "config.yaml")} {
		if err := os.WriteFile(f, []byte("SERVER-SECRET"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "mine"), []byte("node-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	sibling := filepath.Join(filepath.Dir(home), "node-1")
	other := filepath.Join(sky, "skygo", "local", "clusters", "other", "node-0")
	for _, d := range []string{sibling, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("+"+filepath.Base(filepath.Dir(d))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := `cat mine ` + sibling + `/f ` + other + `/f 2>/dev/null; echo; pwd
cat ` + sky + `/skygo/state.db ` + sky + `/config.yaml ../../../../state.db 2>/dev/null && echo READ
touch ` + sky + `/planted 2>/dev/null && echo WROTE
echo out > made`
	c := SandboxCommand(exe, home, []string{"/bin/bash", "-c", script})
	c.Dir = home
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("sandboxed bash: %v\n%s", err, out)
	}
	if got, want := string(out), "node-file+c\n"+home+"\n"; got != want {
		t.Errorf("sandboxed job printed %q, want %q (its node's and sibling's files, not another cluster's; its HOME as cwd; no server file)", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(home, "made")); err != nil || string(b) != "out\n" {
		t.Errorf("a file the job wrote in its HOME = %q, %v; want it on the real node", b, err)
	}
	if _, err := os.Stat(filepath.Join(sky, "planted")); err == nil {
		t.Error("the job planted a file in the server's ~/.sky")
	}
}

func TestSandboxMainRefusesBadArguments(t *testing.T) {
	exe, _ := os.Executable()
	out, err := exec.Command(exe, "agent", SandboxVerb, "/a", "/b/c", "true").CombinedOutput()
	var ee *exec.ExitError
	if !(err != nil && errors.As(err, &ee) && ee.ExitCode() == 2) || !strings.Contains(string(out), "usage") {
		t.Errorf("KEEP outside HIDE: %v %s; want exit 2 and the usage", err, out)
	}
}

// Without root the job runs in a user namespace; the capability the
// helper needed for the mounts must not reach it, or it could unmount
// the tmpfs.
func TestSandboxedJobHasNoCapabilitiesWithoutRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("as root the job keeps root's capabilities; this checks the user-namespace path")
	}
	exe, _ := os.Executable()
	if err := SandboxAvailable(); err != nil {
		t.Skipf("this machine allows no node sandbox: %v", err)
	}
	home := filepath.Join(t.TempDir(), ".sky", "skygo", "local", "n")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := SandboxCommand(exe, home, []string{"/bin/sh", "-c", "grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status"}).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasSuffix(line, "0000000000000000") {
			t.Errorf("sandboxed job has %s", line)
		}
	}
}

func TestOnlyLoopbackNameservers(t *testing.T) {
	for conf, want := range map[string]bool{
		"nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n": true,
		"nameserver 127.0.0.53\nnameserver ::1\n":                   true,
		"nameserver 10.255.255.53\n":                                false,
		"nameserver 127.0.0.53\nnameserver 8.8.8.8\n":               false,
		"# nothing\n": false,
	} {
		if got := onlyLoopbackNameservers([]byte(conf)); got != want {
			t.Errorf("onlyLoopbackNameservers(%q) = %v, want %v", conf, got, want)
		}
	}
}
