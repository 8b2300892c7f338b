package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skygo/skygo/internal/testutil"
)

// TestFlagWalk walks the whole command tree and proves, for every flag of
// every command, that it either does what the CLI reference says
// (a behaviour probe: the command is run and its effect observed) or is
// refused with a one-line error naming it (a refusal probe). A flag with no
// entry in flagCases fails the test, and so does an entry naming a flag
// that no longer exists: a new flag must come with its proof.
//
// Every probe runs the built binary against one API server (one HOME), so
// the whole walk costs one server and a few local clusters.
func TestFlagWalk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and local clusters")
	}
	e := newFlagEnv(t)
	cases := flagCases(e)

	byKey := map[string]flagCase{}
	for _, c := range cases {
		if _, dup := byKey[c.key]; dup {
			t.Errorf("flagCases: %q is listed twice", c.key)
		}
		byKey[c.key] = c
	}
	tree := treeFlags()
	for _, k := range tree {
		if _, ok := byKey[k]; !ok {
			t.Errorf("flag %q has no entry in flagCases: add a behaviour probe, or a refusal probe if this build cannot honour it", k)
		}
	}
	inTree := map[string]bool{}
	for _, k := range tree {
		inTree[k] = true
	}
	for _, c := range cases {
		if !inTree[c.key] {
			t.Errorf("flagCases lists %q, which is not a flag of the command tree", c.key)
		}
	}
	if t.Failed() {
		return
	}
	for _, c := range cases {
		c := c
		if !t.Run(c.key, func(t *testing.T) { c.probe(t, e) }) && testing.Verbose() {
			t.Logf("probe of %s failed", c.key)
		}
	}
}

// treeFlags lists "COMMAND PATH --FLAG" for every flag of every command,
// hidden ones included. -h/--help is cobra's own on every command and is
// covered by help_test.go.
func treeFlags() []string {
	io, _, _ := testIO("", false)
	root := newRootCmd(testFactory(io, nil))
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimSpace(strings.TrimPrefix(c.CommandPath(), "sky"))
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			out = append(out, strings.TrimSpace(path+" --"+f.Name))
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	sort.Strings(out)
	return out
}

// commandFlags lists the flags of one command path ("jobs launch").
func commandFlags(path string) []*pflag.Flag {
	io, _, _ := testIO("", false)
	root := newRootCmd(testFactory(io, nil))
	c, _, err := root.Find(strings.Fields(path))
	if err != nil {
		panic(err)
	}
	var out []*pflag.Flag
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			out = append(out, f)
		}
	})
	return out
}

// flagCase is one flag's proof.
type flagCase struct {
	key   string // "launch --cpus"
	probe func(t *testing.T, e *flagEnv)
}

// flagEnv is the one installation every probe runs in: a HOME with a
// config that defines the workspace "team", a working directory with the
// files probes use, and a local cluster "fw" launched at the start.
type flagEnv struct {
	t    *testing.T
	home string
	dir  string
	bin  string
	env  []string
	// jobs are the finished managed jobs of this installation, made by
	// the first probe that asks (finished); shared by withEnv's copies.
	jobs *finishedJobs
}

func newFlagEnv(t *testing.T) *flagEnv {
	bin := testutil.SkyBinary(t)
	// Short: agent sockets live under node homes (108-byte socket paths).
	home, err := os.MkdirTemp("", "skyfw-")
	if err != nil {
		t.Fatal(err)
	}
	e := &flagEnv{t: t, home: home, dir: filepath.Join(home, "work"), bin: bin, jobs: &finishedJobs{}}
	e.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"USER=flagwalk",
		"LANG=C.UTF-8",
		fmt.Sprintf("SKYPILOT_API_SERVER_LOCAL_PORT=%d", testutil.FreePort(t)),
		"SKYPILOT_CATALOG_DIR=" + testutil.CatalogDir(),
		// Services decide every second, so the serve probes' replicas
		// come and go within a probe.
		"SKYGO_SERVE_DECISION_INTERVAL=1s",
	}
	files := map[string]string{
		".sky/config.yaml":    "workspaces:\n  team: {}\n",
		"work/wd/hello.txt":   "hello from the workdir\n",
		"work/vars.env":       "FROM_FILE=file-value\n",
		"work/secrets.env":    "SECRET_FILE=s3cr3t-file\n",
		"work/team.yaml":      "active_workspace: team\n",
		"work/setup.yaml":     "setup: echo SETUP-RAN\nrun: echo RUN-RAN\n",
		"work/needsenv.yaml":  "envs:\n  NEEDED: null\nrun: echo $NEEDED\n",
		"work/needssec.yaml":  "secrets:\n  TOKEN: null\nrun: echo hi\n",
		"work/needed.env":     "NEEDED=from-file\nTOKEN=from-file\n",
		"work/ips.txt":        "10.0.0.1\n",
		"work/key":            "not a key\n",
		"work/volume.yaml":    "name: v\ntype: k8s-pvc\nsize: 1Gi\n",
		"work/job.yaml":       "run: echo hi\n",
		"work/service.yaml":   "service:\n  readiness_probe: /\n  replicas: 1\nresources:\n  ports: 8080\nrun: echo hi\n",
		"work/pool.yaml":      "pool:\n  workers: 1\nrun: echo hi\n",
		"work/poolsetup.yaml": "pool:\n  workers: 1\nsetup: cat hello.txt; echo ENV=$FOO FILE=$FROM_FILE SLEN=${#TOKEN} SFLEN=${#SECRET_FILE}\n",
		"work/poolfail.yaml":  "pool:\n  workers: 1\nsetup: exit 3\n",
		"work/git/README.txt": "from git\n",
	}
	for name, content := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.makeGitRepo(t)
	t.Cleanup(func() {
		e.sky("jobs", "pool", "down", "-a", "-y")
		e.sky("serve", "down", "-a", "-y", "--purge")
		e.sky("down", "-a", "-y")
		e.sky("api", "stop")
		os.RemoveAll(home)
	})
	e.mustWork("launch", "-y", "-c", "fw", "-d", "echo base")
	return e
}

// makeGitRepo makes work/git a repository with README.txt on its first
// branch and OTHER.txt on the branch "other", for --git-url/--git-ref.
func (e *flagEnv) makeGitRepo(t *testing.T) {
	repo := filepath.Join(e.dir, "git")
	steps := [][]string{
		{"init", "-q"},
		{"add", "README.txt"},
		{"commit", "-q", "-m", "first"},
		{"checkout", "-q", "-b", "other"},
	}
	for _, s := range steps {
		git(t, repo, s...)
	}
	if err := os.WriteFile(filepath.Join(repo, "OTHER.txt"), []byte("on the other branch\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "OTHER.txt")
	git(t, repo, "commit", "-q", "-m", "other")
	git(t, repo, "checkout", "-q", "-")
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.email=fw@example.com", "-c", "user.name=fw", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// flagRun is one finished sky call.
type flagRun struct {
	args        []string
	out, errOut string
	code        int
}

func (r flagRun) String() string {
	return fmt.Sprintf("sky %s (exit %d)\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.args, " "), r.code, r.out, r.errOut)
}

func (e *flagEnv) sky(args ...string) flagRun { return e.skyIn("", args...) }

// skyIn runs the binary with stdin (not a terminal) in the work directory.
func (e *flagEnv) skyIn(stdin string, args ...string) flagRun {
	cmd := exec.Command(e.bin, args...)
	cmd.Env, cmd.Dir = e.env, e.dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("sky %v: %v", args, err)
	}
	go func() { done <- cmd.Wait() }()
	r := flagRun{args: args}
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			r.code = -1
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		r.code = -1
	}
	r.out, r.errOut = out.String(), errOut.String()
	return r
}

// url is the endpoint of the probes' API server.
func (e *flagEnv) url() string {
	for _, kv := range e.env {
		if p, ok := strings.CutPrefix(kv, "SKYPILOT_API_SERVER_LOCAL_PORT="); ok {
			return "http://127.0.0.1:" + p
		}
	}
	e.t.Fatal("flagEnv has no API server port")
	return ""
}

func (e *flagEnv) mustWork(args ...string) flagRun {
	e.t.Helper()
	r := e.sky(args...)
	if r.code != 0 {
		e.t.Fatalf("setup step failed: %s", r)
	}
	return r
}

// statusOf is the cluster's `sky status -o json` record ("" status when
// it does not exist).
func (e *flagEnv) statusOf(t *testing.T, name string) map[string]any {
	t.Helper()
	r := e.sky("status", "-o", "json", name)
	var recs []map[string]any
	if err := json.Unmarshal([]byte(r.out), &recs); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, r)
	}
	if len(recs) == 0 {
		return map[string]any{"status": ""}
	}
	return recs[0]
}

// waitStatus polls until the cluster has status want ("" = gone).
func (e *flagEnv) waitStatus(t *testing.T, name, want string, within time.Duration) {
	t.Helper()
	var got any
	if !testutil.WaitFor(within, 300*time.Millisecond, func() bool { got = e.statusOf(t, name)["status"]; return got == want }) {
		t.Fatalf("cluster %s: status %v after %s, want %q%s", name, got, within, want, e.clusterDiagnostics(name))
	}
}

// clusterDiagnostics is what a failed wait on a local cluster shows: its
// head agent's autostop log, and the server log's lines naming it.
func (e *flagEnv) clusterDiagnostics(name string) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(e.home, ".sky", "skygo", "local", "clusters", name, "node-0", ".sky", "agent", "autostop.log"))
	for _, l := range logs {
		raw, _ := os.ReadFile(l)
		fmt.Fprintf(&b, "\n--- %s:\n%s", l, raw)
	}
	if raw, err := os.ReadFile(filepath.Join(e.home, ".sky", "skygo", "api_server", "server.log")); err == nil {
		fmt.Fprintf(&b, "\n--- server.log lines naming %s:\n", name)
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, name) {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// works runs args and wants exit 0 with each of want in the output.
func works(args []string, want ...string) func(*testing.T, *flagEnv) {
	return func(t *testing.T, e *flagEnv) {
		t.Helper()
		r := e.sky(args...)
		wantWorks(t, r, want...)
	}
}

func wantWorks(t *testing.T, r flagRun, want ...string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("want exit 0: %s", r)
	}
	all := r.out + r.errOut
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("output lacks %q: %s", w, r)
		}
	}
}

// refuses runs args and wants a non-zero exit with one line of stderr
// holding every part of want (the flag or field, and why).
func refuses(args []string, want ...string) func(*testing.T, *flagEnv) {
	return func(t *testing.T, e *flagEnv) {
		t.Helper()
		wantRefused(t, e.sky(args...), want...)
	}
}

func wantRefused(t *testing.T, r flagRun, want ...string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("want a refusal (exit != 0): %s", r)
	}
	for _, line := range strings.Split(r.errOut, "\n") {
		ok := true
		for _, w := range want {
			if !strings.Contains(line, w) {
				ok = false
			}
		}
		if ok {
			return
		}
	}
	t.Errorf("no line of stderr holds all of %q: %s", want, r)
}

// wholeCommandRefused gives every flag of a command that this build
// refuses as a whole an entry that runs it with that flag.
func wholeCommandRefused(path string, pos ...string) []flagCase {
	var out []flagCase
	for _, f := range commandFlags(path) {
		args := append(strings.Fields(path), pos...)
		switch f.Value.Type() {
		case "bool":
			args = append(args, "--"+f.Name)
		case "int":
			args = append(args, "--"+f.Name+"=1")
		default:
			args = append(args, "--"+f.Name+"="+sampleValue(f.Name))
		}
		name := f.Name
		out = append(out, flagCase{key: path + " --" + f.Name, probe: func(t *testing.T, e *flagEnv) {
			// Refused as a whole, or, when the flag needs a companion,
			// refused by the flag check that comes first.
			r := e.sky(args...)
			if r.code == 0 || !(strings.Contains(r.errOut, "not available in this build") || strings.Contains(firstLine(r.errOut, 1000), "--"+name)) {
				t.Errorf("want a refusal naming the command as unavailable or naming --%s: %s", name, r)
			}
		}})
	}
	return out
}

// sampleValue is a value each refused command's flag parses.
func sampleValue(flag string) string {
	switch flag {
	case "config":
		return "jobs.controller.resources.cpus=4"
	case "mode":
		return "rolling"
	case "job-recovery":
		return "FAILOVER"
	case "output":
		return "json"
	case "gpus":
		return "A100:1"
	case "cpus", "memory":
		return "2+"
	case "disk-tier":
		return "low"
	case "network-tier":
		return "standard"
	case "env", "secret":
		return "A=1"
	case "env-file":
		return "vars.env"
	case "secret-file":
		return "secrets.env"
	case "workdir":
		return "wd"
	case "ports":
		return "8080"
	case "priority":
		return "1"
	case "since":
		return "1h"
	case "after", "before":
		return "2026-01-13"
	case "status":
		return "RUNNING"
	case "local-disk":
		return "nvme"
	case "depends-on":
		return "1"
	case "infra", "cloud":
		return "aws"
	case "size":
		return "1Gi"
	}
	return "x"
}

// configRefused is the --config proof of a command that sends requests:
// a config naming a workspace the server does not define is refused, so
// the config reached the server (the launch probes show it taking effect).
func configRefused(args ...string) func(*testing.T, *flagEnv) {
	return refuses(append(args, "--config", "active_workspace=nope"), "Workspace nope does not exist")
}

// taskFlagCases are the resource and task flags of launch and exec on
// the local cluster fw (exec) or a relaunch of it (launch). run is the
// command line before the flag, ending where the entrypoint goes.
func taskFlagCases(cmd string) []flagCase {
	var run []string
	if cmd == "exec" {
		run = []string{"exec", "fw"}
	} else {
		run = []string{"launch", "-y", "-c", "fw"}
	}
	with := func(flags ...string) []string {
		return append(append(append([]string{}, run...), flags...), "--")
	}
	k := func(f string) string { return cmd + " --" + f }
	return []flagCase{
		{k("name"), func(t *testing.T, e *flagEnv) {
			wantWorks(t, e.sky(append(with("-n", cmd+"-named"), "echo named")...))
			wantWorks(t, e.sky("queue", "fw"), cmd+"-named")
		}},
		{k("workdir"), works(append(with("--workdir", "wd"), "cat hello.txt"), "hello from the workdir")},
		{k("git-url"), func(t *testing.T, e *flagEnv) {
			repo := "file://" + filepath.Join(e.dir, "git")
			wantWorks(t, e.sky(append(with("--git-url", repo), "cat README.txt")...), "from git")
			wantRefused(t, e.sky(append(with("--git-url", repo, "--workdir", "wd"), "true")...), "--workdir and --git-url")
		}},
		{k("git-ref"), func(t *testing.T, e *flagEnv) {
			repo := "file://" + filepath.Join(e.dir, "git")
			wantWorks(t, e.sky(append(with("--git-url", repo, "--git-ref", "other"), "cat OTHER.txt")...), "on the other branch")
			wantRefused(t, e.sky(append(with("--git-ref", "main"), "true")...), "--git-ref needs a git workdir")
		}},
		{k("infra"), func(t *testing.T, e *flagEnv) {
			wantWorks(t, e.sky(append(with("--infra", "local"), "echo on-local")...), "on-local")
			wantRefused(t, e.sky(append(with("--infra", "aws"), "true")...), "requested infra aws", "fw")
		}},
		{k("cloud"), refuses(append(with("--cloud", "aws"), "true"), "requested infra aws")},
		{k("region"), refuses(append(with("--region", "us-east-1"), "true"), "requested region us-east-1")},
		{k("zone"), refuses(append(with("--zone", "us-east-1a"), "true"), "requested zone us-east-1a")},
		{k("num-nodes"), func(t *testing.T, e *flagEnv) {
			wantWorks(t, e.sky(append(with("--num-nodes", "1"), "echo $SKYPILOT_NUM_NODES")...), "1")
			wantRefused(t, e.sky(append(with("--num-nodes", "3"), "true")...), "requested 3 nodes")
		}},
		{k("cpus"), func(t *testing.T, e *flagEnv) {
			wantWorks(t, e.sky(append(with("--cpus", "1", "-d", "-n", cmd+"-cpus"), "true")...))
			wantWorks(t, e.sky("queue", "fw"), "1x[CPU:1]")
			wantRefused(t, e.sky(append(with("--cpus", "4096"), "true")...), "4096 CPUs")
		}},
		{k("memory"), refuses(append(with("--memory", "99999"), "true"), "memory 99999GB")},
		{k("disk-size"), refuses(append(with("--disk-size", "100"), "true"), "disk_size 100")},
		{k("disk-tier"), refuses(append(with("--disk-tier", "high"), "true"), "disk_tier high")},
		{k("network-tier"), func(t *testing.T, e *flagEnv) {
			// standard is every infra's default; best asks for more.
			wantWorks(t, e.sky(append(with("--network-tier", "standard"), "echo std")...), "std")
			wantRefused(t, e.sky(append(with("--network-tier", "best"), "true")...), "network_tier best")
		}},
		{k("use-spot"), refuses(append(with("--use-spot"), "true"), "spot")},
		{k("no-use-spot"), works(append(with("--no-use-spot"), "echo on-demand"), "on-demand")},
		{k("image-id"), refuses(append(with("--image-id", "ami-123"), "true"), "image_id ami-123")},
		{k("local-disk"), refuses(append(with("--local-disk", "nvme"), "true"), "local_disk nvme")},
		{k("gpus"), refuses(append(with("--gpus", "A100:1"), "true"), "A100")},
		{k("instance-type"), refuses(append(with("-t", "m5.large"), "true"), "instance type m5.large")},
		{k("ports"), refuses(append(with("--ports", "9999"), "true"), "port 9999")},
		{k("env"), works(append(with("--env", "FOO=bar-value"), "echo $FOO"), "bar-value")},
		{k("env-file"), works(append(with("--env-file", "vars.env"), "echo $FROM_FILE"), "file-value")},
		{k("secret"), works(append(with("--secret", "TOKEN=tok-value"), "echo len=${#TOKEN}"), "len=9")},
		{k("secret-file"), works(append(with("--secret-file", "secrets.env"), "echo len=${#SECRET_FILE}"), "len=11")},
		{k("async"), works(append(with("--async"), "true"), "Submitted sky."+cmd+" request")},
		{k("no-async"), works(append(with("--no-async"), "echo waited"), "waited")},
		{k("detach-run"), func(t *testing.T, e *flagEnv) {
			r := e.sky(append(with("-d"), "sleep 2; echo LATE-$((40+2))")...)
			wantWorks(t, r)
			if strings.Contains(r.out, "LATE-42") {
				t.Errorf("-d streamed the job to its end: %s", r)
			}
		}},
		{k("cluster"), func(t *testing.T, e *flagEnv) {
			if cmd == "exec" {
				wantWorks(t, e.sky("exec", "-c", "fw", "echo by-flag"), "by-flag")
				return
			}
			wantWorks(t, e.sky("launch", "-y", "-c", "fwc", "-d", "echo c"), "Running on cluster: fwc")
			if s := e.statusOf(t, "fwc")["status"]; s != "UP" {
				t.Errorf("fwc status %v, want UP", s)
			}
		}},
	}
}

// flagCases is the table: one entry per flag of the tree.
func flagCases(e *flagEnv) []flagCase {
	var cs []flagCase
	add := func(key string, p func(*testing.T, *flagEnv)) { cs = append(cs, flagCase{key, p}) }

	add("--version", works([]string{"--version"}, "sky, version"))

	// sky launch
	cs = append(cs, taskFlagCases("launch")...)
	add("launch --config", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("launch", "-y", "-c", "fwcfg", "--config", "active_workspace=nope", "echo x"), "Workspace nope does not exist")
		wantWorks(t, e.sky("launch", "-y", "-c", "fwcfg", "-d", "--config", "team.yaml", "echo x"))
		if ws := e.statusOf(t, "fwcfg")["workspace"]; ws != "team" {
			t.Errorf("launch --config team.yaml: workspace %v, want team", ws)
		}
	})
	add("launch --workspace", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("launch", "-y", "-c", "fwws", "-w", "nope", "echo x"), "Workspace nope does not exist")
		wantWorks(t, e.sky("launch", "-y", "-c", "fwws", "-d", "-w", "team", "echo x"))
		if ws := e.statusOf(t, "fwws")["workspace"]; ws != "team" {
			t.Errorf("launch -w team: workspace %v, want team", ws)
		}
		// A cluster stays in its workspace.
		wantRefused(t, e.sky("launch", "-y", "-c", "fwws", "-w", "default", "echo x"), `is in workspace "team"`)
	})
	add("launch --dryrun", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("launch", "-y", "--dryrun", "-c", "fwdry", "echo x"), "Dryrun finished.")
		// Without -y a dry run asks as a launch does, after the table;
		// the answer ends it, and no answer aborts it.
		r := e.skyIn("y\n", "launch", "--dryrun", "-c", "fwdry", "echo x")
		wantWorks(t, r, "Considered resources", "Launching a new cluster 'fwdry'. Proceed? [Y/n]: Dryrun finished.")
		if strings.Count(r.out, "Considered resources") != 1 || strings.Contains(r.out, "Running on cluster") {
			t.Errorf("dry run after a prompt: want the table once and no cluster line: %s", r)
		}
		wantRefused(t, e.sky("launch", "--dryrun", "-c", "fwdry", "echo x"), "Aborted!")
		// Onto one's own UP cluster: nothing to plan or ask.
		r = e.sky("launch", "--dryrun", "-c", "fw", "echo x")
		wantWorks(t, r, "Dryrun complete. Would have run:", "Task(run='echo x')", "Cluster name: fw")
		if strings.Contains(r.out, "Considered resources") || strings.Contains(r.out, "Job ID") {
			t.Errorf("dry run onto an UP cluster: want no plan and no job hints: %s", r)
		}
		if s := e.statusOf(t, "fwdry")["status"]; s != "" {
			t.Errorf("--dryrun created the cluster (status %v)", s)
		}
	})
	add("launch --no-detach-run", works([]string{"launch", "-y", "-c", "fw", "--no-detach-run", "echo streamed"}, "streamed", "Job finished"))
	add("launch --docker", refuses([]string{"launch", "--docker", "echo"}, "--docker is no longer supported"))
	add("launch --yes", func(t *testing.T, e *flagEnv) {
		// Provisioning asks, after the optimizer's table; a pipe with no
		// answer aborts. An UP cluster of one's own is reused unasked.
		r := e.sky("launch", "-c", "fwyes", "echo x")
		if r.code == 0 || !strings.Contains(r.out, "Considered resources") || !strings.Contains(r.out, "Launching a new cluster 'fwyes'. Proceed?") ||
			strings.Index(r.out, "Considered resources") > strings.Index(r.out, "Proceed?") {
			t.Errorf("new cluster without -y: want the table, then the prompt, then an abort: %s", r)
		}
		wantWorks(t, e.sky("launch", "-c", "fw", "echo reused-unasked"), "reused-unasked")
		r = e.sky("launch", "-y", "-c", "fwyes", "-d", "echo x")
		wantWorks(t, r)
		if strings.Contains(r.out, "Proceed?") {
			t.Errorf("-y still asked: %s", r)
		}
	})
	add("launch --no-setup", works([]string{"launch", "-y", "-c", "fw", "--no-setup", "setup.yaml"}, "Setup commands skipped.", "RUN-RAN"))
	add("launch --fast", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("launch", "-y", "-c", "fwfast", "setup.yaml"), "SETUP-RAN")
		r := e.sky("launch", "-y", "-c", "fwfast", "--fast", "setup.yaml")
		wantWorks(t, r, "RUN-RAN")
		if strings.Contains(r.out, "SETUP-RAN") {
			t.Errorf("--fast ran the setup again: %s", r)
		}
	})
	add("launch --idle-minutes-to-autostop", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("launch", "-y", "-c", "fwidle", "-d", "-i", "30", "echo x"))
		if a := e.statusOf(t, "fwidle")["autostop"]; a != float64(30) {
			t.Errorf("-i 30: autostop %v", a)
		}
	})
	add("launch --down", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("launch", "-y", "-c", "fwidle", "-d", "-i", "30", "--down", "echo x"))
		if d := e.statusOf(t, "fwidle")["to_down"]; d != true {
			t.Errorf("--down: to_down %v", d)
		}
	})
	add("launch --wait-for", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("launch", "-y", "-c", "fwwait", "--wait-for", "none", "echo x"), "--wait-for", "-i")
		// none: stop after the idle time even while a job runs.
		wantWorks(t, e.sky("launch", "-y", "-c", "fwwait", "-d", "-i", "0", "--wait-for", "none", "sleep 60"))
		e.waitStatus(t, "fwwait", "STOPPED", 30*time.Second)
	})
	add("launch --priority", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("launch", "-y", "-c", "fwprio", "-d", "--priority", "7", "echo x"))
		if p := e.statusOf(t, "fwprio")["priority"]; p != float64(7) {
			t.Errorf("--priority 7: priority %v", p)
		}
		wantRefused(t, e.sky("launch", "-y", "-c", "fwprio", "--priority", "5000", "echo x"), "--priority 5000")
	})
	// Local nodes always have capacity, so -r's retries cannot be seen
	// here (the backend's failover tests cover them); it must not stop
	// the launch.
	add("launch --retry-until-up", works([]string{"launch", "-y", "-c", "fw", "-r", "echo retried"}, "retried"))
	add("launch --resize", refuses([]string{"launch", "-y", "-c", "fw", "--resize", "--num-nodes", "2", "true"}, "--resize", "not available in this build"))
	add("launch --clone-disk-from", refuses([]string{"launch", "-y", "-c", "fwclone", "--clone-disk-from", "fw", "true"}, "--clone-disk-from", "not available in this build"))

	// sky exec
	cs = append(cs, taskFlagCases("exec")...)
	add("exec --config", configRefused("exec", "fw", "true"))

	// sky status
	add("status --config", configRefused("status"))
	add("status --verbose", works([]string{"status", "-v"}, "HEAD_IP"))
	add("status --refresh", works([]string{"status", "-r", "fw"}, "fw", "UP"))
	add("status --ip", works([]string{"status", "--ip", "fw"}, "."))
	add("status --endpoints", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("launch", "-y", "-c", "fwport", "-d", "--ports", "18080", "echo x"))
		wantWorks(t, e.sky("status", "--endpoints", "fwport"), "18080: ")
		wantRefused(t, e.sky("status", "--endpoints", "fw"), "exposes no ports")
	})
	add("status --endpoint", func(t *testing.T, e *flagEnv) {
		r := e.sky("status", "--endpoint", "18080", "fwport")
		wantWorks(t, r, ":18080")
		wantRefused(t, e.sky("status", "--endpoint", "18081", "fwport"), "Port 18081 is not exposed")
	})
	// The managed-jobs section is probed with the jobs commands, the
	// pools section with the pool commands, the services section with
	// the serve commands.
	add("status --all-users", works([]string{"status", "-u"}, "USER", "fw"))
	add("status --output", func(t *testing.T, e *flagEnv) {
		if s := e.statusOf(t, "fw")["status"]; s != "UP" {
			t.Errorf("status -o json: fw is %v", s)
		}
		wantRefused(t, e.sky("status", "-o", "yaml"), "-o/--output")
	})

	// sky stop / start / down / autostop
	add("stop --config", configRefused("stop", "fw", "-y"))
	add("stop --all", func(t *testing.T, e *flagEnv) {
		r := e.sky("stop", "-a")
		if r.code == 0 || !strings.Contains(r.out, "Stopping") || !strings.Contains(r.out, "fw") {
			t.Errorf("stop -a without -y: want the prompt naming every cluster, then an abort: %s", r)
		}
	})
	add("stop --all-users", func(t *testing.T, e *flagEnv) {
		r := e.sky("stop", "-u")
		if r.code == 0 || !strings.Contains(r.out, "Stopping") || !strings.Contains(r.out, "fw") {
			t.Errorf("stop -u without -y: want the prompt, then an abort: %s", r)
		}
	})
	add("stop --yes", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("launch", "-y", "-c", "fwstop", "-d", "echo x"))
		wantWorks(t, e.sky("stop", "-y", "fwstop"), "Stopping cluster fwstop...done.")
		e.waitStatus(t, "fwstop", "STOPPED", 10*time.Second)
	})
	add("stop --async", works([]string{"stop", "-y", "--async", "fwstop"}, "Submitted sky.stop request"))
	add("stop --no-async", works([]string{"stop", "-y", "--no-async", "fwstop"}, "fwstop"))
	add("stop --graceful", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("launch", "-y", "-c", "fwgrace", "-d", "sleep 120"))
		wantWorks(t, e.sky("stop", "-y", "--graceful", "fwgrace"))
		wantWorks(t, e.sky("start", "-y", "fwgrace"))
		wantWorks(t, e.sky("queue", "fwgrace"), "CANCELLED")
	})
	add("stop --graceful-timeout", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("stop", "-y", "--graceful-timeout", "5", "fwgrace"), "--graceful-timeout only applies with --graceful")
		wantWorks(t, e.sky("exec", "-d", "fwgrace", "sleep 120"))
		wantWorks(t, e.sky("stop", "-y", "--graceful", "--graceful-timeout", "30", "fwgrace"))
	})
	add("start --config", configRefused("start", "fw", "-y"))
	add("start --all", func(t *testing.T, e *flagEnv) {
		r := e.sky("start", "-a")
		if r.code == 0 || !strings.Contains(r.out, "Restarting") || !strings.Contains(r.out, "fwstop") {
			t.Errorf("start -a without -y: want the prompt naming the stopped clusters, then an abort: %s", r)
		}
	})
	add("start --yes", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("start", "-y", "fwstop"), "Cluster fwstop started.")
		e.waitStatus(t, "fwstop", "UP", 10*time.Second)
	})
	add("start --force", works([]string{"start", "-y", "-f", "fwstop"}, "Cluster fwstop started."))
	add("start --retry-until-up", works([]string{"start", "-y", "-r", "-f", "fwstop"}, "Cluster fwstop started."))
	add("start --async", works([]string{"start", "-y", "-f", "--async", "fwstop"}, "Submitted sky.start request"))
	add("start --no-async", works([]string{"start", "-y", "-f", "--no-async", "fwstop"}, "Cluster fwstop started."))
	add("start --idle-minutes-to-autostop", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("start", "-y", "-f", "-i", "45", "fwstop"))
		if a := e.statusOf(t, "fwstop")["autostop"]; a != float64(45) {
			t.Errorf("start -i 45: autostop %v", a)
		}
	})
	add("start --down", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("start", "-y", "--down", "fwstop"), "--down needs -i")
		wantWorks(t, e.sky("start", "-y", "-f", "-i", "45", "--down", "fwstop"))
		if d := e.statusOf(t, "fwstop")["to_down"]; d != true {
			t.Errorf("start --down: to_down %v", d)
		}
	})
	add("start --wait-for", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("start", "-y", "--wait-for", "none", "fwwait"), "--wait-for needs -i")
		wantWorks(t, e.sky("start", "-y", "fwwait"))
		wantWorks(t, e.sky("exec", "-d", "fwwait", "sleep 60"))
		wantWorks(t, e.sky("start", "-y", "-f", "-i", "0", "--wait-for", "none", "fwwait"))
		e.waitStatus(t, "fwwait", "STOPPED", 30*time.Second)
	})
	add("down --config", configRefused("down", "fw", "-y"))
	add("down --all", func(t *testing.T, e *flagEnv) {
		r := e.sky("down", "-a")
		if r.code == 0 || !strings.Contains(r.out, "Terminating") || !strings.Contains(r.out, "fw") {
			t.Errorf("down -a without -y: want the prompt naming every cluster, then an abort: %s", r)
		}
	})
	add("down --all-users", func(t *testing.T, e *flagEnv) {
		r := e.sky("down", "-u")
		if r.code == 0 || !strings.Contains(r.out, "Terminating") {
			t.Errorf("down -u without -y: want the prompt, then an abort: %s", r)
		}
	})
	add("down --yes", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("down", "-y", "fwdry", "fwcfg"))
		e.waitStatus(t, "fwcfg", "", 10*time.Second)
	})
	add("down --purge", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("down", "-y", "-p", "fwprio"))
		e.waitStatus(t, "fwprio", "", 10*time.Second)
	})
	add("down --async", works([]string{"down", "-y", "--async", "fwyes"}, "Submitted sky.down request"))
	add("down --no-async", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("down", "-y", "--no-async", "fwidle"))
		e.waitStatus(t, "fwidle", "", 10*time.Second)
	})
	add("down --graceful", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("start", "-y", "fwgrace"))
		wantWorks(t, e.sky("exec", "-d", "fwgrace", "sleep 120"))
		wantWorks(t, e.sky("down", "-y", "--graceful", "fwgrace"))
		e.waitStatus(t, "fwgrace", "", 10*time.Second)
	})
	add("down --graceful-timeout", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("down", "-y", "--graceful-timeout", "-1", "--graceful", "fwws"), "--graceful-timeout -1")
		wantWorks(t, e.sky("down", "-y", "--graceful", "--graceful-timeout", "10", "fwws"))
		e.waitStatus(t, "fwws", "", 10*time.Second)
	})
	add("autostop --config", configRefused("autostop", "fw", "-y"))
	add("autostop --idle-minutes", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("autostop", "-y", "-i", "20", "fwstop"))
		if a := e.statusOf(t, "fwstop")["autostop"]; a != float64(20) {
			t.Errorf("autostop -i 20: autostop %v", a)
		}
	})
	add("autostop --down", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("autostop", "-y", "-i", "20", "--down", "fwstop"), "autodown")
		if d := e.statusOf(t, "fwstop")["to_down"]; d != true {
			t.Errorf("autostop --down: to_down %v", d)
		}
	})
	add("autostop --cancel", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("autostop", "-y", "--cancel", "fwstop"))
		if a := e.statusOf(t, "fwstop")["autostop"]; a != float64(-1) {
			t.Errorf("autostop --cancel: autostop %v", a)
		}
	})
	add("autostop --wait-for", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("autostop", "-y", "--wait-for", "later", "fwstop"), "--wait-for")
		wantWorks(t, e.sky("exec", "-d", "fwstop", "sleep 60"))
		wantWorks(t, e.sky("autostop", "-y", "-i", "0", "--wait-for", "none", "fwstop"))
		e.waitStatus(t, "fwstop", "STOPPED", 30*time.Second)
	})
	add("autostop --yes", works([]string{"autostop", "-y", "-i", "25", "fw"}, "Scheduling autostop on"))
	add("autostop --all", func(t *testing.T, e *flagEnv) {
		r := e.sky("autostop", "-a")
		if r.code == 0 || !strings.Contains(r.out, "Scheduling autostop on") || !strings.Contains(r.out, "fw") {
			t.Errorf("autostop -a without -y: want the prompt naming every cluster, then an abort: %s", r)
		}
	})
	add("autostop --all-users", func(t *testing.T, e *flagEnv) {
		r := e.sky("autostop", "-u")
		if r.code == 0 || !strings.Contains(r.out, "Scheduling autostop on") {
			t.Errorf("autostop -u without -y: want the prompt, then an abort: %s", r)
		}
	})
	add("autostop --async", works([]string{"autostop", "-y", "--async", "-i", "25", "fw"}, "Submitted sky.autostop request"))
	add("autostop --no-async", works([]string{"autostop", "-y", "--no-async", "-i", "25", "fw"}, "Scheduling autostop on"))

	// sky cost-report / queue / logs / cancel
	add("cost-report --config", configRefused("cost-report"))
	add("cost-report --all", works([]string{"cost-report", "-a"}, "fw", "Total cost"))
	add("cost-report --days", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("cost-report", "--days", "0"), "fw")
		wantRefused(t, e.sky("cost-report", "--days", "-1"), "--days -1")
	})
	add("cost-report --output", func(t *testing.T, e *flagEnv) {
		r := e.sky("cost-report", "-o", "json")
		var v []map[string]any
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || len(v) == 0 {
			t.Errorf("cost-report -o json: %v: %s", err, r)
		}
	})
	add("queue --config", configRefused("queue"))
	add("queue --skip-finished", func(t *testing.T, e *flagEnv) {
		r := e.sky("queue", "-s", "fw")
		wantWorks(t, r)
		if strings.Contains(r.out, "SUCCEEDED") {
			t.Errorf("queue -s shows finished jobs: %s", r)
		}
	})
	add("queue --all-users", works([]string{"queue", "-u", "fw"}, "Job queue of all users on cluster fw"))
	add("queue --output", func(t *testing.T, e *flagEnv) {
		var v map[string][]map[string]any
		r := e.sky("queue", "-o", "json", "fw")
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || len(v["fw"]) == 0 {
			t.Errorf("queue -o json: %v: %s", err, r)
		}
	})
	add("logs --config", configRefused("logs", "fw", "1"))
	add("logs --status", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("logs", "--status", "fw", "1"), "Job 1: SUCCEEDED")
		if r := e.sky("logs", "--status", "fw", "9999"); r.code == 0 {
			t.Errorf("logs --status of a missing job exited 0: %s", r)
		}
	})
	add("logs --follow", works([]string{"logs", "--follow", "fw", "1"}, "base"))
	add("logs --no-follow", works([]string{"logs", "--no-follow", "fw", "1"}, "base"))
	add("logs --tail", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("exec", "fw", "echo TAIL-A; echo TAIL-B"), "TAIL-B")
		r := e.sky("logs", "--tail", "1", "fw")
		wantWorks(t, r, "TAIL-B")
		if strings.Contains(r.out, "TAIL-A") {
			t.Errorf("--tail 1 printed more than the last line: %s", r)
		}
	})
	add("logs --worker", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("logs", "--worker", "3", "fw", "1"), "--worker 3", "1 node")
		wantWorks(t, e.sky("logs", "--worker", "0", "fw", "1"), "base")
	})
	add("logs --sync-down", func(t *testing.T, e *flagEnv) {
		r := e.sky("logs", "--sync-down", "fw", "1")
		wantWorks(t, r, "Job 1 logs: ")
		logs, _ := filepath.Glob(filepath.Join(e.home, "sky_logs", "*", "run.log"))
		if len(logs) == 0 {
			t.Errorf("--sync-down wrote no run.log under ~/sky_logs: %s", r)
		}
	})
	add("logs --provision", works([]string{"logs", "--provision", "fw"}, "Launching on Local"))
	add("logs --hook", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("logs", "--hook", "stop", "fw"), "No stop hook log")
		wantRefused(t, e.sky("logs", "--hook=nope", "fw"), "nope")
	})
	add("logs --autostop", works([]string{"logs", "--autostop", "fw"}, "No stop hook log"))
	add("cancel --config", configRefused("cancel", "-y", "fw", "1"))
	add("cancel --yes", func(t *testing.T, e *flagEnv) {
		r := e.sky("exec", "-d", "fw", "sleep 120")
		wantWorks(t, r)
		r = e.sky("cancel", "fw")
		if r.code == 0 || !strings.Contains(r.out, "Proceed?") {
			t.Errorf("cancel without -y: want the prompt, then an abort: %s", r)
		}
		wantWorks(t, e.sky("cancel", "-y", "fw"), "Cancelled job ID(s)")
	})
	add("cancel --all", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("exec", "-d", "fw", "sleep 120"))
		wantWorks(t, e.sky("cancel", "-y", "-a", "fw"), "Cancelled job ID(s)")
	})
	add("cancel --all-users", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("exec", "-d", "fw", "sleep 120"))
		wantWorks(t, e.sky("cancel", "-y", "-u", "fw"), "Cancelled job ID(s)")
	})
	add("cancel --async", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("exec", "-d", "fw", "sleep 120"))
		wantWorks(t, e.sky("cancel", "-y", "-a", "--async", "fw"), "Submitted sky.cancel request")
	})
	add("cancel --no-async", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("exec", "-d", "fw", "sleep 120"))
		wantWorks(t, e.sky("cancel", "-y", "-a", "--no-async", "fw"), "Cancelled job ID(s)")
	})

	// sky check, gpus, show-gpus
	add("check --config", configRefused("check"))
	add("check --workspace", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("check", "-w", "nope"), "Workspace nope does not exist")
		wantWorks(t, e.sky("check", "-w", "team"), "Enabled infra")
	})
	// -v adds where each infra's credentials come from; an SSH node pool
	// file shows it without a cloud credential (which would change what
	// the other probes' optimizer sees). The pool is gone again after.
	add("check --verbose", func(t *testing.T, e *flagEnv) {
		pools := filepath.Join(e.home, ".sky", "ssh_node_pools.yaml")
		if err := os.WriteFile(pools, []byte("fwpool:\n  hosts:\n    - 10.99.0.1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = os.Remove(pools)
			e.sky("check", "ssh")
		}()
		wantWorks(t, e.sky("check", "-v", "ssh"), "pool fwpool: 1 host(s)")
		if r := e.sky("check", "ssh"); strings.Contains(r.out, "pool fwpool") {
			t.Errorf("check without -v printed the per-pool lines: %s", r)
		}
	})
	add("check --output", func(t *testing.T, e *flagEnv) {
		var v map[string]any
		if r := e.sky("check", "-o", "json"); json.Unmarshal([]byte(r.out), &v) != nil {
			t.Errorf("check -o json is not JSON: %s", r)
		}
	})
	for _, g := range []string{"gpus list", "show-gpus"} {
		args := strings.Fields(g)
		with := func(more ...string) []string { return append(append([]string{}, args...), more...) }
		add(g+" --config", configRefused(args...))
		add(g+" --all", works(with("-a"), "GPU"))
		add(g+" --infra", works(with("--infra", "aws", "H100"), "p5.48xlarge"))
		add(g+" --cloud", works(with("--cloud", "aws", "H100"), "p5.48xlarge"))
		add(g+" --region", func(t *testing.T, e *flagEnv) {
			wantRefused(t, e.sky(with("--region", "us-east-1")...), "--region needs --cloud")
			wantWorks(t, e.sky(with("--cloud", "aws", "--region", "us-east-1", "H100")...), "us-east-1")
		})
		add(g+" --all-regions", works(with("--all-regions", "H100"), "H100"))
		// Without -v, cells longer than 30 characters are cut in the middle.
		add(g+" --verbose", func(t *testing.T, e *flagEnv) {
			long := "hyperstack__1xH100_80GB__28__180"
			wantWorks(t, e.sky(with("-v", "H100")...), long)
			if r := e.sky(with("H100")...); strings.Contains(r.out, long) {
				t.Errorf("%s without -v printed the long cell whole: %s", g, r)
			}
		})
		add(g+" --output", func(t *testing.T, e *flagEnv) {
			var v any
			if r := e.sky(with("-o", "json")...); json.Unmarshal([]byte(r.out), &v) != nil {
				t.Errorf("%s -o json is not JSON: %s", g, r)
			}
		})
	}
	// sky gpus label: no kubeconfig in this HOME, so the server says
	// what is missing; --cleanup has nothing to remove.
	add("gpus label --config", configRefused("gpus", "label"))
	add("gpus label --context", refuses([]string{"gpus", "label", "--context", "nope"}, "no kubeconfig found"))
	add("gpus label --cleanup", works([]string{"gpus", "label", "--cleanup"}, "Nothing to clean up"))
	add("gpus label --async", works([]string{"gpus", "label", "--async"}, "Submitted sky.kubernetes_label_gpus request"))
	cs = append(cs, wholeCommandRefused("dashboard")...)

	cs = append(cs, managedFlagCases()...)
	cs = append(cs, poolFlagCases()...)
	cs = append(cs, serveFlagCases()...)
	cs = append(cs, wholeCommandRefused("jobs dashboard")...)
	// Storage: no bucket exists on this server (buckets themselves are
	// the e2e storage test's, against an S3 emulator).
	add("storage ls --verbose", func(t *testing.T, e *flagEnv) { wantWorks(t, e.sky("storage", "ls", "-v"), "No existing storage.") })
	add("storage ls --output", func(t *testing.T, e *flagEnv) { wantWorks(t, e.sky("storage", "ls", "-o", "json"), "[]") })
	add("storage ls --config", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("storage", "ls", "--config", "jobs.controller.resources.cpus=4"), "No existing storage.")
	})
	add("storage delete --all", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("storage", "delete", "-a", "-y"), "No storage(s) to delete.")
	})
	add("storage delete --yes", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("storage", "delete", "b*", "-y"), "Storage name 'b*' not found.")
	})
	add("storage delete --async", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("storage", "delete", "b", "--async"), "Storage name 'b' not found.")
	})
	add("storage delete --no-async", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("storage", "delete", "b", "--no-async"), "Storage name 'b' not found.")
	})
	add("storage delete --config", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("storage", "delete", "b", "--config", "jobs.controller.resources.cpus=4"), "Storage name 'b' not found.")
	})
	cs = append(cs, volumeFlagCases()...)

	// sky validate
	add("validate --env", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("validate", "needsenv.yaml"), "NEEDED")
		wantWorks(t, e.sky("validate", "--env", "NEEDED=1", "needsenv.yaml"), "YAML is valid")
	})
	add("validate --env-file", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("validate", "--env-file", "needed.env", "needsenv.yaml"), "YAML is valid")
		wantRefused(t, e.sky("validate", "--env-file", "missing.env", "job.yaml"), "--env-file missing.env")
	})
	// A secret left null loads (launch refuses it), and validate prints no
	// secret, so what --secret can show here is that it is parsed and sent.
	add("validate --secret", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("validate", "--secret", "1BAD=x", "needssec.yaml"), "invalid --secret name")
		wantWorks(t, e.sky("validate", "--secret", "TOKEN=x", "needssec.yaml"), "YAML is valid")
		wantRefused(t, e.sky("launch", "-y", "-c", "fw", "needssec.yaml"), "TOKEN")
		wantWorks(t, e.sky("launch", "-y", "-c", "fw", "--secret", "TOKEN=x", "needssec.yaml"))
	})
	add("validate --secret-file", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("validate", "--secret-file", "needed.env", "needssec.yaml"), "YAML is valid")
		wantRefused(t, e.sky("validate", "--secret-file", "missing.env", "job.yaml"), "--secret-file missing.env")
	})

	// sky slurm convert: runs in the client; the YAML it writes is what
	// validate loads.
	convScript := func(t *testing.T, e *flagEnv) string {
		t.Helper()
		p := filepath.Join(e.dir, "conv.sbatch")
		script := "#!/bin/bash\n#SBATCH --job-name=conv\n#SBATCH --partition=gpu\n#SBATCH --gpus-per-node=2\nsrun python train.py\n"
		if err := os.WriteFile(p, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		return "conv.sbatch"
	}
	add("slurm convert --output", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("slurm", "convert", "-o", "conv.yaml", convScript(t, e)), "Wrote conv.yaml", "sky jobs launch -n conv conv.yaml")
		data, err := os.ReadFile(filepath.Join(e.dir, "conv.yaml"))
		if err != nil || !strings.Contains(string(data), "run: |\n  python train.py\n") {
			t.Fatalf("conv.yaml: %v\n%s", err, data)
		}
		wantWorks(t, e.sky("validate", "conv.yaml"), "YAML is valid")
	})
	add("slurm convert --cluster", func(t *testing.T, e *flagEnv) {
		r := e.sky("slurm", "convert", convScript(t, e))
		wantWorks(t, r, "infra: slurm\n", "pass --cluster NAME")
		wantWorks(t, e.sky("slurm", "convert", "--cluster", "c1", convScript(t, e)), "infra: slurm/c1/gpu")
	})
	add("slurm convert --gpu-type", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("slurm", "convert", convScript(t, e)), "accelerators: GPU:2", "--gpu-type")
		wantWorks(t, e.sky("slurm", "convert", "--gpu-type", "H100", convScript(t, e)), "accelerators: H100:2")
	})

	// sky ssh: no node pools in this HOME, so the commands reach the
	// server and say what is missing; the flags are checked on the way.
	add("ssh up --config", configRefused("ssh", "up"))
	add("ssh up --infra", refuses([]string{"ssh", "up", "--infra", "nope"}, "no SSH node pools"))
	add("ssh up --file", refuses([]string{"ssh", "up", "--file", "missing.yaml"}, "missing.yaml"))
	add("ssh up --async", works([]string{"ssh", "up", "--async"}, "Submitted sky.ssh_up request"))
	add("ssh up --no-async", refuses([]string{"ssh", "up", "--no-async"}, "no SSH node pools"))
	add("ssh down --config", configRefused("ssh", "down"))
	add("ssh down --infra", refuses([]string{"ssh", "down", "--infra", "nope"}, "no SSH node pools"))
	add("ssh down --async", works([]string{"ssh", "down", "--async"}, "Submitted sky.ssh_down request"))
	add("ssh down --no-async", refuses([]string{"ssh", "down", "--no-async"}, "no SSH node pools"))

	// sky api
	add("api cancel --all", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("api", "debug-sleep", "--detach", "60"))
		wantWorks(t, e.sky("api", "cancel", "-a", "-y"), "Cancelled")
	})
	add("api cancel --all-users", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("api", "debug-sleep", "--detach", "60"))
		wantWorks(t, e.sky("api", "cancel", "-u", "-y"), "Cancelled")
	})
	// SkyPilot asks nothing before cancelling requests (cli-output.md
	// lists no such prompt), so -y has nothing to skip: it must only be
	// accepted.
	add("api cancel --yes", func(t *testing.T, e *flagEnv) {
		r := e.sky("api", "debug-sleep", "--detach", "60")
		wantWorks(t, r)
		wantWorks(t, e.sky("api", "cancel", "-y", strings.TrimSpace(r.out)), "Cancelled 1 request")
	})
	add("api debug-sleep --detach", func(t *testing.T, e *flagEnv) {
		start := time.Now()
		r := e.sky("api", "debug-sleep", "--detach", "30")
		wantWorks(t, r)
		if time.Since(start) > 10*time.Second {
			t.Errorf("--detach waited for the sleep")
		}
		wantWorks(t, e.sky("api", "cancel", "-y", strings.TrimSpace(r.out)))
	})
	add("api info --output", func(t *testing.T, e *flagEnv) {
		var v map[string]any
		if r := e.sky("api", "info", "-o", "json"); json.Unmarshal([]byte(r.out), &v) != nil {
			t.Errorf("api info -o json is not JSON: %s", r)
		}
	})
	add("api logs --follow", func(t *testing.T, e *flagEnv) {
		// Following a running request waits for its end: the line it
		// writes when done is there, and so is its outcome.
		r := e.sky("api", "debug-sleep", "--detach", "1")
		wantWorks(t, r)
		wantWorks(t, e.sky("api", "logs", "--follow", strings.TrimSpace(r.out)), "done sleeping")
		if r := e.sky("api", "logs", "--follow", "--no-follow"); r.code == 0 || !strings.Contains(r.out+r.errOut, "--follow or --no-follow") {
			t.Errorf("--follow with --no-follow: want a refusal naming both: %s", r)
		}
	})
	add("api logs --log-path", func(t *testing.T, e *flagEnv) {
		dir := filepath.Join(e.home, "sky_logs", "flagwalk")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "run.log"), []byte("first line\nlast line of the file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		wantWorks(t, e.sky("api", "logs", "-l", "flagwalk/run.log"), "first line", "last line of the file")
		if r := e.sky("api", "logs", "--log-path", "~/sky_logs/flagwalk/run.log", "--tail", "1"); r.code != 0 ||
			strings.Contains(r.out, "first line") || !strings.Contains(r.out, "last line of the file") {
			t.Errorf("--log-path with --tail 1: want only the last line: %s", r)
		}
		if r := e.sky("api", "logs", "-l", "../outside.log"); r.code == 0 || !strings.Contains(r.out+r.errOut, "Unauthorized log path") {
			t.Errorf("--log-path outside ~/sky_logs: want the server's refusal: %s", r)
		}
	})
	add("api logs --no-follow", works([]string{"api", "logs", "--no-follow"}))
	add("api logs --server-logs", works([]string{"api", "logs", "--server-logs", "--no-follow", "--tail", "5"}))
	add("api logs --tail", works([]string{"api", "logs", "--no-follow", "--tail", "1"}))
	add("api status --output", func(t *testing.T, e *flagEnv) {
		var v []map[string]any
		if r := e.sky("api", "status", "-a", "-o", "json"); json.Unmarshal([]byte(r.out), &v) != nil || len(v) == 0 {
			t.Errorf("api status -a -o json is not a non-empty JSON list: %s", r)
		}
	})
	add("api status --all-status", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("api", "status", "-a"), "SUCCEEDED")
		if r := e.sky("api", "status"); strings.Contains(r.out, "SUCCEEDED") {
			t.Errorf("api status without -a listed finished requests: %s", r)
		}
	})
	add("api status --all-users", works([]string{"api", "status", "-a", "-u"}, "SUCCEEDED"))
	add("api status --limit", func(t *testing.T, e *flagEnv) {
		r := e.sky("api", "status", "-a", "--limit=1")
		wantWorks(t, r, "Showing 1 requests")
		n := 0
		for _, line := range strings.Split(r.out, "\n") {
			if strings.TrimSpace(line) != "" {
				n++
			}
		}
		if n != 3 {
			t.Errorf("--limit=1: want the header, one row and the footer, got %d lines: %s", n, r)
		}
	})
	add("api status --verbose", works([]string{"api", "status", "-a", "-v"}, "Cluster"))
	add("api status --cluster", func(t *testing.T, e *flagEnv) {
		r := e.sky("api", "status", "-a", "-v", "-l", "all", "--cluster", "fw")
		wantWorks(t, r, "fw")
		for _, line := range strings.Split(strings.TrimSpace(r.out), "\n")[1:] {
			if !strings.Contains(line, " fw ") {
				t.Errorf("--cluster fw listed a request of another cluster: %q", line)
			}
		}
	})
	add("api start --deploy", refuses([]string{"api", "start", "--deploy"}, "auth"))
	add("api start --host", refuses([]string{"api", "start", "--host", "0.0.0.0"}, "auth"))
	apiStart := func(t *testing.T, e *flagEnv) {
		// A second server of its own HOME: --foreground keeps it in the
		// process, --port places it, --enable-basic-auth guards it.
		home := t.TempDir()
		port := testutil.FreePort(t)
		cmd := exec.Command(e.bin, "api", "start", "--foreground", "--port", fmt.Sprint(port), "--enable-basic-auth")
		cmd.Env = append(append([]string{}, e.env...), "HOME="+home)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		var out []byte
		var err error
		if !testutil.WaitFor(20*time.Second, 100*time.Millisecond, func() bool {
			out, err = exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-d", "{}", url+"/status").Output()
			return err == nil && string(out) == "401"
		}) {
			t.Fatalf("foreground server with basic auth on %s: POST /status gave %q, %v (want 401)", url, out, err)
		}
	}
	add("api start --foreground", apiStart)
	add("api start --port", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("api", "start", "--port", "70000"), "--port 70000")
		apiStart(t, e)
	})
	add("api start --enable-basic-auth", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("api", "start", "--enable-basic-auth"), "--enable-basic-auth cannot change a running server")
		apiStart(t, e)
	})

	// sky local: last, since down removes the local clusters.
	add("local up --config", configRefused("local", "up"))
	add("local up --gpus", works([]string{"local", "up", "--gpus"}, "The local infrastructure is enabled"))
	add("local up --no-gpus", refuses([]string{"local", "up", "--no-gpus"}, "--no-gpus", "not available"))
	for _, f := range []string{"--cleanup", "--context-name=x", "--password=x"} {
		name, _, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		add("local up --"+name, refuses([]string{"local", "up", f}, "--"+name, "SSH node pools"))
	}
	for _, f := range []string{"ips", "ssh-user", "ssh-key-path"} {
		add("local up --"+f, refuses([]string{"local", "up", "--" + f, "x"}, "--"+f, "SSH node pools"))
	}
	for _, f := range []string{"--name=x", "--port-start=3000"} {
		name, _, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		add("local up --"+name, refuses([]string{"local", "up", f}, "--"+name, "kind Kubernetes cluster"))
	}
	add("local up --async", works([]string{"local", "up", "--async"}, "Submitted sky.local_up request"))
	add("local up --no-async", works([]string{"local", "up", "--no-async"}, "The local infrastructure is enabled"))
	add("local down --config", configRefused("local", "down"))
	add("local down --name", refuses([]string{"local", "down", "--name", "x"}, "--name", "kind cluster"))
	add("local down --no-async", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("local", "down", "--no-async"), "Terminating cluster fw")
		e.waitStatus(t, "fw", "", 10*time.Second)
		wantWorks(t, e.sky("local", "up"))
	})
	add("local down --async", works([]string{"local", "down", "--async"}, "Submitted sky.local_down request"))
	// sky api login: last, since a login points this HOME at the
	// endpoint. This server needs no credentials, so every flag must
	// log in; how they behave against a server that needs a token is
	// internal/e2e's TestAPILoginFlags.
	add("api login --endpoint", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("api", "login", "-e", "not-a-url"), "not-a-url")
		wantWorks(t, e.sky("api", "login", "-e", e.url()), "Logged into SkyPilot API server at: "+e.url())
	})
	add("api login --token", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("api", "login", "-e", "http://127.0.0.1:1", "--token", "not-a-token"), "--token")
		wantWorks(t, e.sky("api", "login", "-e", e.url(), "--token", "sky_flagwalk"), "Logged into")
	})
	for _, f := range [][]string{{"--service-account-token", "sky_flagwalk"}, {"--relogin"}, {"--no-browser"}} {
		add("api login "+f[0], func(t *testing.T, e *flagEnv) {
			wantWorks(t, e.sky(append([]string{"api", "login", "-e", e.url()}, f...)...), "Logged into")
		})
	}
	return cs
}
