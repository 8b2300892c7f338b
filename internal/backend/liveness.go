package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// headAgentDown asks the head node whether its agent daemon answers, and
// returns why not ("" when it does). Only the daemon's health is asked
// for, so the call stays cheap however long the job table is.
func (b *Backend) headAgentDown(ctx context.Context, head provision.CommandRunner) string {
	var rep agentapi.StatusReport
	err := b.agentCall(ctx, head, nil, &rep, "status", "--daemon-only")
	if err == nil && rep.Daemon.Alive {
		return ""
	}
	why := "the head node's agent is not running"
	if err != nil {
		why += ": " + err.Error()
	} else if rep.Daemon.Error != "" {
		why += ": " + rep.Daemon.Error
	}
	return why
}

// CheckAgent is the status refresher's look at a cluster between full
// refreshes: while the head agent of an UP cluster answers, that one call
// is all it costs. When it does not answer, or the cluster is INIT because
// an earlier look could not bring its agent back, the cluster gets a full
// Refresh, which restarts the agents. It returns the cluster as it now is
// (nil when gone), and an error while the agent stays down, so that the
// caller retries on its backoff.
func (b *Backend) CheckAgent(ctx context.Context, c *state.Cluster) (*state.Cluster, error) {
	h, err := HandleOf(c)
	if err != nil || h.Info == nil || h.Terminating {
		return c, err
	}
	switch {
	case c.Status == state.ClusterUp:
		runners, err := b.runners(h)
		if err != nil {
			return c, err
		}
		if b.headAgentDown(ctx, runners[0]) == "" {
			return c, nil
		}
	case c.Status == state.ClusterInit && h.AgentDown:
	default:
		return c, nil
	}
	nc, err := b.Refresh(ctx, c)
	if err != nil || nc == nil {
		return nc, err
	}
	if nh, err := HandleOf(nc); err == nil && nc.Status == state.ClusterInit && nh.AgentDown {
		return nc, fmt.Errorf("cluster %s: %s", nc.Name, nh.Reason)
	}
	return nc, nil
}

// repairAgents restarts the agents of cluster c, observed (at c.Version)
// with its nodes up and its head agent dead, and records it UP again. The
// restarted head agent's recovery ends the jobs its dead predecessor was
// driving as FAILED_DRIVER with a reason, so the queue and any follower
// of their logs see them end. It returns the cluster as it now is; when
// the record moved after the observation, whoever moved it knows better
// and nothing is done. ErrBusy: another operation holds the cluster.
func (b *Backend) repairAgents(ctx context.Context, c *state.Cluster) (*state.Cluster, error) {
	unlock, err := b.tryLock(ctx, c.Name, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cur, err := b.Store.GetCluster(ctx, c.Name)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if cur.Version != c.Version {
		return cur, nil
	}
	h, err := HandleOf(cur)
	if err != nil {
		return nil, err
	}
	runners, err := b.runners(h)
	if err != nil {
		return nil, err
	}
	if err := b.startAgents(ctx, cur, h, runners, io.Discard); err != nil {
		return nil, err
	}
	return cur, nil
}

// restartAgents stops the head agent's daemon, so that the start that
// follows runs a new one (with the binary and configuration now on the
// node) instead of finding the old one alive. Jobs it was running end
// FAILED_DRIVER, as they would at any restart of the daemon.
func (b *Backend) restartAgents(ctx context.Context, h *Handle, log io.Writer) error {
	runners, err := b.runners(h)
	if err != nil {
		return err
	}
	fmt.Fprintln(log, "Stopping the node agents to restart them (--force)...")
	return b.agentCall(ctx, runners[0], nil, nil, "stop-daemon")
}
