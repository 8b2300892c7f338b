package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/paths"
	skyproc "github.com/skygo/skygo/internal/proc"
)

// jobEnvAllowed are the variables a job on a local node may have besides
// the task's envs and the SKYPILOT_* ones: what a cloud node's login shell
// has, what bash sets itself, PYTHONUNBUFFERED (the job script sets it,
// as SkyPilot's does), and the markers the agent finds a node's
// and a rank's processes by.
var jobEnvAllowed = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL",
	"PWD", "OLDPWD", "SHLVL", "_", "PYTHONUNBUFFERED",
	"SKYGO_LOCAL_NODE", "SKYGO_NODE_IP", "SKYGO_RANK_TAG", "SKYGO_LOCAL_PIDNS",
}

// TestJobEnvironmentAndServerFiles: the server is auto-started by a client
// whose environment holds credentials, and a later client has its own;
// a job on the local infrastructure sees none of them, only the documented
// variables, and cannot read the server's state database, config or API
// server directory, whether by their absolute paths or by walking up from
// its HOME, while its own HOME stays writable.
func TestJobEnvironmentAndServerFiles(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	if err := os.MkdirAll(paths.SkyDir(e.home), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths.Config(e.home), []byte("# config-poison\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	poison := []string{"FOO_SECRET=poison-foo", "AWS_SECRET_ACCESS_KEY=poison-aws", "SKYPILOT_INITIAL_BASIC_AUTH=admin:poison-pw"}
	if r := e.exec(cmdTimeout, poison, "status"); r.code != 0 {
		t.Fatalf("%s\n%s", r, e.serverLogTail())
	}
	if _, err := os.Stat(paths.StateDB(e.home)); err != nil {
		t.Fatalf("the server has no state database to hide: %v", err)
	}

	hidden := []string{paths.StateDB(e.home), paths.Config(e.home), filepath.Join(paths.ServerDir(e.home), "server.log")}
	yaml := writeFile(t, "env.yaml", `name: jobenv
num_nodes: 2
envs:
  TASK_VAR: task-value
run: |
  env -0 > ~/job-env
  for f in `+strings.Join(hidden, " ")+` ../../../../state.db; do
    if cat "$f" >/dev/null 2>&1; then echo "READABLE $f"; else echo "hidden $f"; fi
  done
  echo written > ~/own-file
`)
	r := e.exec(cmdTimeout, []string{"LATER_CLIENT_SECRET=poison-later"}, "launch", "-y", "-c", "jobenv", "--secret", "TASK_SECRET=s3", yaml)
	if r.code != 0 {
		t.Fatalf("%s\n%s", r, e.serverLogTail())
	}
	sandboxed := skyproc.SandboxAvailable() == nil
	if strings.Contains(r.stdout, "READABLE") && sandboxed {
		t.Errorf("a job read the server's files:\n%s", r.stdout)
	}
	if n := strings.Count(r.stdout, "hidden "); sandboxed && n != 2*(len(hidden)+1) {
		t.Errorf("want every file hidden on both nodes, %d lines say so:\n%s", n, r.stdout)
	}
	for node := range 2 {
		home := e.nodeHome("jobenv", node)
		if b, err := os.ReadFile(filepath.Join(home, "own-file")); err != nil || string(b) != "written\n" {
			t.Errorf("node %d: the job's file in its HOME = %q, %v", node, b, err)
		}
		env := parseEnvFile(t, filepath.Join(home, "job-env"))
		for k, v := range env {
			if strings.Contains(v, "poison") {
				t.Errorf("node %d: the job sees %s=%s", node, k, v)
			}
			if !slices.Contains(jobEnvAllowed, k) && !strings.HasPrefix(k, "SKYPILOT_") && k != "TASK_VAR" && k != "TASK_SECRET" {
				t.Errorf("node %d: the job has %s=%q, which is not part of its documented environment", node, k, v)
			}
		}
		if env["TASK_VAR"] != "task-value" || env["TASK_SECRET"] != "s3" || env["HOME"] != home || env["PATH"] == "" || env["USER"] == "" {
			t.Errorf("node %d: task envs, secret, HOME, PATH or USER missing: %v", node, env)
		}
	}
	if !sandboxed {
		t.Skipf("the environment is clean; this machine allows no node sandbox, so the files were not hidden")
	}
}
