package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/proc"
)

type autostopState struct {
	cfg   agentapi.AutostopConfig
	setAt time.Time
	fired time.Time
	// failed counts the actions in a row that ended in failure.
	failed int
}

const metaAutostop = "autostop"

type storedAutostop struct {
	Cfg   agentapi.AutostopConfig `json:"cfg"`
	SetAt float64                 `json:"set_at"`
}

func (d *daemon) loadAutostop(ctx context.Context) error {
	var s storedAutostop
	ok, err := d.st.getMeta(ctx, metaAutostop, &s)
	if err != nil {
		return fmt.Errorf("reading autostop setting: %w", err)
	}
	d.autostop.cfg = agentapi.AutostopConfig{IdleMinutes: -1}
	if ok {
		d.autostop.cfg = s.Cfg
		// A restart resets the idle timer (runtime.md), so count from now.
		d.autostop.setAt = time.Now()
	}
	return nil
}

func (d *daemon) setAutostop(ctx context.Context, a agentapi.AutostopConfig) (any, error) {
	switch a.WaitFor {
	case "":
		a.WaitFor = agentapi.WaitJobsAndSSH
	case agentapi.WaitJobsAndSSH, agentapi.WaitJobs, agentapi.WaitNone:
	default:
		return nil, &codedError{"bad_request", fmt.Sprintf("wait_for %q: use jobs_and_ssh, jobs or none", a.WaitFor)}
	}
	if a.HookTimeout < 0 {
		return nil, &codedError{"bad_request", "hook_timeout must be positive"}
	}
	now := time.Now()
	if err := d.st.setMeta(ctx, metaAutostop, storedAutostop{Cfg: a, SetAt: unixSeconds(now)}); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.autostop = autostopState{cfg: a, setAt: now}
	st := d.autostopStatusLocked()
	d.mu.Unlock()
	return st, nil
}

func (d *daemon) autostopStatusLocked() agentapi.AutostopStatus {
	a := d.autostop
	s := agentapi.AutostopStatus{AutostopConfig: a.cfg, SetAt: unixSeconds(a.setAt)}
	if !a.fired.IsZero() {
		f := unixSeconds(a.fired)
		s.FiredAt, s.Autostopping = &f, true
		s.HookLog = d.p.hookLog(d.autostopEvent())
		s.ActionLog = d.p.autostopLog()
	}
	return s
}

func (d *daemon) autostopEvent() string {
	if d.autostop.cfg.Down {
		return "down"
	}
	return "stop"
}

// autostopLoop checks idleness every second (SkyPilot's skylet checks every
// 60 s; checking often costs nothing here and makes the deadline precise).
func (d *daemon) autostopLoop() {
	defer d.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		if d.autostopDue(time.Now()) {
			d.fireAutostop()
		}
	}
}

// autostopDue decides whether autostop should fire now. After firing it
// waits five minutes before trying again, in case the action failed.
func (d *daemon) autostopDue(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.autostop
	if !a.cfg.Enabled() || a.setAt.IsZero() {
		return false
	}
	if !a.fired.IsZero() && now.Sub(a.fired) < 5*time.Minute {
		return false
	}
	since := a.setAt
	if a.cfg.WaitFor != agentapi.WaitNone {
		if len(d.running) > 0 || len(d.queue) > 0 {
			return false
		}
		// Sessions are counted where this daemon serves them (local
		// nodes); a node's own sshd is not watched.
		if a.cfg.WaitFor == agentapi.WaitJobsAndSSH && d.sshSessions > 0 {
			return false
		}
		if d.lastActivity.After(since) {
			since = d.lastActivity
		}
	}
	return now.Sub(since) >= a.cfg.Idle()
}

// fireAutostop runs the hook, then the configured action detached from
// the node: `sky stop` kills every process of a local node, including this
// daemon, so the action must not be one of them.
func (d *daemon) fireAutostop() {
	d.mu.Lock()
	d.autostop.fired = time.Now()
	fired := d.autostop.fired
	cfg := d.autostop.cfg
	event := d.autostopEvent()
	d.mu.Unlock()
	d.log.Info("autostop firing", "event", event, "idle", cfg.Idle().String())

	if cfg.Hook != "" {
		timeout := time.Duration(cfg.HookTimeout) * time.Second
		if timeout <= 0 {
			timeout = time.Hour
		}
		if err := runHook(d.p, event, cfg.Hook, timeout); err != nil {
			d.log.Error("autostop hook", "err", err)
		}
	}
	action := ""
	if c, err := loadConfig(d.p); err == nil {
		action = c.OnAutostop
	}
	if action == "" {
		d.log.Warn("autostop fired but no on_autostop action is configured")
		return
	}
	err := startDetached(d.p, action, event, func(err error) {
		// A stop or down that succeeds ends this daemon; one that
		// failed (the server was busy launching the cluster it is
		// asked to stop, or unreachable) is tried again soon, not in
		// five minutes.
		if err == nil {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.autostop.fired.Equal(fired) {
			return
		}
		// 5 s, doubling, up to the five minutes of a fired action.
		retry := min(autostopRetry<<min(d.autostop.failed, 6), 5*time.Minute)
		d.autostop.failed++
		d.autostop.fired = time.Now().Add(retry - 5*time.Minute)
		d.log.Warn("autostop action failed; retrying", "err", err, "in", retry.String())
	})
	if err != nil {
		d.log.Error("autostop action", "err", err)
	}
}

// autostopRetry is how soon a failed autostop action is tried again.
const autostopRetry = 5 * time.Second

func runHook(p paths, event, hook string, timeout time.Duration) error {
	path := p.hookLog(event)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", hook)
	cmd.Dir = p.home
	cmd.Env = append(os.Environ(), "SKYPILOT_HOOK_EVENT="+event)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	if ctx.Err() != nil {
		fmt.Fprintf(f, "\nhook killed after %s timeout\n", timeout)
		return fmt.Errorf("hook %s timed out after %s", event, timeout)
	}
	if err != nil {
		fmt.Fprintf(f, "\nhook failed: %v\n", err)
	}
	return err
}

// startDetached starts the autostop action detached from the node;
// exited is called with its result when it ends.
func startDetached(p paths, action, event string, exited func(error)) error {
	f, err := os.OpenFile(p.autostopLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "%s autostop (%s): %s\n", time.Now().Format(time.RFC3339), event, action)
	cmd := exec.Command("bash", "-c", action)
	cmd.Dir = p.home
	env := []string{"SKYGO_AUTOSTOP_ACTION=" + event}
	if event == "down" {
		env = append(env, "SKYGO_AUTOSTOP_DOWN=1")
	} else {
		env = append(env, "SKYGO_AUTOSTOP_DOWN=0")
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != proc.EnvNode && k != envRankTag {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The action calls the API server, which may listen on this
	// machine's loopback only: a node with a network namespace of its own
	// runs it back in the server's.
	host := ""
	if c, err := loadConfig(p); err == nil && c.NodeIndex < len(c.Nodes) && c.Nodes[c.NodeIndex].NetNS != "" {
		host = proc.HostNetNS
	}
	if err := proc.StartIn(cmd, host); err != nil {
		return err
	}
	go func() { exited(cmd.Wait()) }()
	return nil
}
