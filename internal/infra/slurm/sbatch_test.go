package slurm

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

var scripts = map[string]Script{
	// What a 2-node fake:2 cluster on the test cluster's gpu partition gets.
	"testcluster-gpu": {
		JobName: "sky-3f2a-alice", Partition: "gpu", Base: "/home/alice", RuntimeDir: "/tmp/sky-3f2a-alice", Sky: "/home/alice/.sky/bin/sky-node",
		NumNodes: 2, CPUsPerTask: 2, MemMB: 2048, Gres: "gpu:fake:2",
	},
	// CPU-only, no memory (CR_CPU cluster), partition MaxTime as --time.
	"cpu-nomem": {
		JobName: "train-cpu", Partition: "cpu", Base: "/shared/users/bob", RuntimeDir: "/scratch/local/train-cpu", Sky: "/shared/users/bob/.sky/bin/sky-node",
		NumNodes: 1, CPUsPerTask: 8, Time: "7-12:30:00",
	},
	// User options: sorted, bare flags, short options, quoting, and the
	// user's time in --time's place.
	"user-options": {
		JobName: "h100-job", Partition: "h100", Base: "/lustre/team x", RuntimeDir: "/tmp/h100-job", Sky: "/lustre/team x/.sky/bin/sky-node",
		NumNodes: 4, CPUsPerTask: 32, MemMB: 262144, Gres: "gpu:nvidia_h100_80gb_hbm3:8", Time: "2-00:00:00",
		Options: map[string]string{
			"account":   "ai-research",
			"exclusive": "",
			"comment":   `run "7" # main`,
			"time":      "1-00:00:00",
			"A":         "other acct",
			"mail-type": "END,FAIL",
		},
	},
}

func TestRenderGolden(t *testing.T) {
	for name, s := range scripts {
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := s.Render()
		path := filepath.Join("testdata", "golden", name+".sh")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run go test -run TestRenderGolden -update)", name, err)
		}
		if got != string(want) {
			t.Errorf("%s: script differs from %s; got:\n%s", name, path, got)
		}
	}
}

func TestRenderDirectiveOrder(t *testing.T) {
	got := scripts["user-options"].Render()
	var dirs []string
	for _, line := range strings.Split(got, "\n") {
		if d, ok := strings.CutPrefix(line, "#SBATCH "); ok {
			dirs = append(dirs, d)
		}
	}
	want := []string{
		"--job-name=h100-job",
		`--output="/lustre/team x/.sky_provision/slurm-%j.out"`,
		`--error="/lustre/team x/.sky_provision/slurm-%j.out"`,
		"--nodes=4",
		"--wait-all-nodes=1",
		"--no-requeue",
		"--cpus-per-task=32",
		"--mem=262144M",
		"--gres=gpu:nvidia_h100_80gb_hbm3:8",
		"--time=1-00:00:00",
		`-A "other acct"`,
		"--account=ai-research",
		`--comment="run \"7\" # main"`,
		"--exclusive",
		"--mail-type=END,FAIL",
	}
	if strings.Join(dirs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("directives\n got %q\nwant %q", dirs, want)
	}
	if d := scripts["cpu-nomem"].Render(); strings.Contains(d, "--mem") || strings.Contains(d, "--gres") || !strings.Contains(d, "#SBATCH --time=7-12:30:00\n") {
		t.Fatalf("cpu-nomem:\n%s", d)
	}
	if d := (Script{JobName: "j", Partition: "p", Base: "/b", RuntimeDir: "/tmp/j", NumNodes: 1, CPUsPerTask: 1}).Render(); strings.Contains(d, "--time") {
		t.Fatalf("no time: %s", d)
	}
}

func TestRenderBashSyntax(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for name, s := range scripts {
		f := filepath.Join(t.TempDir(), "s.sh")
		if err := os.WriteFile(f, []byte(s.Render()), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("bash", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s: bash -n: %v\n%s", name, err, out)
		}
	}
}

func TestScriptPaths(t *testing.T) {
	s := scripts["testcluster-gpu"]
	if s.ClusterHome() != "/home/alice/.sky_clusters/sky-3f2a-alice" ||
		s.ReadyFile() != "/home/alice/.sky_clusters/sky-3f2a-alice/.sky_sbatch_ready" ||
		s.ScriptPath() != "/home/alice/.sky_provision/sky-3f2a-alice.sh" ||
		s.LogPath("17") != "/home/alice/.sky_provision/slurm-17.out" ||
		s.SubmitCommand() != "sbatch --partition=gpu /home/alice/.sky_provision/sky-3f2a-alice.sh" {
		t.Fatalf("%s %s %s %s %s", s.ClusterHome(), s.ReadyFile(), s.ScriptPath(), s.LogPath("17"), s.SubmitCommand())
	}
	if NodeRuntimeDir("", "c1") != "/tmp/c1" || NodeRuntimeDir("/scratch/", "c1") != "/scratch/c1" {
		t.Fatal(NodeRuntimeDir("", "c1"), NodeRuntimeDir("/scratch/", "c1"))
	}
}

func TestScriptValidate(t *testing.T) {
	ok := scripts["testcluster-gpu"]
	bad := map[string]func(*Script){
		"job name":   func(s *Script) { s.JobName = "a b" },
		"long name":  func(s *Script) { s.JobName = strings.Repeat("a", 121) },
		"partition":  func(s *Script) { s.Partition = "" },
		"base":       func(s *Script) { s.Base = "home/alice" },
		"runtime":    func(s *Script) { s.RuntimeDir = "~/x" },
		"shared tmp": func(s *Script) { s.RuntimeDir = "/tmp" },
		"root":       func(s *Script) { s.RuntimeDir = "/" },
		"nodes":      func(s *Script) { s.NumNodes = 0 },
		"cpus":       func(s *Script) { s.CPUsPerTask = 0 },
		"newline":    func(s *Script) { s.Options = map[string]string{"comment": "a\nb"} },
		"option key": func(s *Script) { s.Options = map[string]string{"a b": "x"} },
	}
	for name, mut := range bad {
		s := ok
		mut(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	s := ok
	s.JobName = strings.Repeat("a", 120)
	s.RuntimeDir = NodeRuntimeDir("", s.JobName)
	if err := s.Validate(); err != nil {
		t.Errorf("120 chars: %v", err)
	}
}

func TestTimes(t *testing.T) {
	valid := []string{"60", "30:00", "4:00:00", "1-12", "1-12:30", "7-00:00:00", "0"}
	invalid := []string{"", "2h", "1:2:3:4", "1-", "-1", "1-2-3", "a", "1:", " 60", "UNLIMITED", "1-2:3:4:5"}
	for _, v := range valid {
		if !ValidTime(v) {
			t.Errorf("%q should be valid", v)
		}
	}
	for _, v := range invalid {
		if ValidTime(v) {
			t.Errorf("%q should be invalid", v)
		}
	}
	format := map[string]string{
		"UNLIMITED": "", "INFINITE": "", "NONE": "", "": "",
		"1-00:00:00": "1-00:00:00", "04:00:00": "0-04:00:00", "30:00": "0-00:30:00",
		"90": "0-01:30:00", "2-12": "2-12:00:00", "2-12:30": "2-12:30:00", "36:00:00": "1-12:00:00",
		"7-12:30:00": "7-12:30:00",
	}
	for in, want := range format {
		if got, err := FormatTime(in); err != nil || got != want {
			t.Errorf("FormatTime(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := FormatTime("soon"); err == nil {
		t.Error("FormatTime(soon) should fail")
	}
}

func TestPartitionTime(t *testing.T) {
	parts, err := ParsePartitions(fixture(t, "partitions-mixed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Partition{}
	for _, p := range parts {
		by[p.Name] = p
	}
	check := func(p, wantT, wantWarn string) {
		t.Helper()
		got, warn := PartitionTime(by[p])
		if got != wantT || warn != wantWarn {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", p, got, warn, wantT, wantWarn)
		}
	}
	check("gpu", "2-00:00:00", "")
	check("inference", "0-00:30:00", "")
	check("long", "", "") // UNLIMITED, DefaultTime applies
	check("legacy", "", "Partition 'legacy' has no time limit (MaxTime UNLIMITED, no DefaultTime); submitting without --time, so the cluster's default applies. Set slurm sbatch_options.time to choose one.")

	real, _ := ParsePartitions(fixture(t, "partitions-testcluster.txt"))
	if got, warn := PartitionTime(real[0]); got != "" || !strings.HasPrefix(warn, "Partition 'cpu' has no time limit") {
		t.Errorf("test cluster: %q %q", got, warn)
	}
}

func TestParseJobID(t *testing.T) {
	for out, want := range map[string]string{
		"Submitted batch job 42\n":                    "42",
		"sbatch: warning: x\nSubmitted batch job 7\n": "7",
		"1234\n":           "1234",
		"1234;mycluster\n": "1234",
	} {
		if got, err := ParseJobID(out); err != nil || got != want {
			t.Errorf("ParseJobID(%q) = %q, %v", out, got, err)
		}
	}
	if _, err := ParseJobID("sbatch: error: Batch job submission failed: Invalid partition name specified\n"); err == nil ||
		!strings.Contains(err.Error(), "Invalid partition name") {
		t.Errorf("want the output in the error, got %v", err)
	}
}

// TestScriptRuns runs the rendered script with stand-ins for srun and
// scontrol (srun runs its bash -c script once, here; the allocation is one
// node): it prepares the directories and markers, writes the ready file
// with the job id, holds, and on SIGTERM (scancel --signal TERM) stops the
// agent and removes both directories.
func TestScriptRuns(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	srunLog := filepath.Join(dir, "srun.log")
	writeExe(t, filepath.Join(bin, "srun"), `#!/bin/bash
echo "$*" >> `+srunLog+`
for last; do :; done
exec bash -c "$last"
`)
	writeExe(t, filepath.Join(bin, "scontrol"), "#!/bin/bash\necho 'ProctrackType           = proctrack/linuxproc'\n")

	s := Script{JobName: "sky-test", Partition: "cpu", Base: filepath.Join(dir, "shared"), RuntimeDir: filepath.Join(dir, "node", "sky-test"),
		NumNodes: 1, CPUsPerTask: 1}
	// A stale runtime dir from an earlier allocation must not survive.
	if err := os.MkdirAll(filepath.Join(s.RuntimeDir, ".sky", "agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExe(t, filepath.Join(s.RuntimeDir, ".sky", "agent", "jobs.db"), "stale")
	if err := os.MkdirAll(s.ClusterHome(), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExe(t, s.ReadyFile(), "1\n") // a previous allocation's ready file

	script := filepath.Join(dir, "job.sh")
	writeExe(t, script, s.Render())
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SLURM_JOB_ID=4242", "SLURM_JOB_NUM_NODES=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()

	var b []byte
	if !testutil.WaitFor(10*time.Second, 20*time.Millisecond, func() bool { b, _ = os.ReadFile(s.ReadyFile()); return string(b) == "4242\n" }) {
		t.Fatalf("no ready file with the job id (have %q)", b)
	}
	for _, p := range []string{"sky_logs", "sky_workdir", ".sky", ".sky_slurm_cluster", ".hushlogin"} {
		for _, root := range []string{s.ClusterHome(), s.RuntimeDir} {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("missing %s", filepath.Join(root, p))
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(s.RuntimeDir, ".sky_proctrack_type")); string(b) != "proctrack/linuxproc\n" {
		t.Errorf("proctrack file %q", b)
	}
	if _, err := os.Stat(filepath.Join(s.RuntimeDir, ".sky", "agent", "jobs.db")); err == nil {
		t.Error("stale agent state survived")
	}
	srunArgs, _ := os.ReadFile(srunLog)
	if !strings.HasPrefix(string(srunArgs), "--overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --export=ALL ") {
		t.Errorf("srun args %q", srunArgs)
	}

	// An "agent" whose pid file the cleanup finds, and a rank process group.
	agent := exec.Command("sleep", "300")
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = agent.Process.Kill() }()
	rank := exec.Command("sleep", "300")
	rank.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := rank.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rank.Process.Kill() }()
	agentDir := filepath.Join(s.RuntimeDir, ".sky", "agent")
	if err := os.MkdirAll(filepath.Join(agentDir, "ranks"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExe(t, filepath.Join(agentDir, "daemon.pid"), strconv.Itoa(agent.Process.Pid))
	writeExe(t, filepath.Join(agentDir, "ranks", "1-0.pid"), strconv.Itoa(rank.Process.Pid))

	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("script exit after TERM: %v (want 0)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("script did not exit on SIGTERM")
	}
	for _, p := range []string{s.RuntimeDir, s.ClusterHome()} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s not removed (%v)", p, err)
		}
	}
	for name, c := range map[string]*exec.Cmd{"agent": agent, "rank": rank} {
		werr := make(chan error, 1)
		go func() { werr <- c.Wait() }()
		select {
		case <-werr:
		case <-time.After(5 * time.Second):
			t.Errorf("%s process not signalled", name)
		}
	}
}

func writeExe(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestScriptSupervisesAgent: once the agent's config is there, the batch
// script starts the head's daemon (here a stand-in sky that records its
// pid as the real daemon does) in its own step, and starts it again when
// it dies; the daemon gets the node's runtime dir as HOME. (The stand-in
// writes HOME before its pid, so the pid's appearance means both are there.)
func TestScriptSupervisesAgent(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	writeExe(t, filepath.Join(bin, "srun"), "#!/bin/bash\nfor last; do :; done\nexec bash -c \"$last\"\n")
	writeExe(t, filepath.Join(bin, "scontrol"), "#!/bin/bash\necho 'ProctrackType = proctrack/cgroup'\n")
	sky := filepath.Join(dir, "shared", ".sky", "bin", "sky")
	if err := os.MkdirAll(filepath.Dir(sky), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExe(t, sky, "#!/bin/bash\n[ \"$1 $2\" = \"agent daemon\" ] || exit 2\necho \"$HOME\" > \"$HOME/.sky/agent/home\"\necho $$ > \"$HOME/.sky/agent/daemon.pid\"\nexec sleep 300\n")
	s := Script{JobName: "sup", Partition: "cpu", Base: filepath.Join(dir, "shared"), RuntimeDir: filepath.Join(dir, "node", "sup"),
		NumNodes: 1, CPUsPerTask: 1, Sky: sky}
	script := filepath.Join(dir, "job.sh")
	writeExe(t, script, s.Render())
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SLURM_JOB_ID=7", "SLURM_JOB_NUM_NODES=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	agentDir := filepath.Join(s.RuntimeDir, ".sky", "agent")
	daemonPid := func(not int) int {
		t.Helper()
		pid := 0
		if !testutil.WaitFor(10*time.Second, 50*time.Millisecond, func() bool {
			b, _ := os.ReadFile(filepath.Join(agentDir, "daemon.pid"))
			p, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil && p != not && syscall.Kill(p, 0) == nil {
				pid = p
			}
			return pid != 0
		}) {
			t.Fatal("the script did not start the agent daemon")
		}
		return pid
	}
	if !testutil.WaitFor(10*time.Second, 20*time.Millisecond, func() bool {
		_, err := os.Stat(filepath.Join(agentDir, "supervised"))
		return err == nil
	}) {
		t.Fatal("the script never marked the node supervised")
	}
	if _, err := os.Stat(filepath.Join(agentDir, "daemon.pid")); err == nil {
		t.Fatal("a daemon started before the agent had a config")
	}
	writeExe(t, filepath.Join(agentDir, "config.json"), "{}")
	first := daemonPid(0)
	if b, _ := os.ReadFile(filepath.Join(agentDir, "home")); strings.TrimSpace(string(b)) != s.RuntimeDir {
		t.Errorf("daemon HOME %q, want %s", b, s.RuntimeDir)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := daemonPid(first)
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("script did not exit on SIGTERM")
	}
	if !testutil.WaitFor(10*time.Second, 50*time.Millisecond, func() bool { return syscall.Kill(second, 0) != nil }) {
		t.Error("the supervised daemon survived the allocation's end")
	}
}
