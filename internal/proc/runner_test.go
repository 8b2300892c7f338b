package proc

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/provision"
)

func TestRunnerEnvironmentAndExitCodes(t *testing.T) {
	home := t.TempDir()
	r := NewRunner(home, "127.0.0.9")
	ctx := context.Background()
	res, err := r.Run(ctx, `echo "$HOME|$SKYGO_NODE_IP|$PWD"; read x; echo "in=$x"; echo oops >&2; exit 7`,
		provision.RunOptions{Stdin: strings.NewReader("hello\n")})
	if err != nil {
		t.Fatal(err)
	}
	if want := home + "|127.0.0.9|" + home + "\nin=hello\n"; string(res.Stdout) != want {
		t.Errorf("stdout = %q, want %q", res.Stdout, want)
	}
	if string(res.Stderr) != "oops\n" || res.ExitCode != 7 {
		t.Errorf("stderr %q code %d", res.Stderr, res.ExitCode)
	}
	var out bytes.Buffer
	code, err := r.Stream(ctx, "echo streamed; kill -9 $$", &out, &out)
	if err != nil || code != 137 || out.String() != "streamed\n" {
		t.Errorf("Stream = %d, %v, %q; want 137 and the output", code, err, out.String())
	}
}

func TestRunnerCancelKillsProcessGroup(t *testing.T) {
	home := t.TempDir()
	r := NewRunner(home, "127.0.0.9")
	ctx, cancel := context.WithCancel(context.Background())
	pidFile := filepath.Join(home, "child")
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, "sleep 300 & echo $! > child; wait", provision.RunOptions{})
		done <- err
	}()
	var pid int
	for i := 0; i < 200 && pid == 0; i++ {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("child never started")
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("cancelled Run returned no error")
	}
	waitGone(t, pid)
}

func TestRsyncAdditiveWithExcludes(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run("fallback="+strconv.FormatBool(fallback), func(t *testing.T) {
			src, home := t.TempDir(), t.TempDir()
			for path, body := range map[string]string{"a.txt": "a", "sub/b.txt": "b", "skip.log": "x", ".git/config": "g"} {
				full := filepath.Join(src, path)
				os.MkdirAll(filepath.Dir(full), 0o755)
				os.WriteFile(full, []byte(body), 0o644)
			}
			dst := filepath.Join(home, "sky_workdir")
			os.MkdirAll(dst, 0o755)
			os.WriteFile(filepath.Join(dst, "kept.txt"), []byte("k"), 0o644)
			r := NewRunner(home, "127.0.0.9")
			var err error
			if fallback {
				err = copyTree(src, dst, []string{"*.log", ".git"})
			} else {
				err = r.Rsync(context.Background(), src, "~/sky_workdir", provision.RsyncOptions{Excludes: []string{"*.log", ".git"}})
			}
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]bool{"a.txt": true, "sub/b.txt": true, "kept.txt": true, "skip.log": false, ".git/config": false} {
				_, err := os.Stat(filepath.Join(dst, path))
				if (err == nil) != want {
					t.Errorf("%s present = %v, want %v", path, err == nil, want)
				}
			}
		})
	}
}

// TestRsyncReplacesLinksLeftOnTheNode: a job can leave a link where the
// next sync has a directory or a file; the sync replaces the link and
// never writes where it points.
func TestRsyncReplacesLinksLeftOnTheNode(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run("fallback="+strconv.FormatBool(fallback), func(t *testing.T) {
			src, home, outside := t.TempDir(), t.TempDir(), t.TempDir()
			for path, body := range map[string]string{"d/x.txt": "x", "f.txt": "f"} {
				full := filepath.Join(src, path)
				os.MkdirAll(filepath.Dir(full), 0o755)
				os.WriteFile(full, []byte(body), 0o644)
			}
			dst := filepath.Join(home, "sky_workdir")
			os.MkdirAll(dst, 0o755)
			for _, name := range []string{"d", "f.txt", "f.txt.skygo-tmp"} {
				if err := os.Symlink(outside, filepath.Join(dst, name)); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if fallback {
				err = copyTree(src, dst, nil)
			} else {
				err = NewRunner(home, "127.0.0.9").Rsync(context.Background(), src, "~/sky_workdir", provision.RsyncOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			if ls, _ := os.ReadDir(outside); len(ls) != 0 {
				t.Errorf("the sync wrote %s through a link", ls[0].Name())
			}
			for path, want := range map[string]string{"d/x.txt": "x", "f.txt": "f"} {
				if b, err := os.ReadFile(filepath.Join(dst, path)); err != nil || string(b) != want {
					t.Errorf("%s = %q %v", path, b, err)
				}
			}
		})
	}
}

func TestUploadResolvesHome(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "bin")
	os.WriteFile(src, []byte("#!/bin/sh\n"), 0o755)
	if err := NewRunner(home, "127.0.0.9").Upload(context.Background(), src, "~/.sky/bin/sky"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(home, ".sky/bin/sky"))
	if err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("uploaded file: %v, mode %v", err, st)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	if !WaitGone(pid, 3*time.Second) {
		t.Fatalf("process %d still alive", pid)
	}
}

func TestNodeEnvPassesOnlyTheDocumentedVariables(t *testing.T) {
	base := []string{
		"PATH=/opt/x/bin:/usr/bin", "USER=alice", "LANG=C.UTF-8",
		"HOME=/home/server", "PWD=/srv", "FOO_SECRET=x",
		"SKYPILOT_INITIAL_BASIC_AUTH=admin:pw", "AWS_SECRET_ACCESS_KEY=k",
		"TERM=xterm", EnvNode + "=/elsewhere",
	}
	got := NodeEnv(base, "/n/home", "127.0.0.5")
	want := []string{"PATH=/opt/x/bin:/usr/bin", "USER=alice", "LANG=C.UTF-8",
		"HOME=/n/home", EnvNode + "=/n/home", EnvNodeIP + "=127.0.0.5"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("NodeEnv = %q, want %q", got, want)
	}
	if got := NodeEnv(nil, "/h", "ip"); got[0] != "PATH="+defaultPath {
		t.Errorf("without a PATH the node gets %q, want the default login PATH", got[0])
	}
}

func TestRunnerDoesNotPassTheCallersEnvironment(t *testing.T) {
	t.Setenv("FOO_SECRET", "poison")
	res, err := NewRunner(t.TempDir(), "127.0.0.9").Run(context.Background(), "env", provision.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Stdout), "poison") {
		t.Errorf("a node command saw the caller's FOO_SECRET:\n%s", res.Stdout)
	}
}
