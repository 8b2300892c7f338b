package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/agent"
	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/provision"
)

// The "slurm" transport: the head agent runs inside a Slurm allocation
// and reaches the other nodes of it with `srun --overlap`, pinned to one
// node, exactly as the backend reaches every node from the login node.
// The step runs with the allocation's job-scoped variables only: the
// head's own step variables would confine the new step to the head's
// step shape (its CPU binding, task count).

func init() {
	agent.Transports[Transport] = newSlurmNodeRunner
	agent.RankBases = append(agent.RankBases, rankBase)
}

type slurmNodeRunner struct {
	args []string // srun and its options, before bash
	node string
	home string
	env  []string
}

func newSlurmNodeRunner(n agentapi.Node) (agent.NodeRunner, error) {
	job, node := n.Options[OptJob], n.Options[OptNode]
	if job == "" || node == "" {
		return nil, fmt.Errorf("node %s: slurm transport needs the options %s and %s", n.IP, OptJob, OptNode)
	}
	if n.Home == "" {
		return nil, fmt.Errorf("node %s: slurm transport needs the node's home", n.IP)
	}
	return &slurmNodeRunner{args: SrunArgs(job, node), node: node, home: n.Home, env: withoutStepVars(os.Environ())}, nil
}

// Run implements NodeRunner. srun failing to start the step at all (the
// allocation ended, the node left it) is an error, not a command result.
func (r *slurmNodeRunner) Run(ctx context.Context, cmd string, opts provision.RunOptions) (provision.Result, error) {
	c := exec.CommandContext(ctx, r.args[0], append(append([]string{}, r.args[1:]...), "bash", "-c", NodeShell(r.home, cmd))...)
	c.Env = r.env
	// srun forwards its first SIGTERM to the step's tasks (exec-rank ends
	// its rank's process group on it); a second, later, kills srun.
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	c.WaitDelay = 3 * time.Second
	return agent.RunTransport(ctx, c, opts, "srun to "+r.node, func(_ int, stderrTail string) error {
		if msg := SrunStepFailure(stderrTail); msg != "" {
			return errors.New(msg)
		}
		return nil
	})
}
