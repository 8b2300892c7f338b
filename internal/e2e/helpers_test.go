package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/testutil"
)

// cmdTimeout bounds every CLI call: a command that hangs is a failure in
// itself, and the test must go on to clean up.
const cmdTimeout = 90 * time.Second

// skyEnv is one private SkyGo installation: a HOME, an API server port,
// and the environment every sky call of the test runs with.
type skyEnv struct {
	t    testing.TB
	home string
	port int
	bin  string
	env  []string
	// dir is the working directory of a server startForegroundServer
	// starts (default: the test's).
	dir string
}

// node is this machine's node runtime (`sky-node agent ...`), beside bin
// as make build leaves it: local nodes' agents are its processes.
func (e *skyEnv) node() string {
	return filepath.Join(filepath.Dir(e.bin), "sky-node-linux-"+runtime.GOARCH)
}

// newEnv makes a private HOME (short, under os.TempDir: agent sockets live
// under node homes and unix socket paths are capped at 108 bytes), a free
// port for the API server, and the project's test catalog. The
// environment is built from scratch so that credentials or a KUBECONFIG of
// the machine running the tests never leak in. Cleanup tears everything
// down and fails the test if any process of this HOME survives.
func newEnv(t testing.TB) *skyEnv {
	t.Helper()
	bin := testutil.SkyBinary(t)
	home, err := os.MkdirTemp("", "skye2e-")
	if err != nil {
		t.Fatal(err)
	}
	e := &skyEnv{t: t, home: home, port: testutil.FreePort(t), bin: bin}
	user := os.Getenv("USER")
	if user == "" {
		user = "e2e"
	}
	e.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"USER=" + user,
		"LANG=C.UTF-8",
		fmt.Sprintf("SKYPILOT_API_SERVER_LOCAL_PORT=%d", e.port),
		"SKYPILOT_CATALOG_DIR=" + testutil.CatalogDir(),
	}
	t.Cleanup(e.cleanup)
	return e
}

// result is one finished sky call.
type result struct {
	args           []string
	stdout, stderr string
	code           int // -1 when it timed out or could not start
}

func (r result) String() string {
	return fmt.Sprintf("sky %s (exit %d)\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// out is stdout and stderr together, for "the user saw X" checks.
func (r result) out() string { return r.stdout + r.stderr }

// run runs sky with args and returns stdout, stderr and the exit code.
func (e *skyEnv) run(args ...string) (stdout, stderr string, exit int) {
	r := e.exec(cmdTimeout, nil, args...)
	return r.stdout, r.stderr, r.code
}

// exec runs sky with a timeout and extra environment. A timeout is
// reported as a test error (nothing may hang) and as exit code -1.
func (e *skyEnv) exec(timeout time.Duration, extraEnv []string, args ...string) result {
	e.t.Helper()
	return runCmd(e.t, timeout, append(append([]string{}, e.env...), extraEnv...), e.bin, args...)
}

// runCmd runs a program in its own process group, killing the group when
// the timeout passes. WaitDelay stops a child that keeps the output pipes
// open (a detached server would) from blocking the test.
func runCmd(t testing.TB, timeout time.Duration, env []string, bin string, args ...string) result {
	t.Helper()
	return runCmdStdin(t, timeout, env, "", bin, args...)
}

// runCmdStdin is runCmd with stdin.
func runCmdStdin(t testing.TB, timeout time.Duration, env []string, stdin, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	r := result{args: args, stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.code = -1
		t.Errorf("%s %s did not finish within %s\n%s", filepath.Base(bin), strings.Join(args, " "), timeout, r)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		r.code = -1
		t.Errorf("running %s %v: %v", bin, args, err)
	}
	return r
}

// must runs sky and fails the test unless it exits 0.
func (e *skyEnv) must(args ...string) result {
	e.t.Helper()
	r := e.exec(cmdTimeout, nil, args...)
	if r.code != 0 {
		e.t.Fatalf("%s\n%s", r, e.serverLogTail())
	}
	return r
}

// mustJSON runs sky (with -o json among args) and decodes stdout into v.
func (e *skyEnv) mustJSON(v any, args ...string) {
	e.t.Helper()
	r := e.must(args...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		e.t.Fatalf("sky %s: stdout is not the expected JSON (%v):\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

// serverLogTail is the end of the API server log, to explain a failure.
func (e *skyEnv) serverLogTail() string {
	b, err := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "server.log"))
	if err != nil {
		return "(no server log)"
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return "--- server.log (tail):\n" + string(b)
}

// clusterDir is where the local infrastructure keeps a cluster.
func (e *skyEnv) clusterDir(cluster string) string {
	return filepath.Join(paths.LocalInfra(e.home), "clusters", cluster)
}

// nodeHome is the HOME of node i of a local cluster.
func (e *skyEnv) nodeHome(cluster string, i int) string {
	return filepath.Join(e.clusterDir(cluster), fmt.Sprintf("node-%d", i))
}

// nodeIPs are the addresses of a local cluster's nodes, head first, as
// its record holds them: 127.0.0.x on loopback, the nodes' own namespace
// addresses where each node has a network namespace.
func (e *skyEnv) nodeIPs(cluster string) (ips []string, netns bool) {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.clusterDir(cluster), "cluster.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	var rec struct {
		Nodes []struct {
			InternalIP string `json:"internal_ip"`
			NetNS      string `json:"netns"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		e.t.Fatal(err)
	}
	for _, n := range rec.Nodes {
		ips = append(ips, n.InternalIP)
		netns = netns || n.NetNS != ""
	}
	return ips, netns
}

// writeFile writes a file under a fresh temp dir of the test and returns
// its path.
func writeFile(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// job is a row of `sky queue -o json`.
type job struct {
	JobID         int      `json:"job_id"`
	JobName       string   `json:"job_name"`
	Username      string   `json:"username"`
	UserHash      string   `json:"user_hash"`
	SubmittedAt   float64  `json:"submitted_at"`
	StartAt       *float64 `json:"start_at"`
	EndAt         *float64 `json:"end_at"`
	Resources     string   `json:"resources"`
	Status        string   `json:"status"`
	LogPath       string   `json:"log_path"`
	ReturnCodes   []int    `json:"return_codes"`
	FailureReason string   `json:"failure_reason"`
}

// queue returns the jobs of one cluster, keyed by job id.
func (e *skyEnv) queue(cluster string) map[int]job {
	e.t.Helper()
	var out map[string][]job
	e.mustJSON(&out, "queue", cluster, "-o", "json")
	jobs := map[int]job{}
	for _, j := range out[cluster] {
		jobs[j.JobID] = j
	}
	return jobs
}

// waitJob polls the queue until job id satisfies ok, and returns it.
func (e *skyEnv) waitJob(cluster string, id int, timeout time.Duration, what string, ok func(job) bool) job {
	e.t.Helper()
	var j job
	if !waitFor(timeout, func() bool {
		var found bool
		j, found = e.queue(cluster)[id]
		return found && ok(j)
	}) {
		e.t.Fatalf("job %d on %s: not %s after %s (last seen: %+v)", id, cluster, what, timeout, j)
	}
	return j
}

// cluster is the part of a `sky status -o json` record the tests read.
type cluster struct {
	Name               string  `json:"name"`
	Status             string  `json:"status"`
	Autostop           int     `json:"autostop"`
	ToDown             bool    `json:"to_down"`
	LaunchStatusReason *string `json:"launch_status_reason"`
	Cloud              *string `json:"cloud"`
}

// status returns the clusters by name (refreshing first when asked).
func (e *skyEnv) status(refresh bool) map[string]cluster {
	e.t.Helper()
	args := []string{"status", "-o", "json"}
	if refresh {
		args = append(args, "-r")
	}
	var recs []cluster
	e.mustJSON(&recs, args...)
	m := map[string]cluster{}
	for _, c := range recs {
		m[c.Name] = c
	}
	return m
}

// waitFor polls cond every 100 ms until it holds or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	return testutil.WaitFor(timeout, 100*time.Millisecond, cond)
}

// proc is a live process whose environment matched.
type proc struct {
	pid     int
	cmdline string
}

func (p proc) String() string { return fmt.Sprintf("pid %d: %s", p.pid, p.cmdline) }

// procsWithEnv lists live processes (zombies have no environ and are
// skipped) whose environment contains substr, other than this test.
func procsWithEnv(substr string) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(substr)
	var out []proc
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + ent.Name() + "/environ")
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		out = append(out, proc{pid: pid, cmdline: strings.TrimSpace(string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))})
	}
	return out
}

// procsOfHome lists the processes with home, as a whole path, in their
// environment. Homes are /tmp/skye2e-<random number>, so a plain substring
// would also find the processes of every home whose number begins with
// this one's (another test's server, running beside this one).
func procsOfHome(home string) []proc {
	var out []proc
	for _, p := range procsWithEnv(home) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
		if err != nil {
			continue
		}
		for rest := env; ; {
			i := bytes.Index(rest, []byte(home))
			if i < 0 {
				break
			}
			rest = rest[i+len(home):]
			if len(rest) == 0 || rest[0] == 0 || rest[0] == '/' || rest[0] == ':' {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// cleanup tears down every cluster, stops the API server (by its pid
// file if `sky api stop` fails), then requires that no process of this
// HOME is left; leftovers are reported and killed by pid.
func (e *skyEnv) cleanup() {
	t := e.t
	if _, err := os.Stat(paths.ServerDir(e.home)); err == nil {
		// Managed jobs' clusters are their controller's (`down -a` leaves
		// them): cancelling the jobs tears them down.
		if r := e.exec(cmdTimeout, nil, "jobs", "cancel", "-a", "-y"); r.code != 0 {
			t.Errorf("cleanup: %s", r)
		} else if !strings.Contains(r.out(), "No job to cancel") {
			waitFor(60*time.Second, func() bool {
				r := e.exec(cmdTimeout, nil, "jobs", "queue", "--skip-finished", "-o", "json")
				return r.code == 0 && strings.TrimSpace(r.stdout) == "[]"
			})
		}
		// A failed teardown exits 0, as SkyPilot's does; its line says so.
		if r := e.exec(cmdTimeout, nil, "down", "-a", "-y"); r.code != 0 || strings.Contains(r.stdout, "Cluster(s) failed.") {
			t.Errorf("cleanup: %s", r)
		}
		if r := e.exec(30*time.Second, nil, "api", "stop"); r.code != 0 {
			t.Errorf("cleanup: %s", r)
		}
		if b, err := os.ReadFile(filepath.Join(paths.ServerDir(e.home), "server.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 && len(procsWithEnvPid(pid, e.home)) > 0 {
				t.Errorf("cleanup: API server pid %d still runs after `sky api stop`; killing it", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	left := settledProcs(5*time.Second, func() []proc { return procsOfHome(e.home) })
	// A process that writes here without the HOME in its environment
	// (none should) is still this HOME's: found by what it has open.
	left = append(left, procsUsing(e.home)...)
	if len(left) > 0 {
		var lines []string
		for _, p := range left {
			lines = append(lines, p.String())
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		t.Errorf("cleanup: processes of HOME %s survived `sky down -a` and `sky api stop` (now killed):\n%s", e.home, strings.Join(lines, "\n"))
		waitFor(5*time.Second, func() bool { return len(procsOfHome(e.home)) == 0 })
	}
	// `sky down -a` removed every node's network namespace; what is left
	// is reported and removed by the names its leases hold.
	if left := local.Leftovers(e.home); len(left) > 0 {
		t.Errorf("cleanup: network namespaces of HOME %s survived `sky down -a` (now removed): %v", e.home, left)
		local.RemoveLeftovers(e.home)
	}
	if err := os.RemoveAll(e.home); err != nil {
		// Something wrote here while it was removed: say what and who.
		t.Errorf("cleanup: removing %s: %v\nleft: %v\nprocesses with files there: %v", e.home, err, filesUnder(e.home, 20), procsUsing(e.home))
	}
}

// settledProcs polls list every 100 ms until two readings in a row are
// empty, or timeout passes, and returns the last reading. One reading of
// /proc can miss a process: a parent that ReadDir listed may fork a child
// and exit before its environ is read, and the child, born after the
// listing, is in neither; the next reading lists the child.
func settledProcs(timeout time.Duration, list func() []proc) []proc {
	var left []proc
	empty := 0
	waitFor(timeout, func() bool {
		if left = list(); len(left) == 0 {
			empty++
		} else {
			empty = 0
		}
		return empty >= 2
	})
	return left
}

// procsUsing lists the live processes, other than this test, whose
// working directory, root or an open file is under dir.
func procsUsing(dir string) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	under := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	var out []proc
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		base := "/proc/" + ent.Name()
		links := []string{base + "/cwd", base + "/root"}
		if fds, err := os.ReadDir(base + "/fd"); err == nil {
			for _, fd := range fds {
				links = append(links, base+"/fd/"+fd.Name())
			}
		}
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && under(target) {
				cl, _ := os.ReadFile(base + "/cmdline")
				out = append(out, proc{pid: pid, cmdline: strings.TrimSpace(string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '}))) + " (has " + target + ")"})
				break
			}
		}
	}
	return out
}

// filesUnder lists up to n paths under dir, for a failure message.
func filesUnder(dir string, n int) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || len(out) >= n {
			return filepath.SkipDir
		}
		out = append(out, strings.TrimPrefix(p, dir))
		return nil
	})
	return out
}

// procsWithEnvPid returns pid as a proc if it is alive and its
// environment mentions substr (so a reused pid is never killed).
func procsWithEnvPid(pid int, substr string) []proc {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil || !bytes.Contains(env, []byte(substr)) {
		return nil
	}
	return []proc{{pid: pid}}
}

// parseEnvFile reads a NUL-separated `env -0` dump.
func parseEnvFile(t testing.TB, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the env dump a job wrote: %v", err)
	}
	m := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			m[k] = v
		}
	}
	return m
}
