package agent

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skygo/skygo/internal/provision"
)

// A rank's command runs as `/bin/bash -i <script file>` the way SkyPilot
// runs setup and run (cli-output.md §Job script environment): -i makes
// bash an interactive shell, so the guard at the top of a stock
// ~/.bashrc lets the user's exports and conda activation through.

// historyOff keeps the job script out of ~/.bash_history (an interactive
// bash would record every line, secret exports included) and turns off
// history expansion, which would otherwise make a `!` in the user's
// script fail with "event not found".
const historyOff = "set +o history +o histexpand\n"

// scriptPreamble is what runs before the exports and the user's script.
// ~/.bashrc is sourced only when it exists (a fresh local node or a bare
// host has none) and ~/sky_workdir entered only when there is one: a
// user without a workdir would otherwise see an error line in every job.
// The bashrc may turn history back on, hence historyOff once more.
const scriptPreamble = "#!/bin/bash\n" + historyOff +
	"if [ -f ~/.bashrc ]; then source ~/.bashrc; fi\n" +
	"set -a\n" +
	". $(conda info --base 2> /dev/null)/etc/profile.d/conda.sh > /dev/null 2>&1 || true\n" +
	"set +a\n" + historyOff +
	"export PYTHONUNBUFFERED=1\n" +
	"if [ -d ~/sky_workdir ]; then cd ~/sky_workdir; fi\n"

// jobScript is the whole file one rank runs. The variables are exported
// after ~/.bashrc, so the task's values win over whatever it sets. There
// is no `set -e`: like SkyPilot, the script's code is its last command's.
func jobScript(env map[string]string, script string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(scriptPreamble)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, provision.Quote(env[k]))
	}
	b.WriteString(script)
	if !strings.HasSuffix(script, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

// writeJobScript writes spec's script under the node's HOME (each local
// node has its own, and it is removed with the node) readable only by
// its owner, since the exports carry the task's secrets.
func writeJobScript(p paths, spec RankSpec) (string, error) {
	dir := p.scriptsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, fmt.Sprintf("%d-%d-%s-*.sh", spec.JobID, spec.Rank, spec.Phase))
	if err != nil {
		return "", err
	}
	_, werr := f.WriteString(jobScript(spec.Env, spec.Script))
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return "", werr
	}
	return f.Name(), nil
}

// removeJobScripts deletes what is left of a rank's script files, for a
// rank whose own process did not get to (a killed exec-rank, a daemon
// that died).
func removeJobScripts(p paths, job, rank int) {
	names, _ := filepath.Glob(filepath.Join(p.scriptsDir(), fmt.Sprintf("%d-%d-*.sh", job, rank)))
	for _, n := range names {
		_ = os.Remove(n)
	}
}

// bashNoise are the lines an interactive bash without a terminal prints
// at start; they say nothing about the job.
var bashNoise = [][]byte{
	[]byte("bash: cannot set terminal process group"),
	[]byte("bash: no job control in this shell"),
}

// outputFilter passes a rank's output on line by line, dropping
// bashNoise lines and turning \r\n line ends into \n.
type outputFilter struct {
	w   io.Writer
	buf []byte
}

func (f *outputFilter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	start := 0
	for {
		i := bytes.IndexByte(f.buf[start:], '\n')
		if i < 0 {
			break
		}
		if err := f.emit(f.buf[start : start+i+1]); err != nil {
			return len(p), err
		}
		start += i + 1
	}
	f.buf = append(f.buf[:0], f.buf[start:]...)
	return len(p), nil
}

func (f *outputFilter) emit(line []byte) error {
	for _, n := range bashNoise {
		if bytes.Contains(line, n) {
			return nil
		}
	}
	if bytes.HasSuffix(line, []byte("\r\n")) {
		line = append(line[:len(line)-2:len(line)-2], '\n')
	}
	_, err := f.w.Write(line)
	return err
}

// flush passes on a last line that has no newline.
func (f *outputFilter) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	line := f.buf
	f.buf = nil
	return f.emit(line)
}
