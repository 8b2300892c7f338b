package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The job's shell (cli-output.md §Job script environment) on the local
// infrastructure, through the built binary. Setup is driven through the
// head agent's job setup phase (`sky agent submit` with a setup), which
// is where setup runs for user clusters.

// agentSubmit submits spec to the head agent of a local cluster, as the
// backend does, for the user of the cluster's job 1 (so that `sky queue`
// lists it), and returns the job id.
func (e *skyEnv) agentSubmit(cluster string, spec map[string]any) int {
	e.t.Helper()
	first, ok := e.queue(cluster)[1]
	if !ok {
		e.t.Fatalf("cluster %s has no job 1 to take the user from", cluster)
	}
	spec["user"], spec["user_hash"] = first.Username, first.UserHash
	env := append([]string{}, e.env...)
	for i, kv := range env {
		if strings.HasPrefix(kv, "HOME=") {
			env[i] = "HOME=" + e.nodeHome(cluster, 0)
		}
	}
	body, _ := json.Marshal(spec)
	r := runCmdStdin(e.t, cmdTimeout, env, string(body), e.node(), "agent", "submit", "--json")
	var res struct {
		JobID int `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || res.JobID == 0 {
		e.t.Fatalf("sky agent submit on the head of %s: %s", cluster, r)
	}
	return res.JobID
}

// writeBashrc gives node i of a local cluster a ~/.bashrc like a stock
// one: it stops early unless the shell is interactive.
func (e *skyEnv) writeBashrc(cluster string, i int, body string) {
	e.t.Helper()
	rc := "case $- in *i*) ;; *) return;; esac\n" + body
	if err := os.WriteFile(filepath.Join(e.nodeHome(cluster, i), ".bashrc"), []byte(rc), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// TestJobShell: a node's ~/.bashrc exports reach run (sky exec) and setup
// (the job's setup phase) on every node; the conda line is harmless
// without conda; the command starts in ~/sky_workdir; bash's job-control
// complaints never reach the user.
func TestJobShell(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "in-workdir.txt"), []byte("synced\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("launch", "-y", "-c", "sh", "--num-nodes", "2", "--workdir", wd, "--", "true")
	for i := 0; i < 2; i++ {
		e.writeBashrc("sh", i, fmt.Sprintf("export TEST_VAR=from-bashrc-%d\n", i))
	}

	r := e.must("exec", "sh", "--num-nodes", "2", "--", `echo "run rank=$SKYPILOT_NODE_RANK var=${TEST_VAR:-TEST_VAR is not set} cwd=$PWD file=$(cat in-workdir.txt)"`)
	for i := 0; i < 2; i++ {
		want := fmt.Sprintf("run rank=%d var=from-bashrc-%d cwd=%s file=synced", i, i, filepath.Join(e.nodeHome("sh", i), "sky_workdir"))
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sky exec output lacks %q:\n%s", want, r.stdout)
		}
	}

	id := e.agentSubmit("sh", map[string]any{
		"num_nodes": 2,
		"setup":     `echo "setup node=$SKYPILOT_SETUP_NODE_RANK var=${TEST_VAR:-TEST_VAR is not set} cwd=$PWD"`,
		"run":       `echo "after setup $SKYPILOT_NODE_RANK"`,
	})
	logs := e.exec(cmdTimeout, nil, "logs", "sh", fmt.Sprint(id))
	if logs.code != 0 {
		t.Fatalf("job %d with a setup: %s", id, logs)
	}
	for i := 0; i < 2; i++ {
		want := fmt.Sprintf("setup node=%d var=from-bashrc-%d cwd=%s", i, i, filepath.Join(e.nodeHome("sh", i), "sky_workdir"))
		if !strings.Contains(logs.stdout, want) {
			t.Errorf("sky logs %d lacks %q:\n%s", id, want, logs.stdout)
		}
	}
	for _, out := range []result{r, logs} {
		for _, noise := range []string{"cannot set terminal process group", "no job control in this shell", "conda", "\r"} {
			if strings.Contains(out.out(), noise) {
				t.Errorf("sky %s shows %q:\n%s", strings.Join(out.args, " "), noise, out.out())
			}
		}
	}
}

// setupFailedLine is SkyPilot's line for a failed setup, escapes included.
var setupFailedLine = regexp.MustCompile(`ERROR: \x1b\[31mJob (\d+)'s setup failed\. Failed workers: \(pid=(\d+), returncode=5\)\. See error logs above for more details\.\x1b\[0m\n`)

// TestMultiNodeSetupFailsFast: node 1's setup exits 5 while node 0's is in
// `sleep 10000`. The job ends FAILED_SETUP within the bounded wait of
// `sky logs` (not after 10000 s), with SkyPilot's ERROR line naming only
// node 1, exit code 100, run skipped, and no setup process left.
func TestMultiNodeSetupFailsFast(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-c", "sf", "--num-nodes", "2", "--", "true")
	marker := fmt.Sprintf("E2E_SETUP_MARK=%d", rand.Int64())
	k, v, _ := strings.Cut(marker, "=")
	sleeping := filepath.Join(e.nodeHome("sf", 0), "setup-0-sleeping")
	ran := filepath.Join(e.nodeHome("sf", 0), "run-ran")
	// Node 1 fails once node 0 sleeps, so only the kill can end node 0.
	id := e.agentSubmit("sf", map[string]any{
		"num_nodes": 2,
		"envs":      map[string]string{k: v, "SLEEPING": sleeping},
		"setup": `if [ "$SKYPILOT_SETUP_NODE_RANK" = 0 ]; then touch "$SLEEPING"; sleep 10000; fi
while [ ! -e "$SLEEPING" ]; do sleep 0.02; done
echo "node 1 setup fails"; exit 5`,
		"run": "touch " + ran,
	})
	logs := e.exec(cmdTimeout, nil, "logs", "sf", fmt.Sprint(id))
	if logs.code != 100 {
		t.Errorf("sky logs of a failed setup: exit %d, want 100\n%s", logs.code, logs)
	}
	m := setupFailedLine.FindStringSubmatch(logs.stdout)
	if m == nil || m[1] != fmt.Sprint(id) {
		t.Errorf("sky logs lacks SkyPilot's setup failure line for job %d:\n%q", id, logs.stdout)
	} else if strings.Count(logs.stdout, "(pid=") != 1 {
		t.Errorf("the failure line names more than node 1's setup:\n%s", logs.stdout)
	}
	if !strings.Contains(logs.stdout, "node 1 setup fails") {
		t.Errorf("sky logs lacks node 1's setup output:\n%s", logs.stdout)
	}
	j := e.queue("sf")[id]
	if j.Status != "FAILED_SETUP" || fmt.Sprint(j.ReturnCodes) != "[137 5]" {
		t.Errorf("job %d = %+v, want FAILED_SETUP with return codes [137 5]", id, j)
	}
	if st := e.exec(cmdTimeout, nil, "logs", "sf", fmt.Sprint(id), "--status"); st.code != 100 {
		t.Errorf("logs --status: %s\nwant exit 100", st)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("run started after the failed setup (%v)", err)
	}
	// The job is recorded only once every setup process is gone.
	for i := 0; i < 2; i++ {
		if left := procsWithEnv("SKYGO_RANK_TAG=" + e.nodeHome("sf", i) + ":"); len(left) > 0 {
			t.Errorf("node %d still runs setup processes: %v", i, left)
		}
	}
	if left := procsWithEnv(marker); len(left) > 0 {
		t.Errorf("processes of the failed setup survive: %v", left)
	}
}
