// Package node is the node side of the Slurm plug-in, linked into
// sky-node (through internal/agent/all) and kept to the standard library
// and the agent: the head agent's "slurm" transport, which reaches the
// other nodes of an allocation with `srun --overlap`, and the rank
// environment of a node inside an allocation. The plug-in
// (internal/infra/slurm) uses the same srun words from the login node.
package node

import (
	"strings"

	"github.com/skygo/skygo/internal/provision"
)

// How a command reaches one node of a Slurm allocation, shared by the
// plug-in's runners (from the login node) and the head agent's "slurm"
// transport (from inside the allocation), so both start steps alike and
// read srun's failures alike.

// SrunArgs are the words that put one task of a command on node in
// allocation job, sharing the allocation's resources with its other
// steps. Not --unbuffered: Slurm then gives the task a pseudo-terminal
// for stdout, which mangles binary output (tar refuses to write to it).
func SrunArgs(job, node string) []string {
	return []string{"srun", "--overlap", "--jobid=" + job, "--nodelist=" + node, "--nodes=1", "--ntasks=1", "--quiet"}
}

// NodeShell is the bash script running cmd in a node's HOME (home, made
// if the allocation's script has not yet).
func NodeShell(home, cmd string) string {
	return "export HOME=" + provision.Quote(home) + ` && { [ -d "$HOME" ] || mkdir -p "$HOME"; } && cd "$HOME" && ` + cmd
}

// SrunStepFailure recognises, in the end of srun's stderr, srun failing
// to start the step at all (the allocation ended, the node left it):
// that is a transport failure, not the command's exit status. It returns
// srun's message, or "" when the command itself ran.
func SrunStepFailure(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		l := strings.TrimSpace(line)
		if !strings.HasPrefix(l, "srun: error:") {
			continue
		}
		for _, sig := range []string{"Unable to create step", "Invalid job id", "already completing or completed", "Unable to confirm allocation", "not in the allocation", "Job has expired"} {
			if strings.Contains(l, sig) {
				return "the allocation is gone or cannot start steps (" + strings.TrimPrefix(l, "srun: error: ") + ")"
			}
		}
	}
	return ""
}

// Transport is the agentapi.Node.Transport of a node the head reaches
// inside the cluster's allocation, with srun --overlap.
const Transport = "slurm"

// The keys of agentapi.Node.Options for Transport: the allocation and
// the node's Slurm name; the head starts the node's commands with
// `srun --overlap --jobid=<job> --nodelist=<node>`.
const (
	OptJob  = "job"
	OptNode = "node"
)

// Options are a node's agentapi.Node.Options in allocation job.
func Options(job, node string) map[string]string {
	return map[string]string{OptJob: job, OptNode: node}
}

// JobEnvFile, under a node's HOME, holds a Slurm allocation's job-scoped
// variables as its batch script saw them (NAME=value lines). A step
// started with `srun --nodelist=<node>` has some of them rewritten to the
// step's values (SLURM_JOB_NODELIST names one node, SLURM_NNODES is 1),
// so ranks take them from here; its presence marks a node of a Slurm
// allocation.
const JobEnvFile = ".sky/slurm_job.env"
