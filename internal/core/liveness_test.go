package core

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/state"
)

// killAgent kills -9 the head agent daemon of a cluster and waits
// (bounded) until it is gone, returning its pid.
func killAgent(t *testing.T, e *Env, name string) int {
	t.Helper()
	pid := agentPID(t, e, name)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !proc.WaitGone(pid, 10*time.Second) {
		t.Fatalf("agent pid %d of %s still alive after SIGKILL", pid, name)
	}
	return pid
}

// TestReconcileAgentRestartsDeadAgent: one liveness reconcile of an UP
// cluster whose head agent was killed brings up a new daemon and leaves
// the cluster UP.
func TestReconcileAgentRestartsDeadAgent(t *testing.T) {
	e := newBenchEnv(t)
	name := launchMany(t, e, 1)[0]
	old := killAgent(t, e, name)

	if _, err := e.reconcileAgent(context.Background(), name); err != nil {
		t.Fatalf("reconcile of a cluster with a dead agent: %v", err)
	}
	c, err := e.Store.GetCluster(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != state.ClusterUp {
		t.Errorf("cluster after the repair: %s, want UP", c.Status)
	}
	if pid := agentPID(t, e, name); pid == old || !proc.Alive(pid) {
		t.Errorf("head agent after the repair: pid %d (killed one was %d), alive %v", pid, old, proc.Alive(pid))
	}
	// The next look finds it alive and changes nothing.
	seen := c.Version
	if _, err := e.reconcileAgent(context.Background(), name); err != nil {
		t.Fatalf("reconcile of a healthy cluster: %v", err)
	}
	if c, _ := e.Store.GetCluster(context.Background(), name); c.Version != seen {
		t.Errorf("a look at a healthy cluster wrote its record (version %d -> %d)", seen, c.Version)
	}
}

// TestRefreshLeavesUnfinishedLaunchAlone: an INIT cluster whose agent is
// not running may be a launch cut short before its setup finished, so a
// refresh records the truth but starts no agent (which would call it UP).
func TestRefreshLeavesUnfinishedLaunchAlone(t *testing.T) {
	e := newBenchEnv(t)
	name := launchMany(t, e, 1)[0]
	old := killAgent(t, e, name)
	_, err := e.Store.UpdateCluster(context.Background(), name, func(c *state.Cluster) (string, error) {
		c.Status = state.ClusterInit
		var h map[string]any
		if err := json.Unmarshal(c.Handle, &h); err != nil {
			return "", err
		}
		h["reason"] = "launch in progress (test)"
		raw, err := json.Marshal(h)
		c.Handle = raw
		return "test: a launch cut short", err
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := e.reconcileAgent(context.Background(), name); err != nil {
		t.Fatalf("liveness reconcile of an unfinished launch: %v", err)
	}
	if _, err := e.reconcileStatus(context.Background(), name); err != nil {
		t.Fatalf("status reconcile of an unfinished launch: %v", err)
	}
	c, err := e.Store.GetCluster(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	h, err := backend.HandleOf(c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != state.ClusterInit || h.AgentDown {
		t.Errorf("unfinished launch after refresh: %s (agent_down %v, reason %q), want INIT and not marked for repair", c.Status, h.AgentDown, h.Reason)
	}
	if pid := agentPID(t, e, name); pid != old {
		t.Errorf("a refresh started an agent (pid %d) on a cluster whose launch did not finish", pid)
	}
}
