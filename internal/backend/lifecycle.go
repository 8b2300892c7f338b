package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

// ValidateClusterName applies the cluster name rule as a ValueError, the
// exception SkyPilot raises for it.
func ValidateClusterName(name string) error {
	if err := api.CheckClusterName(name); err != nil {
		return &ClusterError{Type: "ValueError", Msg: err.Error()}
	}
	return nil
}

// Stop stops every node of a cluster, keeping its disks (directories).
func (b *Backend) Stop(ctx context.Context, name string, user User, anyOwner bool, log io.Writer) error {
	unlock, err := b.lock(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	c, h, err := b.loadCluster(ctx, name, user.Hash, anyOwner)
	if err != nil {
		return err
	}
	if c.Status == state.ClusterStopped {
		fmt.Fprintf(log, "Cluster %s is already stopped.\n", name)
		return nil
	}
	p, err := b.provisioner(h)
	if err != nil {
		return err
	}
	b.unmountStorage(ctx, h)
	// "Stopping cluster <c>...done." is the client's line, once the request ends.
	if err := p.Stop(ctx, name); err != nil {
		var ns *provision.NotSupportedError
		if errors.As(err, &ns) {
			return &ClusterError{Type: "NotSupportedError", Msg: fmt.Sprintf("Cluster %s cannot be stopped: %s", name, ns.Msg)}
		}
		return err
	}
	err = b.update(ctx, c, h, func(c *state.Cluster, _ *Handle) (string, error) {
		if c.Status == state.ClusterStopped {
			return "", state.ErrNoChange // stopped meanwhile by another request
		}
		c.Status = state.ClusterStopped
		c.Autostop, c.ToDown = -1, false
		return "stopped by user", nil
	})
	return err
}

// Start restarts a stopped cluster's nodes and agents. An UP cluster is
// left alone unless force, which restarts its agents (a new daemon, with
// the binary and configuration now on the nodes). With retry, a start the
// infrastructure has no capacity for is tried again after a pause until it
// succeeds or the request is cancelled (-r/--retry-until-up).
func (b *Backend) Start(ctx context.Context, name string, user User, force, retry bool, log io.Writer) error {
	unlock, err := b.lock(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	c, h, err := b.loadCluster(ctx, name, user.Hash, user.Admin)
	if err != nil {
		return err
	}
	if h.Terminating {
		return &ClusterError{Type: "ClusterNotUpError", Msg: fmt.Sprintf("Cluster %q is being torn down (%s); it cannot be started. Run `sky down %s` to finish the teardown.", name, h.Reason, name)}
	}
	if c.Status == state.ClusterUp {
		if !force {
			fmt.Fprintf(log, "Cluster %s is already UP.\n", name)
			return nil
		}
		if err := b.restartAgents(ctx, h, log); err != nil {
			return err
		}
	}
	return b.startLocked(ctx, c, h, retry, log)
}

func (b *Backend) startLocked(ctx context.Context, c *state.Cluster, h *Handle, retry bool, log io.Writer) error {
	p, err := b.provisioner(h)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "Starting cluster %s...\n", c.Name)
	var info *provision.ClusterInfo
	for round := 1; ; round++ {
		info, err = p.Start(ctx, c.Name)
		var capErr *provision.CapacityError
		if err == nil || !retry || !errors.As(err, &capErr) {
			break
		}
		delay := b.retryDelay(round)
		fmt.Fprintln(log, ux.Retrying(fmt.Sprintf("No capacity to start %s: %v. Retrying in %s (--retry-until-up; cancel the request to stop).", c.Name, err, delay)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	if err != nil {
		return err
	}
	h.Info = info
	runners, err := p.Runners(info)
	if err != nil {
		return err
	}
	if err := b.startAgents(ctx, c, h, runners, log); err != nil {
		return err
	}
	// The agents' SSH port may have moved while the cluster was stopped.
	b.writeSSHConfig(h, log)
	fmt.Fprintf(log, "Cluster %s is UP.\n", c.Name)
	return nil
}

// Down removes a cluster and everything on it. The record goes only once
// the infrastructure says nothing of the cluster is left; a teardown that
// fails keeps it, with the reason, for status to show and a retry to
// finish. With purge (the user's --purge) a failure still removes the
// record; on this machine's infrastructures the server's sweeper then
// reaps what was left (ReapOrphan). anyOwner (an admin, or the server
// itself) may remove another user's cluster.
//
// A launch of the cluster in progress on this server is interrupted
// first, rather than waited for: it may be stuck provisioning for minutes.
// The teardown then takes the lock the launch lets go of and removes what
// it made.
func (b *Backend) Down(ctx context.Context, name string, user User, anyOwner, purge bool, log io.Writer) error {
	// Another user's cluster is refused before anything is interrupted.
	if _, _, err := b.loadCluster(ctx, name, user.Hash, anyOwner); err != nil && !IsNotFound(err) {
		return err
	}
	interrupted := b.interruptLaunch(name, user.Hash, anyOwner)
	if interrupted {
		fmt.Fprintf(log, "Interrupting the launch of cluster %s in progress...\n", name)
	}
	unlock, err := b.lock(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	c, h, err := b.loadCluster(ctx, name, user.Hash, anyOwner)
	if interrupted && IsNotFound(err) {
		// The launch was stopped before it recorded the cluster: it made
		// nothing.
		fmt.Fprintf(log, "The launch of cluster %s was interrupted before it made anything.\n", name)
		return nil
	}
	if err != nil {
		return err
	}
	return b.downLocked(ctx, c, h, purge, log)
}

// downLocked is Down once the cluster's lock is held and its record read.
func (b *Backend) downLocked(ctx context.Context, c *state.Cluster, h *Handle, purge bool, log io.Writer) error {
	name := c.Name
	// Marked before anything goes: should this server die midway, the
	// record says a teardown began, and the sweeper of the next server
	// finishes it instead of a refresh bringing the half-removed cluster
	// back.
	if !h.Terminating {
		if err := b.update(ctx, c, h, func(_ *state.Cluster, rh *Handle) (string, error) {
			rh.Terminating, rh.Reason = true, "tearing down"
			return "", nil
		}); err != nil {
			return err
		}
	}
	// "Terminating cluster <c>...done." is the client's line, once the request ends.
	b.unlinkVolumes(ctx, h, log)
	if p, perr := b.provisioner(h); perr == nil {
		b.unmountStorage(ctx, h)
		if err := p.Terminate(ctx, name); err != nil {
			if !purge {
				b.setReason(ctx, c, h, "teardown failed (retried): "+err.Error())
				return fmt.Errorf("terminating %s: %w (the cluster is kept and its teardown retried; run `sky down %s` again, or add --purge to remove its record anyway)", name, err, name)
			}
			fmt.Fprintf(log, "Warning: terminating %s failed: %v; its record is removed anyway (--purge).\n", name, err)
		}
	} else if !purge {
		return perr
	}
	b.removeSSHConfig(h, name, log)
	// Only this incarnation: a cluster of the same name launched anew
	// meanwhile (another server) is not ours to remove.
	removed, err := b.Store.RemoveCluster(context.WithoutCancel(ctx), name, "terminated by user", func(row *state.Cluster) error {
		if row.ClusterHash != c.ClusterHash {
			return state.ErrNoChange
		}
		return nil
	})
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	if !removed {
		fmt.Fprintf(log, "Cluster %s was already removed by another request.\n", name)
		return nil
	}
	b.releaseVolumes(ctx, name)
	b.deleteBuckets(ctx, h, log)
	return nil
}

// Refresh asks the infrastructure and the head agent for a cluster's real
// state and records it: nodes gone -> removed, nodes stopped -> STOPPED,
// agent dead -> agents restarted (still UP), or INIT with the reason when
// that fails.
func (b *Backend) Refresh(ctx context.Context, c *state.Cluster) (*state.Cluster, error) {
	h, err := HandleOf(c)
	if err != nil || h.Info == nil || h.Terminating {
		return c, err // a teardown under way (or cut short) is the sweeper's
	}
	p, err := b.provisioner(h)
	if err != nil {
		return c, nil
	}
	nodes, err := p.Query(ctx, c.Name)
	if err != nil {
		return c, err
	}
	// What the nodes say is turned into a status, then written only if the
	// record is still the one observed: an operation that moved the
	// cluster meanwhile (a stop, a start, a down) knows better than this
	// observation, which is dropped.
	seen := c.Version
	status, reason := c.Status, h.Reason
	agentDown := false
	switch say, why := readNodes(nodes, c.Status); say {
	case nodesGone:
		removed, err := b.Store.RemoveCluster(context.WithoutCancel(ctx), c.Name, "status refresh: nodes no longer exist", func(row *state.Cluster) error {
			if row.Version != seen {
				return state.ErrNoChange
			}
			return nil
		})
		if removed {
			b.removeSSHConfig(h, c.Name, io.Discard) // `ssh <cluster>` must not reach the next owner of the address
			b.releaseVolumes(ctx, c.Name)
		}
		if errors.Is(err, state.ErrNotFound) {
			err = nil
		}
		if err != nil {
			return c, err
		}
		cur, err := b.Store.GetCluster(ctx, c.Name)
		if errors.Is(err, state.ErrNotFound) {
			return nil, nil
		}
		return cur, err
	case nodesStopped:
		status = state.ClusterStopped
	case nodesUp:
		runners, err := p.Runners(h.Info)
		if err != nil {
			return c, err
		}
		if c.Status == state.ClusterInit && h.Reason == reasonStartingAgents {
			return b.finishAgentStart(ctx, c, runners)
		}
		if why := b.headAgentDown(ctx, runners[0]); why != "" {
			// Only a cluster that finished its launch is repaired: an INIT
			// one may be a launch cut short before (or during) its setup.
			if c.Status == state.ClusterUp || h.AgentDown {
				rc, rerr := b.repairAgents(ctx, c)
				if rerr == nil {
					return rc, nil
				}
				if errors.Is(rerr, ErrBusy) {
					// The operation holding the cluster moves it anyway.
					return c, fmt.Errorf("%s; not restarted now: %w", why, rerr)
				}
				why += "; restarting it failed: " + rerr.Error()
				agentDown = true
			}
			status, reason = state.ClusterInit, why+"; run `sky start` or `sky launch` again to repair it"
		} else if c.Status == state.ClusterInit && h.Reason != "" && c.ClusterEverUp {
			status, reason = state.ClusterUp, ""
		}
	default:
		status, reason = state.ClusterInit, why
	}
	if status == c.Status && reason == h.Reason && agentDown == h.AgentDown {
		return c, nil
	}
	err = b.update(ctx, c, h, func(row *state.Cluster, rh *Handle) (string, error) {
		if row.Version != seen {
			return "", state.ErrNoChange
		}
		moved := row.Status != status
		row.Status, rh.Reason, rh.AgentDown = status, reason, agentDown
		if !moved {
			return "", nil // only the reason changed: no event
		}
		return "status refresh: " + reason, nil
	})
	if err != nil {
		var ce *ClusterError
		if errors.As(err, &ce) && ce.Type == "ClusterDoesNotExist" {
			return nil, nil
		}
		return c, err
	}
	return c, nil
}

// HandleOf decodes the backend's handle stored in a cluster record; a
// record without one gives an empty handle.
func HandleOf(c *state.Cluster) (*Handle, error) {
	var h Handle
	if len(c.Handle) == 0 {
		return &h, nil
	}
	if err := json.Unmarshal(c.Handle, &h); err != nil {
		return nil, fmt.Errorf("cluster %s: unreadable handle: %w", c.Name, err)
	}
	return &h, nil
}

// Autostop sets (or cancels, idle < 0) a cluster's autostop.
func (b *Backend) Autostop(ctx context.Context, name string, user User, cfg agentapi.AutostopConfig) error {
	unlock, err := b.lock(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	c, h, err := b.loadCluster(ctx, name, user.Hash, user.Admin)
	if err != nil {
		return err
	}
	if c.Status != state.ClusterUp {
		return &ClusterError{Type: "ClusterNotUpError", Msg: fmt.Sprintf("Cluster %q is %s; autostop can only be set on an UP cluster.", name, c.Status)}
	}
	runners, err := b.runners(h)
	if err != nil {
		return err
	}
	return b.setAutostop(ctx, c, h, runners[0], cfg)
}

func (b *Backend) setAutostop(ctx context.Context, c *state.Cluster, h *Handle, head provision.CommandRunner, cfg agentapi.AutostopConfig) error {
	if cfg.IdleMinutes >= 0 && !cfg.Down {
		if in, _, err := b.plugin(h); err == nil {
			if ns, ok := in.(infra.NoStop); ok {
				return &ClusterError{Type: "NotSupportedError", Msg: fmt.Sprintf(
					"Cluster %s is on %s, where clusters cannot be stopped (%s); autostop there can only tear down: add --down.", c.Name, h.Infra, ns.CannotStop())}
			}
		}
	}
	args := []string{"--idle-minutes", fmt.Sprint(cfg.IdleMinutes)}
	if cfg.IdleMinutes < 0 {
		args = []string{"--cancel"}
	}
	if cfg.Down {
		args = append(args, "--down")
	}
	if cfg.WaitFor != "" {
		args = append(args, "--wait-for", cfg.WaitFor)
	}
	if cfg.Hook != "" {
		args = append(args, "--hook", cfg.Hook)
	}
	if cfg.HookTimeout > 0 {
		args = append(args, "--hook-timeout", fmt.Sprint(cfg.HookTimeout))
	}
	if err := b.agentCall(ctx, head, nil, nil, "set-autostop", args...); err != nil {
		return err
	}
	return b.update(ctx, c, h, func(c *state.Cluster, _ *Handle) (string, error) {
		c.Autostop, c.ToDown = cfg.IdleMinutes, cfg.Down && cfg.IdleMinutes >= 0
		if cfg.IdleMinutes < 0 {
			c.Autostop = -1
		}
		return "", nil
	})
}

// Queue returns the jobs of a cluster.
func (b *Backend) Queue(ctx context.Context, name string, user User, allUsers, skipFinished bool) ([]agentapi.Job, error) {
	head, err := b.head(ctx, name, user, user.Admin)
	if err != nil {
		return nil, err
	}
	args := []string{}
	if skipFinished {
		args = append(args, "--skip-finished")
	}
	if !allUsers && user.Hash != "" {
		args = append(args, "--user-hash", user.Hash)
	}
	var jobs []agentapi.Job
	if err := b.agentCall(ctx, head, nil, &jobs, "queue", args...); err != nil {
		return nil, err
	}
	return jobs, nil
}

// head returns the head node's runner of an UP cluster.
func (b *Backend) head(ctx context.Context, name string, user User, allUsers bool) (provision.CommandRunner, error) {
	c, h, err := b.loadCluster(ctx, name, user.Hash, allUsers || user.Controller)
	if err != nil {
		return nil, err
	}
	if c.Status == state.ClusterStopped {
		return nil, &ClusterError{Type: "ClusterNotUpError", Msg: fmt.Sprintf("Cluster %q is STOPPED. Run `sky start %s` first.", name, name)}
	}
	runners, err := b.runners(h)
	if err != nil {
		return nil, err
	}
	return runners[0], nil
}

// Cancel cancels jobs on a cluster.
func (b *Backend) Cancel(ctx context.Context, name string, user User, ids []int, all, allUsers bool) (agentapi.CancelResult, error) {
	var out agentapi.CancelResult
	head, err := b.head(ctx, name, user, false)
	if err != nil {
		return out, err
	}
	args := []string{}
	if all {
		args = append(args, "--all")
	}
	if !allUsers && user.Hash != "" && all {
		args = append(args, "--user-hash", user.Hash)
	}
	for _, id := range ids {
		args = append(args, fmt.Sprint(id))
	}
	if err := b.agentCall(ctx, head, nil, &out, "cancel", args...); err != nil {
		return out, err
	}
	return out, nil
}

// Logs streams a job's log (the latest job when id is 0) to w and returns
// the job's status when it ends (or now, without follow).
func (b *Backend) Logs(ctx context.Context, name string, user User, jobID int, follow bool, tail int, worker *int, w io.Writer) (string, error) {
	which := "the last job"
	if jobID > 0 {
		which = fmt.Sprintf("job %d", jobID)
	}
	if worker != nil && *worker > 0 {
		// A worker the cluster does not have would show an empty log, as
		// if the job had printed nothing there.
		c, _, err := b.loadCluster(ctx, name, user.Hash, user.Admin)
		if err != nil {
			return "", err
		}
		if *worker >= c.NumNodes {
			return "", &ClusterError{Type: "ValueError", Msg: fmt.Sprintf(
				"--worker %d: cluster %q has %d node(s), so its workers are 1 to %d (0 or no --worker is the head).", *worker, name, c.NumNodes, c.NumNodes-1)}
		}
	}
	fmt.Fprintln(w, ux.Styled(ux.Yellow, fmt.Sprintf("Tailing logs of %s on cluster '%s'...", which, name)))
	head, err := b.head(ctx, name, user, user.Admin)
	if err != nil {
		return "", err
	}
	if jobID == 0 {
		jobs, err := b.Queue(ctx, name, user, true, false)
		if err != nil {
			return "", err
		}
		if len(jobs) == 0 {
			return "", &ClusterError{Type: "JobNotFound", Msg: fmt.Sprintf("No job found on cluster %q.", name)}
		}
		jobID = jobs[0].JobID
	}
	args := []string{"--job", fmt.Sprint(jobID)}
	if follow {
		args = append(args, "--follow")
	}
	if tail > 0 {
		args = append(args, "--tail", fmt.Sprint(tail))
	}
	if worker != nil {
		args = append(args, "--rank", fmt.Sprint(*worker))
	}
	cmd, err := b.agentCommand(head, "logs", args...)
	if err != nil {
		return "", err
	}
	if _, err := head.Stream(ctx, cmd, w, w); err != nil {
		return "", err
	}
	return b.jobStatus(ctx, head, jobID)
}

// JobStatus returns the status of a job ("" when it does not exist).
func (b *Backend) JobStatus(ctx context.Context, name string, user User, jobID int) (int, string, error) {
	head, err := b.head(ctx, name, user, user.Admin)
	if err != nil {
		return 0, "", err
	}
	if jobID == 0 {
		jobs, err := b.Queue(ctx, name, user, true, false)
		if err != nil {
			return 0, "", err
		}
		if len(jobs) == 0 {
			return 0, "", nil
		}
		jobID = jobs[0].JobID
	}
	st, err := b.jobStatus(ctx, head, jobID)
	return jobID, st, err
}

// HookLog writes the autostop hook's log from the head node to w. It works
// on a stopped cluster too: the log is on the node's disk.
func (b *Backend) HookLog(ctx context.Context, name string, user User, event string, w io.Writer) error {
	_, h, err := b.loadCluster(ctx, name, user.Hash, user.Admin)
	if err != nil {
		return err
	}
	runners, err := b.runners(h)
	if err != nil {
		return err
	}
	logs, what := "*", "hook"
	if event != "" {
		logs, what = provision.Quote(event), event+" hook"
	}
	res, err := runners[0].Run(ctx, "cat ~/.sky/hooks/"+logs+".log 2>/dev/null", provision.RunOptions{})
	if err != nil {
		return err
	}
	if len(res.Stdout) == 0 {
		fmt.Fprintf(w, "No %s log on this cluster yet.\n", what)
		return nil
	}
	_, err = w.Write(res.Stdout)
	return err
}

// agentRepairWait is how long a refresh waits for another server's hold
// on a cluster before leaving an unfinished agent start to that server.
const agentRepairWait = 200 * time.Millisecond

// finishAgentStart completes the agent start of a launch that a server
// crash cut off between the nodes coming up and the agents answering, as
// the launch would have: startAgents is idempotent (agents found running
// stay, missing ones start) and marks the cluster UP. Refreshes of the
// same cluster in this server (a status request and the status
// controller, both at a server's start) share one repair, and each
// returns the row it left. While an operation holds the cluster, the
// launch is not cut off but still in that step: the row is left as it
// is, since agents not answering yet are no news.
func (b *Backend) finishAgentStart(ctx context.Context, c *state.Cluster, runners []provision.CommandRunner) (*state.Cluster, error) {
	b.mu.Lock()
	if ch, ok := b.repairs[c.Name]; ok {
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return c, ctx.Err()
		}
		nc, err := b.Store.GetCluster(ctx, c.Name)
		return nc, err
	}
	if b.repairs == nil {
		b.repairs = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	b.repairs[c.Name] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.repairs, c.Name)
		b.mu.Unlock()
		close(ch)
	}()
	unlock, err := b.tryLock(ctx, c.Name, agentRepairWait)
	if err != nil {
		return c, nil // an operation holds the cluster: it writes what it finds
	}
	defer unlock()
	cur, err := b.Store.GetCluster(ctx, c.Name)
	if err != nil {
		return c, err
	}
	h, err := HandleOf(cur)
	if err != nil {
		return c, err
	}
	if cur.Status != state.ClusterInit || h.Reason != reasonStartingAgents || h.Info == nil {
		return cur, nil // moved on meanwhile: the row is the news
	}
	if err := b.startAgents(ctx, cur, h, runners, io.Discard); err != nil {
		b.setReason(ctx, cur, h, "starting agents failed: "+err.Error())
		return c, err
	}
	nc, err := b.Store.GetCluster(ctx, c.Name)
	return nc, err
}

// removeSSHConfig removes the cluster's `ssh <cluster>` entries, for the
// infrastructures that have them.
func (b *Backend) removeSSHConfig(h *Handle, name string, log io.Writer) {
	if in, _, err := b.plugin(h); err == nil {
		if a, ok := in.(infra.SSHAccess); ok {
			if err := a.RemoveSSHConfig(name); err != nil {
				fmt.Fprintf(log, "Warning: %v\n", err)
			}
		}
	}
}

// JobSpec is the task YAML and entrypoint job jobID of cluster name was
// submitted with; nil when the cluster does not exist or the job's spec
// was not recorded (it predates the record, or the job id is unknown).
func (b *Backend) JobSpec(ctx context.Context, name string, user User, jobID int) (*api.ClusterJobSpec, error) {
	c, _, err := b.loadCluster(ctx, name, user.Hash, user.Admin)
	var ce *ClusterError
	if errors.As(err, &ce) && ce.Type == "ClusterDoesNotExist" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	j, err := b.Store.GetClusterJobSpec(ctx, c.ClusterHash, jobID)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &api.ClusterJobSpec{TaskYAML: j.TaskYAML, Entrypoint: j.Entrypoint}, nil
}
