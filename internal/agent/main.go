package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/proc"
)

// Main runs `sky agent <verb> [flags]` and returns the exit code. It uses
// the standard flag package rather than cobra so that the hot verbs
// (submit, exec-rank) start with no work beyond parsing.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return mainAt(ctx, "", args, stdin, stdout, stderr)
}

// InProcess says whether verb can run inside another process of this
// machine through MainAt: the short verbs that only read the node's job
// table or talk to its daemon's socket (not start, daemon, exec-rank or
// logs, which need the node's own environment or stream).
func InProcess(verb string) bool {
	switch verb {
	case "ping", "submit", "queue", "status", "cancel", "set-autostop":
		return true
	}
	return false
}

// MainAt runs an InProcess verb for the node whose HOME is home, in this
// process: what `HOME=home sky agent <verb>` would print and exit with,
// without starting a shell and a sky process. The API server uses it for
// nodes on its own machine.
func MainAt(ctx context.Context, home string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if home == "" || len(args) == 0 || !InProcess(args[0]) {
		writeJSON(stdout, agentapi.Failure{Error: fmt.Sprintf("agent verb %v cannot run in-process", args), Code: "bad_request"})
		return 2
	}
	return mainAt(ctx, home, args, stdin, stdout, stderr)
}

// mainAt is Main for the node whose HOME is home ("": this process's HOME).
func mainAt(ctx context.Context, home string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "exec-rank":
		return execRank(stdin, stdout)
	case proc.SandboxVerb:
		return proc.SandboxMain(rest)
	case proc.PIDInitVerb:
		return proc.PIDInitMain()
	case "daemon":
		if err := runDaemon(); err != nil {
			fmt.Fprintf(stderr, "agent daemon: %v\n", err)
			return 1
		}
		return 0
	case "logs":
		return logsVerb(ctx, rest, stdout, stderr)
	case "ssh-stdio":
		return sshStdio(home, rest, stdin, stdout, stderr)
	case "ssh-serve":
		return sshServe(ctx, home, rest, stdout, stderr)
	}
	fs := flag.NewFlagSet("sky agent "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool("json", true, "print JSON (always on; accepted for symmetry)")
	var run func() (any, error)
	switch verb {
	case "ping":
		run = func() (any, error) { return map[string]any{"ok": true}, nil }
	case "start":
		onAutostop := fs.String("on-autostop", "", "command the head runs when autostop fires")
		run = func() (any, error) { return startVerb(stdin, fs, *onAutostop) }
	case "stop-daemon":
		run = func() (any, error) { return stopDaemonVerb() }
	case "submit":
		run = func() (any, error) {
			var spec agentapi.JobSpec
			if err := decodeJSON(stdin, &spec); err != nil {
				return nil, &codedError{"bad_request", "reading job spec on stdin: " + err.Error()}
			}
			return call(ctx, home, "submit", spec)
		}
	case "queue":
		skip := fs.Bool("skip-finished", false, "only unfinished jobs")
		userHash := fs.String("user-hash", "", "only this user's jobs")
		run = func() (any, error) { return queueVerb(ctx, home, *skip, *userHash) }
	case "status":
		// The server's liveness check asks every few seconds; a cluster's
		// job table can be long, and only the daemon's health is wanted.
		daemonOnly := fs.Bool("daemon-only", false, "only the daemon's health, no jobs")
		run = func() (any, error) { return statusVerb(ctx, home, fs.Args(), *daemonOnly) }
	case "cancel":
		all := fs.Bool("all", false, "cancel every unfinished job")
		userHash := fs.String("user-hash", "", "only this user's jobs")
		run = func() (any, error) {
			ids, err := parseIDs(fs.Args())
			if err != nil {
				return nil, err
			}
			return call(ctx, home, "cancel", cancelRequest{JobIDs: ids, All: *all, UserHash: *userHash})
		}
	case "set-autostop":
		var a agentapi.AutostopConfig
		fs.IntVar(&a.IdleMinutes, "idle-minutes", 5, "idle minutes before autostop; -1 cancels")
		fs.IntVar(&a.IdleSeconds, "idle-seconds", 0, "idle seconds (overrides --idle-minutes)")
		fs.BoolVar(&a.Down, "down", false, "tear down instead of stopping")
		fs.StringVar(&a.WaitFor, "wait-for", agentapi.WaitJobsAndSSH, "jobs_and_ssh | jobs | none")
		fs.StringVar(&a.Hook, "hook", "", "command to run before stopping")
		fs.IntVar(&a.HookTimeout, "hook-timeout", 3600, "seconds the hook may run")
		cancel := fs.Bool("cancel", false, "disable autostop")
		run = func() (any, error) {
			if *cancel {
				a.IdleMinutes, a.IdleSeconds = -1, 0
			}
			return call(ctx, home, "set-autostop", a)
		}
	case "kill-rank":
		job := fs.Int("job", 0, "job id")
		rank := fs.Int("rank", -1, "rank; -1 for every rank of the job on this node")
		run = func() (any, error) { return killRankVerb(*job, *rank) }
	default:
		writeJSON(stdout, agentapi.Failure{Error: fmt.Sprintf("unknown agent verb %q; run `sky agent help`", verb), Code: "bad_request"})
		return 2
	}
	if err := fs.Parse(rest); err != nil {
		writeJSON(stdout, agentapi.Failure{Error: err.Error(), Code: "bad_request"})
		return 2
	}
	out, err := run()
	if err != nil {
		code := "internal"
		var ce *codedError
		if errors.As(err, &ce) {
			code = ce.code
		}
		writeJSON(stdout, agentapi.Failure{Error: err.Error(), Code: code})
		return 1
	}
	writeJSON(stdout, out)
	return 0
}

const usage = `usage: sky agent <verb> [flags]   (internal; run on cluster nodes)
verbs: start, stop-daemon, submit, queue, status, cancel, logs, set-autostop,
       exec-rank, kill-rank, ping, ssh-stdio, ssh-serve, sandbox-exec, pid-init`

func writeJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(agentapi.Failure{Error: err.Error(), Code: "internal"})
	}
	_, _ = w.Write(append(b, '\n'))
}

func decodeJSON(r io.Reader, v any) error {
	if r == nil {
		return errors.New("no input")
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func parseIDs(args []string) ([]int, error) {
	var ids []int
	for _, a := range args {
		for _, part := range strings.Split(a, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || id <= 0 {
				return nil, &codedError{"bad_request", fmt.Sprintf("job id %q is not a positive integer", part)}
			}
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// call sends one request to this node's daemon and decodes its result.
func call(ctx context.Context, home, verb string, body any) (json.RawMessage, error) {
	home, err := homeOr(home)
	if err != nil {
		return nil, err
	}
	p := paths{home}
	// A daemon that is stopped accepts the call and never answers: an
	// in-process caller's deadline (the server's, for a node on its own
	// machine) bounds the wait.
	timeout := 30 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), time.Millisecond))
	}
	res, err := callAt(p, verb, body, timeout)
	var ce *codedError
	if err != nil && errors.As(err, &ce) && strings.HasPrefix(ce.msg, notRunning) {
		// On a supervised node the daemon comes back by itself within a
		// second or two of dying: wait for it rather than fail the call.
		// Only a call that never reached a daemon is sent again.
		if _, serr := os.Stat(p.supervised()); serr == nil {
			for deadline := time.Now().Add(supervisedRestartWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if res, err = callAt(p, verb, body, timeout); err == nil || !errors.As(err, &ce) || !strings.HasPrefix(ce.msg, notRunning) {
					break
				}
			}
		}
	}
	return res, err
}

// notRunning starts the error of a call that found no daemon to dial.
const notRunning = "the agent daemon on this node is not running"

// supervisedRestartWait bounds how long a call waits for a supervised
// node's daemon to be started again (the supervisor looks every 0.2 s and
// gives a new daemon a second to take its lock).
const supervisedRestartWait = 5 * time.Second

func callAt(p paths, verb string, body any, timeout time.Duration) (json.RawMessage, error) {
	conn, err := net.DialTimeout("unix", p.socket(), 2*time.Second)
	if err != nil {
		return nil, &codedError{"agent_not_running", fmt.Sprintf("%s (%v); run `sky agent start`", notRunning, err)}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	raw, _ := json.Marshal(body)
	if err := json.NewEncoder(conn).Encode(request{Verb: verb, Body: raw}); err != nil {
		return nil, &codedError{"agent_not_running", "talking to the agent daemon: " + err.Error()}
	}
	var resp response
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&resp); err != nil {
		return nil, &codedError{"agent_not_running", "reading the agent daemon's answer: " + err.Error()}
	}
	if resp.Error != "" {
		return nil, &codedError{resp.Code, resp.Error}
	}
	return resp.Result, nil
}

// SubmitAt submits a job to the daemon of the node whose HOME is home,
// from the same machine (what `sky agent submit` does after reading stdin).
func SubmitAt(home string, spec agentapi.JobSpec) (int, error) {
	res, err := callAt(paths{home}, "submit", spec, time.Minute)
	if err != nil {
		return 0, err
	}
	var out agentapi.SubmitResult
	err = json.Unmarshal(res, &out)
	return out.JobID, err
}

// ---- start / stop ----

type startResult struct {
	Started bool   `json:"started"`
	Role    string `json:"role"`
	Pid     int    `json:"pid,omitempty"`
}

// startVerb records the config (from stdin, when given) and makes sure
// the head's daemon runs. It is idempotent: a live daemon is left alone.
func startVerb(stdin io.Reader, fs *flag.FlagSet, onAutostop string) (any, error) {
	home, err := homeDir()
	if err != nil {
		return nil, err
	}
	p := paths{home}
	if err := os.MkdirAll(p.dir(), 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(p.startLock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	var cfg *agentapi.Config
	if in, err := readStdinIfAny(stdin); err != nil {
		return nil, err
	} else if len(strings.TrimSpace(string(in))) > 0 {
		cfg = &agentapi.Config{}
		dec := json.NewDecoder(strings.NewReader(string(in)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cfg); err != nil {
			return nil, &codedError{"bad_request", "reading agent config on stdin: " + err.Error()}
		}
	} else if cfg, err = loadConfig(p); err != nil {
		return nil, &codedError{"bad_request", err.Error()}
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "on-autostop" {
			cfg.OnAutostop = onAutostop
		}
	})
	if err := cfg.Validate(); err != nil {
		return nil, &codedError{"bad_request", err.Error()}
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := writeFileAtomic(p.config(), b, 0o600); err != nil {
		return nil, err
	}
	if cfg.NodeIndex != 0 {
		// Workers run no daemon: the head starts their ranks itself.
		return startResult{Role: "worker"}, nil
	}
	if res, err := callAt(p, "ping", nil, 2*time.Second); err == nil {
		var ping struct{ Pid int }
		_ = json.Unmarshal(res, &ping)
		return startResult{Role: "head", Pid: ping.Pid}, nil
	}
	if _, err := os.Stat(p.supervised()); err == nil {
		pid, err := awaitSupervised(p)
		if err != nil {
			return nil, err
		}
		return startResult{Started: true, Role: "head", Pid: pid}, nil
	}
	pid, err := spawnDaemon(p)
	if err != nil {
		return nil, err
	}
	return startResult{Started: true, Role: "head", Pid: pid}, nil
}

// awaitSupervised waits for the daemon that the node's supervisor starts
// once the config is written (a batch system's job script: see
// paths.supervised), and returns its pid.
func awaitSupervised(p paths) (int, error) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := callAt(p, "ping", nil, time.Second); err == nil {
			var ping struct{ Pid int }
			_ = json.Unmarshal(res, &ping)
			return ping.Pid, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("the node's supervisor did not start the agent daemon within 15s (%s is there); see %s:\n%s",
		p.supervised(), p.daemonLog(), lastLines(p.daemonLog(), 10))
}

// readStdinIfAny reads stdin unless it is a terminal or absent.
func readStdinIfAny(stdin io.Reader) ([]byte, error) {
	if stdin == nil {
		return nil, nil
	}
	if f, ok := stdin.(*os.File); ok {
		st, err := f.Stat()
		if err != nil || st.Mode()&os.ModeCharDevice != 0 {
			return nil, nil
		}
	}
	return io.ReadAll(stdin)
}

// spawnDaemon starts `sky agent daemon` in its own session, detached from
// the caller, and waits until it answers on its socket.
func spawnDaemon(p paths) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(p.daemonLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, "agent", "daemon")
	cmd.Dir = p.home
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting agent daemon: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := callAt(p, "ping", nil, time.Second); err == nil {
			return pid, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("agent daemon exited at start (%v); see %s:\n%s", err, p.daemonLog(), lastLines(p.daemonLog(), 10))
		case <-time.After(5 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("agent daemon did not answer within 15s; see %s", p.daemonLog())
}

func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	off, _ := tailOffset(f, n)
	_, _ = f.Seek(off, io.SeekStart)
	b, _ := io.ReadAll(f)
	return string(b)
}

func stopDaemonVerb() (any, error) {
	home, err := homeDir()
	if err != nil {
		return nil, err
	}
	p := paths{home}
	pidBytes, _ := os.ReadFile(p.pidFile())
	if _, err := callAt(p, "stop", nil, 10*time.Second); err != nil {
		return map[string]bool{"stopped": false}, nil
	}
	// Wait for the daemon to let go of its lock, so a following start
	// does not race with the old daemon.
	if pid, err := strconv.Atoi(strings.TrimSpace(string(pidBytes))); err == nil {
		proc.WaitGone(pid, 60*time.Second)
	}
	return map[string]bool{"stopped": true}, nil
}

func killRankVerb(job, rank int) (any, error) {
	if job <= 0 {
		return nil, &codedError{"bad_request", "--job is required"}
	}
	home, err := homeDir()
	if err != nil {
		return nil, err
	}
	if err := killRank(home, job, rank); err != nil {
		return nil, err
	}
	return map[string]any{"killed": true, "job_id": job, "rank": rank}, nil
}

// ---- read-only verbs: straight from the job table ----

func openReadOnly(home string) (*store, paths, error) {
	home, err := homeOr(home)
	if err != nil {
		return nil, paths{}, err
	}
	p := paths{home}
	st, err := openStore(p.db(), true)
	return st, p, err
}

func queueVerb(ctx context.Context, home string, skipFinished bool, userHash string) (any, error) {
	st, _, err := openReadOnly(home)
	if errors.Is(err, errNoTable) {
		return []agentapi.Job{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer st.close()
	var rows []*jobRow
	if skipFinished {
		rows, err = st.list(ctx, false, agentapi.StatusInit, agentapi.StatusPending, agentapi.StatusSettingUp, agentapi.StatusRunning)
	} else {
		rows, err = st.list(ctx, false)
	}
	if err != nil {
		return nil, err
	}
	out := []agentapi.Job{}
	// Newest first, like `sky queue`.
	for i := len(rows) - 1; i >= 0; i-- {
		if userHash == "" || rows[i].UserHash == userHash {
			out = append(out, rows[i].Job)
		}
	}
	return out, nil
}

func statusVerb(ctx context.Context, home string, args []string, daemonOnly bool) (any, error) {
	ids, err := parseIDs(args)
	if err != nil {
		return nil, err
	}
	home, err = homeOr(home)
	if err != nil {
		return nil, err
	}
	p := paths{home}
	rep := agentapi.StatusReport{Jobs: []agentapi.Job{}}
	if res, err := callAt(p, "ping", nil, 2*time.Second); err == nil {
		var ping struct {
			Pid       int     `json:"pid"`
			StartedAt float64 `json:"started_at"`
		}
		_ = json.Unmarshal(res, &ping)
		rep.Daemon = agentapi.DaemonHealth{Alive: true, Pid: ping.Pid, StartedAt: ping.StartedAt}
		if res, err := callAt(p, "autostop-status", nil, 2*time.Second); err == nil {
			var a agentapi.AutostopStatus
			if json.Unmarshal(res, &a) == nil {
				rep.Autostop = &a
			}
		}
	} else {
		rep.Daemon.Error = err.Error()
	}
	if daemonOnly {
		return rep, nil
	}
	st, err := openStore(p.db(), true)
	if errors.Is(err, errNoTable) {
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	defer st.close()
	if len(ids) == 0 {
		rows, err := st.list(ctx, false)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			rep.Jobs = append(rep.Jobs, r.Job)
		}
		return rep, nil
	}
	sort.Ints(ids)
	for _, id := range ids {
		r, err := st.get(ctx, id, false)
		if err != nil {
			return nil, err
		}
		if r != nil {
			rep.Jobs = append(rep.Jobs, r.Job)
		}
	}
	return rep, nil
}

// logsVerb is `sky agent logs [--job N] [--rank R] [--follow] [--tail N]`:
// the job's stream as SkyPilot's `sky logs` prints it (streamJob), or the
// raw log of one rank or one node's setup; exit code from the job's status
// once it ended (runtime.md), 102 when there is no such job.
func logsVerb(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sky agent logs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	job := fs.Int("job", 0, "job id (default: the latest job)")
	rank := fs.Int("rank", -1, "only this rank's output")
	follow := fs.Bool("follow", false, "keep printing until the job ends")
	tail := fs.Int("tail", 0, "only the last N lines (0: all)")
	setup := fs.Bool("setup", false, "the setup log of node --node")
	node := fs.Int("node", 0, "node index for --setup")
	fs.Bool("json", false, "ignored; logs are text")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	st, _, err := openReadOnly("")
	if errors.Is(err, errNoTable) {
		fmt.Fprintln(stderr, "No job found on this cluster.")
		return agentapi.ExitNotFound
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer st.close()
	var r *jobRow
	if *job > 0 {
		r, err = st.get(ctx, *job, false)
	} else {
		rows, lerr := st.list(ctx, false)
		err = lerr
		if len(rows) > 0 {
			r = rows[len(rows)-1]
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if r == nil {
		if *job > 0 {
			fmt.Fprintf(stderr, "Job %d not found (see `sky queue`).\n", *job)
		} else {
			fmt.Fprintln(stderr, "No job found on this cluster.")
		}
		return agentapi.ExitNotFound
	}
	path := r.LogDir + "/run.log"
	switch {
	case *setup:
		path = r.LogDir + "/" + setupLogName(*node)
	case *rank >= 0:
		if *rank >= r.NumNodes {
			fmt.Fprintf(stderr, "Job %d has ranks 0..%d, not %d.\n", r.JobID, r.NumNodes-1, *rank)
			return 2
		}
		n := *rank
		if *rank < len(r.Nodes) {
			n = r.Nodes[*rank]
		}
		path = r.LogDir + "/tasks/" + rankFileName(r.NumNodes, *rank, n)
	}
	if !*setup && *rank < 0 {
		load := func() (*jobRow, error) {
			cur, err := st.get(ctx, r.JobID, false)
			if cur != nil {
				r = cur
			}
			return r, err
		}
		status, err := streamJob(ctx, stdout, path, *tail, *follow, load)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if !*follow && !status.Terminal() {
			return 0
		}
		return status.ExitCode()
	}
	status := r.Status
	done := func() bool {
		cur, err := st.get(ctx, r.JobID, false)
		if err != nil || cur == nil {
			return true
		}
		status = cur.Status
		return status.Terminal()
	}
	if err := copyLog(ctx, stdout, path, *tail, *follow, done); err != nil && !os.IsNotExist(err) {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if !*follow {
		done()
		if !status.Terminal() {
			return 0
		}
	}
	return status.ExitCode()
}
