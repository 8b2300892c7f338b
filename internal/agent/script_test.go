package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOutputFilter(t *testing.T) {
	var out bytes.Buffer
	f := &outputFilter{w: &out}
	for _, chunk := range []string{
		"bash: cannot set terminal process group (-1): Inappropriate ioctl for device\nbash: no job",
		" control in this shell\nfirst\r\nsec", "ond\n\r\n",
		"contains bash: no job control in this shell, so dropped\n",
		"a\rb\n", "tail\r\n", "last",
	} {
		if n, err := f.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	if err := f.flush(); err != nil {
		t.Fatal(err)
	}
	// A lone \r (a progress bar) stays; only \r\n line ends change.
	if want := "first\nsecond\n\na\rb\ntail\nlast"; out.String() != want {
		t.Errorf("filtered output = %q, want %q", out.String(), want)
	}
}

// runScript runs one rank the way the agent does, in a fresh HOME, and
// returns its filtered output and exit code.
func runScript(t *testing.T, home string, spec RankSpec) (string, int) {
	t.Helper()
	// The agent runs with HOME set to the node's.
	t.Setenv("HOME", home)
	rp, err := startRank(home, spec)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := rp.wait(&out)
	return out.String(), code
}

func TestJobScriptShell(t *testing.T) {
	home := t.TempDir()
	bashrc := "export TEST_VAR=from-bashrc\nexport OVERRIDDEN=bashrc\nalias greet='echo alias-works'\n"
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte(bashrc), 0o644); err != nil {
		t.Fatal(err)
	}
	weird := "it's \"quoted\"\n$HOME `x` \\ end"
	spec := RankSpec{JobID: 3, Rank: 0, Phase: "run",
		Env: map[string]string{"OVERRIDDEN": "task", "WEIRD": weird, "SECRET_TOKEN": "s3cret"},
		Script: `echo "var=$TEST_VAR over=$OVERRIDDEN py=$PYTHONUNBUFFERED cwd=$PWD"
[ "$WEIRD" = "$(printf '%s' "$EXPECT")" ] && echo weird-ok
echo "bang!x !! done"
greet
case $- in *i*) echo interactive;; esac
ls ~/.sky/agent/scripts
exit 4`}
	spec.Env["EXPECT"] = weird
	out, code := runScript(t, home, spec)
	if code != 4 {
		t.Errorf("exit code %d, want the script's 4\n%s", code, out)
	}
	for _, want := range []string{
		"var=from-bashrc over=task py=1 cwd=" + home + "\n",
		"weird-ok\n",
		"bang!x !! done\n",
		"alias-works\n",
		"interactive\n",
		"3-0-run-",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "bash:") || strings.Contains(out, "No such file") {
		t.Errorf("output has bash noise or an error line:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(home, ".sky", "agent", "scripts", "*")); len(left) > 0 {
		t.Errorf("script files left after the rank ended: %v", left)
	}
	if _, err := os.Stat(filepath.Join(home, ".bash_history")); !os.IsNotExist(err) {
		b, _ := os.ReadFile(filepath.Join(home, ".bash_history"))
		t.Errorf("the job script went into ~/.bash_history (%v):\n%s", err, b)
	}

	// With a workdir the script starts there; without a ~/.bashrc it
	// says nothing about it.
	if err := os.Remove(filepath.Join(home, ".bashrc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(home, "sky_workdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code = runScript(t, home, RankSpec{JobID: 4, Phase: "setup", Script: `echo "cwd=$PWD var=${TEST_VAR-unset}"`})
	if want := "cwd=" + filepath.Join(home, "sky_workdir") + " var=unset\n"; code != 0 || out != want {
		t.Errorf("no bashrc, with workdir: %d %q, want 0 %q", code, out, want)
	}
}

func TestJobScriptFileIsPrivate(t *testing.T) {
	home := t.TempDir()
	name, err := writeJobScript(paths{home}, RankSpec{JobID: 1, Phase: "run", Env: map[string]string{"K": "v"}, Script: "true"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(name)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("script %s: %v, mode %v; want 0600", name, err, st.Mode())
	}
	removeJobScripts(paths{home}, 1, 0)
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Errorf("removeJobScripts left %s", name)
	}
}
