package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// RankSpec is one process of a job on one node: what `exec-rank` reads on
// stdin, and what the head daemon starts in-process for its own rank.
type RankSpec struct {
	JobID int    `json:"job_id"`
	Rank  int    `json:"rank"`
	Phase string `json:"phase"` // "setup" or "run"
	// Script is the user's command; it runs inside jobScript, which
	// exports Env. Unset names are removed from the node's environment
	// before bash starts.
	Script string            `json:"script"`
	Env    map[string]string `json:"env"`
	Unset  []string          `json:"unset,omitempty"`
}

// rankProc is a started rank process. Its stdout and stderr share one
// pipe so the log keeps their interleaving.
type rankProc struct {
	cmd    *exec.Cmd
	out    *os.File
	home   string
	spec   RankSpec
	script string
}

// startRank starts spec's script on this node (HOME=home) as
// `/bin/bash -i <file>` in a session of its own, and records its pid
// file. The new session leaves bash no terminal to take over (a rank
// started from a shell would otherwise fight it for the terminal) and
// makes the rank a process group that killRank ends as one.
func startRank(home string, spec RankSpec) (*rankProc, error) {
	p := paths{home}
	if err := os.MkdirAll(filepath.Dir(p.rankPid(spec.JobID, spec.Rank)), 0o700); err != nil {
		return nil, err
	}
	script, err := writeJobScript(p, spec)
	if err != nil {
		return nil, fmt.Errorf("writing the script of job %d: %w", spec.JobID, err)
	}
	cmd := rankCommand(home, script)
	cmd.Dir = home
	base, devices, _ := rankBase(home, os.Environ())
	if devs, ok := spec.Env["CUDA_VISIBLE_DEVICES"]; ok && devices != nil {
		spec.Env["CUDA_VISIBLE_DEVICES"] = devices(devs)
	}
	cmd.Env = rankEnv(base, spec, rankTag(home, spec.JobID, spec.Rank))
	r, w, err := os.Pipe()
	if err != nil {
		_ = os.Remove(script)
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	// In this process's network namespace, which is the node's.
	err = proc.StartNode(cmd, home, "")
	w.Close()
	if err != nil {
		r.Close()
		_ = os.Remove(script)
		return nil, fmt.Errorf("starting rank %d of job %d: %w", spec.Rank, spec.JobID, err)
	}
	_ = os.WriteFile(p.rankPid(spec.JobID, spec.Rank), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	return &rankProc{cmd: cmd, out: r, home: home, spec: spec, script: script}, nil
}

// rankCommand is `/bin/bash -i script` in a session of its own, inside
// the node's sandbox on a local node (see nodeCommand).
func rankCommand(home, script string) *exec.Cmd {
	return nodeCommand(home, []string{"/bin/bash", "-i", script})
}

// nodeCommand is argv in a session of its own, inside the node's sandbox
// on a local node (proc.SandboxCommand) when the machine allows one;
// `sky check` says when it does not. Ranks and SSH sessions both start
// this way, so a shell sees what a job sees.
func nodeCommand(home string, argv []string) *exec.Cmd {
	if os.Getenv(proc.EnvNode) != "" && proc.HiddenDir(home) != "" {
		if exe, err := os.Executable(); err == nil && proc.SandboxAvailable() == nil {
			return proc.SandboxCommand(exe, home, argv)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// rankEnv is the environment bash starts with: the node's, without the
// names the spec unsets, plus the job's variables and the rank's tag.
// The script exports the variables again after ~/.bashrc, so the task's
// values win over the user's rc file; having them from the start as well
// puts them in every process of the job, the shell included, which is how
// a job's processes are found by its variables.
func rankEnv(base []string, spec RankSpec, tag string) []string {
	drop := map[string]bool{envRankTag: true, "PWD": true, "OLDPWD": true}
	for k := range spec.Env {
		drop[k] = true
	}
	for _, k := range spec.Unset {
		drop[k] = true
	}
	env := make([]string, 0, len(base)+len(spec.Env)+1)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	return append(env, tag)
}

func (rp *rankProc) pid() int { return rp.cmd.Process.Pid }

// wait copies the output to w until the process ends and returns its exit
// code (128+signal when killed). Background children that keep the pipe
// open get a short grace to flush, then are no longer read.
func (rp *rankProc) wait(w io.Writer) int {
	copied := make(chan struct{})
	filter := &outputFilter{w: w}
	go func() {
		_, _ = io.Copy(filter, rp.out)
		_ = filter.flush()
		close(copied)
	}()
	err := rp.cmd.Wait()
	select {
	case <-copied:
	case <-time.After(300 * time.Millisecond):
		rp.out.Close()
		<-copied
	}
	rp.out.Close()
	_ = os.Remove(rp.script)
	_ = os.Remove(paths{rp.home}.rankPid(rp.spec.JobID, rp.spec.Rank))
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return proc.ExitCode(exitErr.ProcessState)
	}
	if err != nil {
		return 1
	}
	return 0
}

// killRank kills every process of one rank on this node: the process
// group from the pid file (only if its leader still carries the rank's
// tag, so a reused pid is never hit) and then every process with the tag,
// until none is left. It first leaves a marker so that an exec-rank that
// has not started its process yet kills it as soon as it does.
func killRank(home string, job, rank int) error {
	p := paths{home}
	pidPath := p.rankPid(job, rank)
	_ = os.MkdirAll(filepath.Dir(pidPath), 0o700)
	_ = os.WriteFile(killedMarker(pidPath), nil, 0o600)
	tag := rankTag(home, job, rank)
	if b, err := os.ReadFile(pidPath); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 && proc.HasEnv(pid, tag) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := proc.ProcsWithEnv(tag)
		if len(pids) == 0 {
			removeJobScripts(p, job, rank)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d of job %d: processes %v survive SIGKILL", rank, job, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func killedMarker(pidPath string) string { return strings.TrimSuffix(pidPath, ".pid") + ".killed" }

// pidHeader is the first line exec-rank prints, so the head learns the
// remote pid for its log prefixes.
const pidHeader = "skygo-rank-pid "

// execRank is `sky agent exec-rank`: run one rank on this node, print
// the pid header then the output, exit with the script's code.
func execRank(stdin io.Reader, stdout io.Writer) int {
	home, err := homeDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var spec RankSpec
	if err := decodeJSON(stdin, &spec); err != nil {
		fmt.Fprintf(os.Stderr, "exec-rank: reading rank spec on stdin: %v\n", err)
		return 2
	}
	// The rank inherits the open-files limit a SkyPilot job expects.
	proc.RaiseOpenFiles()
	// Signals to exec-rank (a dropped SSH session, a cancelled runner) end
	// the rank's whole process group instead of orphaning it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	rp, err := startRank(home, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pidPath := paths{home}.rankPid(spec.JobID, spec.Rank)
	if _, err := os.Stat(killedMarker(pidPath)); err == nil {
		_ = syscall.Kill(-rp.pid(), syscall.SIGKILL)
	}
	go func() {
		<-sigs
		_ = syscall.Kill(-rp.pid(), syscall.SIGKILL)
	}()
	fmt.Fprintf(stdout, "%s%d\n", pidHeader, rp.pid())
	return rp.wait(stdout)
}

// NodeRunner is how the head daemon runs commands on another node; every
// provision.CommandRunner is one.
type NodeRunner interface {
	Run(ctx context.Context, cmd string, opts provision.RunOptions) (provision.Result, error)
}

// Transports maps Node.Transport to a constructor; "ssh" registers itself
// in transport_ssh.go, an infrastructure's own transport from its node
// package (internal/infra/<name>/node, linked by internal/agent/all).
var Transports = map[string]func(agentapi.Node) (NodeRunner, error){
	"local": func(n agentapi.Node) (NodeRunner, error) {
		return proc.NewRunner(n.Home, n.IP).InNetNS(proc.NetNSPath(n.NetNS)), nil
	},
}

// A RankBase adapts the base environment of ranks and SSH sessions on the
// nodes of an infrastructure that starts the agent inside a unit of its
// own (a batch system's job step): on such a node it returns the
// environment to start from, and devices, when not nil, maps the GPU
// indexes the head chose for a rank (0..n-1 of the node's) to the ones
// the rank must see. Elsewhere it returns env and false.
type RankBase func(home string, env []string) (base []string, devices func(chosen string) string, ok bool)

// RankBases are the infrastructures' RankBase hooks, registered from
// their node packages' init; the first that recognises the node applies.
var RankBases []RankBase

// rankBase is the base environment of a rank on the node at home.
func rankBase(home string, env []string) ([]string, func(string) string, bool) {
	for _, b := range RankBases {
		if base, devices, ok := b(home, env); ok {
			return base, devices, true
		}
	}
	return env, nil, false
}

func newNodeRunner(n agentapi.Node) (NodeRunner, error) {
	t := n.Transport
	if t == "" {
		t = "local"
	}
	mk, ok := Transports[t]
	if !ok {
		known := make([]string, 0, len(Transports))
		for k := range Transports {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("node %s: transport %q is not supported by this agent (known: %s)", n.IP, t, strings.Join(known, ", "))
	}
	return mk(n)
}

// skyPath is the node runtime to run on node n.
func skyPath(n agentapi.Node) string {
	if n.Sky != "" {
		return n.Sky
	}
	exe, err := os.Executable()
	if err != nil {
		return "sky"
	}
	return exe
}
