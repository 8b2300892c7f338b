package local

import (
	"bytes"
	"context"

	"github.com/skygo/skygo/internal/agent"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// NodeRunner is a local node's CommandRunner: commands run as the node
// (proc.Runner), and the agent's short verbs run in this process against
// the node's HOME, since the node is this machine. A status refresh or a
// detached submit then costs no process start.
type NodeRunner struct {
	*proc.Runner
}

var _ provision.AgentCaller = (*NodeRunner)(nil)

// CallAgent implements provision.AgentCaller.
func (r *NodeRunner) CallAgent(ctx context.Context, verb string, args []string, stdin []byte) (provision.Result, bool) {
	if !agent.InProcess(verb) {
		return provision.Result{}, false
	}
	var out, errOut bytes.Buffer
	code := agent.MainAt(ctx, r.Home(), append([]string{verb}, args...), bytes.NewReader(stdin), &out, &errOut)
	return provision.Result{Stdout: out.Bytes(), Stderr: errOut.Bytes(), ExitCode: code}, true
}
