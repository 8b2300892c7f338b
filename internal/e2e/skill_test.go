package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// skillLoop is the agent loop of the seed's SKILL.md ("Before You Start",
// "Agent Feedback Loop", "Workdir Sync Behavior", "Parallel Experiment
// Submission") as an agent types it: no -y on the relaunch of an UP
// cluster, `ssh mycluster`, `sky logs --status`, and the job_id one-liner.
// Only the first launch and the teardown answer their prompts through a
// pipe, as a user would; everything else runs with stdin closed, the way
// an agent's tool runs commands.
const skillLoop = `set -euo pipefail
exec </dev/null
step() { echo "=== $*"; }

step bootstrap
sky api info | tee info.txt
if grep -q 'No SkyPilot API server is connected' info.txt; then
  sky api start
  sky api info | tee info.txt
fi
grep -q 'SkyPilot API server' info.txt
sky check -o json > check.json
python3 -c "import json; d=json.load(open('check.json')); assert isinstance(d, (dict, list)), d"

step 1 validate: a dry run asks as the launch would
echo y | sky launch --dryrun task.yaml

step 2 launch
echo y | sky launch -c mycluster task.yaml

step relaunch, no -y: the cluster is UP, nothing to confirm
sky launch -c mycluster task.yaml

step 3 monitor
sky status -o json > status.json
python3 -c "import json; d=json.load(open('status.json')); assert [c for c in d if c['name'] == 'mycluster' and c['status'] == 'UP'], d"
sky queue mycluster -o json

step 4 wait for completion
job_id=$(sky queue mycluster -o json \
 | python3 -c "import sys, json; jobs = json.load(sys.stdin).get('mycluster', []); print(max(j['job_id'] for j in jobs) if jobs else '')")
test -n "$job_id"
sky logs mycluster $job_id
sky logs mycluster --status

step 5 inspect output
sky logs mycluster --no-follow | tee nofollow.txt
grep -q 'lr=default' nofollow.txt
sky logs mycluster --tail 100

step 6 debug
ssh mycluster 'echo rank=$SKYPILOT_NODE_RANK; ls ~/sky_workdir' | tee ssh.txt
grep -q 'rank=0' ssh.txt
grep -q 'data.txt' ssh.txt

step workdir clean, then iterate
ssh mycluster "rm -rf ~/sky_workdir"
sky exec mycluster updated_task.yaml | tee updated.txt
grep -q 'updated run' updated.txt

step parallel experiment submission
for i in 1 2; do
  sky exec mycluster task.yaml --env LR=1e-$i -d
done
job_id=$(sky queue mycluster -o json \
 | python3 -c "import sys, json; jobs = json.load(sys.stdin).get('mycluster', []); print(max(j['job_id'] for j in jobs) if jobs else '')")
sky logs mycluster $job_id --status && sky logs mycluster $job_id --tail 50 | tee tail.txt
grep -q 'lr=1e-2' tail.txt

step 8 cleanup
echo y | sky down mycluster
sky status -o json > status.json
python3 -c "import json; d=json.load(open('status.json')); assert not [c for c in d if c['name'] == 'mycluster'], d"
echo LOOP DONE
`

// TestSkillAgentLoop runs skillLoop with bash against the built binary, in
// a private HOME. ssh is the system OpenSSH; the one indirection is that
// OpenSSH takes its home from the user database, not $HOME, so a wrapper
// gives it a config holding the Include line SkyGo writes into the test
// HOME's ~/.ssh/config, with the home spelled out.
func TestSkillAgentLoop(t *testing.T) {
	parallel(t)
	for _, tool := range []string{"bash", "python3", "ssh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	e := newEnv(t)
	dir := t.TempDir()
	bindir := filepath.Join(dir, "bin")
	mustMkdir(t, bindir)
	if err := os.Symlink(e.bin, filepath.Join(bindir, "sky")); err != nil {
		t.Fatal(err)
	}
	// The wrapper's config is the Include line with the test HOME spelled
	// out: OpenSSH expands ~ from the user database too.
	sshPath, _ := exec.LookPath("ssh")
	sshConfig := filepath.Join(dir, "ssh_config")
	mustWrite(t, sshConfig, "Include "+filepath.Join(e.home, ".sky", "skygo", "generated", "ssh", "*")+"\n", 0o644)
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %s -F %s -o BatchMode=yes \"$@\"\n", sshPath, sshConfig)
	mustWrite(t, filepath.Join(bindir, "ssh"), wrapper, 0o755)

	work := filepath.Join(dir, "work")
	mustMkdir(t, filepath.Join(work, "code"))
	mustWrite(t, filepath.Join(work, "code", "data.txt"), "payload\n", 0o644)
	mustWrite(t, filepath.Join(work, "task.yaml"), `name: skill-task
workdir: ./code
num_nodes: 2
envs:
  LR: default
setup: echo setup done
run: |
  echo "rank $SKYPILOT_NODE_RANK lr=$LR"
  cat data.txt
`, 0o644)
	mustWrite(t, filepath.Join(work, "updated_task.yaml"), `name: skill-task-2
workdir: ./code
run: echo "updated run $(ls)"
`, 0o644)
	mustWrite(t, filepath.Join(work, "loop.sh"), skillLoop, 0o755)

	env := append([]string{}, e.env...)
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + bindir + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	r := runCmdIn(t, 5*time.Minute, env, work, "bash", "loop.sh")
	if r.code != 0 || !strings.Contains(r.stdout, "LOOP DONE") {
		t.Fatalf("SKILL.md's agent loop failed:\n%s\n%s", r, e.serverLogTail())
	}
	cfg, err := os.ReadFile(filepath.Join(e.home, ".ssh", "config"))
	if err != nil || !strings.Contains(string(cfg), "Include ~/.sky/skygo/generated/ssh/*") {
		t.Errorf("~/.ssh/config lacks SkyGo's Include line (%v):\n%s", err, cfg)
	}
}

func mustMkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t testing.TB, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// runCmdIn runs a program in dir with env; output is kept whole for the
// failure report.
func runCmdIn(t testing.TB, timeout time.Duration, env []string, dir, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{args: append([]string{bin}, args...), stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.code = -1
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		r.code = -1
		r.stderr += err.Error()
	}
	return r
}
