package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/provision"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/state"
)

// What the managed-jobs controller (internal/jobs) asks of a cluster it
// launched: the job it tagged, a job's record with its exit codes, the
// job's log, and whether the cluster is still there.

// TaggedJob returns the job on cluster name whose managed tag is tag, or
// nil when the cluster has none (or does not exist).
func (b *Backend) TaggedJob(ctx context.Context, name string, user User, tag string) (*agentapi.Job, error) {
	jobs, err := b.Queue(ctx, name, user, true, false)
	if err != nil {
		if IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	for i := range jobs {
		if t, _ := jobs[i].Metadata[api.MetaManagedTag].(string); t == tag {
			return &jobs[i], nil
		}
	}
	return nil, nil
}

// AgentJobTimeout bounds AgentJob: a head that has not answered within it
// is reported as an error, and the caller asks the infrastructure whether
// the cluster is still there (a host cut off the network holds a call
// until its connection is dropped).
const AgentJobTimeout = 2 * time.Second

// AgentJob returns job id's record on cluster name; nil when the head's
// job table does not have it (a node whose disk went with it).
func (b *Backend) AgentJob(ctx context.Context, name string, user User, id int) (*agentapi.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, AgentJobTimeout)
	defer cancel()
	jobs, err := b.Queue(ctx, name, user, true, false)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		if jobs[i].JobID == id {
			return &jobs[i], nil
		}
	}
	return nil, nil
}

// CopyJobLog writes job id's log (the head's run log, every rank) to w:
// the last tail lines (0: all), then, with follow, until the job ends.
func (b *Backend) CopyJobLog(ctx context.Context, name string, user User, id, tail int, follow bool, w io.Writer) error {
	head, err := b.head(ctx, name, user, true)
	if err != nil {
		return err
	}
	args := []string{"--job", fmt.Sprint(id)}
	if follow {
		args = append(args, "--follow")
	}
	if tail > 0 {
		args = append(args, "--tail", fmt.Sprint(tail))
	}
	cmd, err := b.agentCommand(head, "logs", args...)
	if err != nil {
		return err
	}
	_, err = head.Stream(ctx, cmd, w, w)
	return err
}

// ClusterAlive observes cluster name now (the infrastructure's status
// query and the head agent) and says whether it is UP; a cluster that is
// gone is not alive, with no error.
func (b *Backend) ClusterAlive(ctx context.Context, name string) (bool, error) {
	c, err := b.Store.GetCluster(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c, err = b.Refresh(ctx, c)
	if err != nil {
		return false, err
	}
	if c == nil {
		return false, nil
	}
	if _, err := b.Store.GetCluster(ctx, name); errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	return c.Status == state.ClusterUp, nil
}

// ErrOutOfCapacity is in the chain of a launch error when candidates
// were tried and were out of capacity (as opposed to no candidate at all):
// the managed-jobs controller retries such a launch later.
var ErrOutOfCapacity = errors.New("out of capacity")

// IsNotFound says whether err is "no such cluster".
func IsNotFound(err error) bool {
	var ce *ClusterError
	return errors.As(err, &ce) && ce.Type == "ClusterDoesNotExist"
}

// silent is an error in a chain that adds nothing to its message.
type silent struct{ err error }

func (silent) Error() string   { return "" }
func (s silent) Unwrap() error { return s.err }

// RunOnNodes runs a shell command on every node of cluster name, feeding
// it stdin; the first failure is returned.
func (b *Backend) RunOnNodes(ctx context.Context, name string, user User, cmd string, stdin []byte) error {
	_, h, err := b.loadCluster(ctx, name, user.Hash, true)
	if err != nil {
		return err
	}
	runners, err := b.runners(h)
	if err != nil {
		return err
	}
	return parallel(len(runners), func(i int) error {
		res, err := runners[i].Run(ctx, cmd, provision.RunOptions{Stdin: bytes.NewReader(stdin)})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("on %s: exit %d: %s", runners[i].NodeIP(), res.ExitCode, bytes.TrimSpace(append(res.Stderr, res.Stdout...)))
		}
		return nil
	})
}

// Precheck says whether a launch error is one no retry can fix: the
// optimizer found nothing feasible anywhere (as opposed to candidates
// that were out of capacity), no infrastructure is enabled, or the task
// itself is invalid.
func Precheck(err error) bool {
	if errors.Is(err, ErrOutOfCapacity) {
		return false
	}
	var ce *provision.CapacityError
	if errors.As(err, &ce) {
		return false
	}
	var oe *op.Error
	if errors.As(err, &oe) {
		switch oe.Type {
		case "ResourcesUnavailableError", "NoCloudAccessError", "ValueError", "InvalidSkyPilotConfigError":
			return true
		}
	}
	var be *ClusterError
	if errors.As(err, &be) {
		switch be.Type {
		case "ValueError", "InvalidSkyPilotConfigError", "ResourcesMismatchError":
			return true
		}
	}
	return false
}

// ClusterResources is SkyPilot's short resources string of a cluster:
// 1x(cpus=4, mem=16, ...).
func ClusterResources(nodes int, h *Handle) string {
	parts := []string{}
	if h.InstanceType != "" {
		parts = append(parts, h.InstanceType)
	}
	parts = append(parts, "cpus="+strconv.FormatFloat(h.CPUs, 'g', 4, 64), "mem="+strconv.FormatFloat(h.MemoryGB, 'g', 4, 64))
	for g, n := range h.GPUs {
		parts = append(parts, g+":"+strconv.FormatFloat(n, 'f', -1, 64))
	}
	return fmt.Sprintf("%dx(%s)", max(nodes, 1), strings.Join(parts, ", "))
}

// RequestedResources is the REQUESTED column of a task, as SkyPilot shows it:
// <nodes>x[<accelerator>:<count>] or <nodes>x[CPU:<cpus>], with the
// instance type, memory and spot when asked for.
func RequestedResources(t api.TaskSpec) string {
	r := &t.Resources.Resources
	if list, _ := r.Candidates(); len(list) > 0 {
		r = list[0]
	}
	var parts []string
	switch {
	case r.AcceleratorName() != "":
		parts = append(parts, fmt.Sprintf("%s:%s", r.AcceleratorName(), strconv.FormatFloat(r.AcceleratorCount(), 'g', -1, 64)))
	case r.InstanceType != "":
		parts = append(parts, r.InstanceType)
	case r.CPUs != nil:
		parts = append(parts, "CPU:"+r.CPUs.String())
	default:
		parts = append(parts, "CPU:1+")
	}
	if r.Memory != nil {
		parts = append(parts, "mem="+r.Memory.String())
	}
	if r.UseSpot != nil && *r.UseSpot {
		parts = append(parts, "spot")
	}
	return fmt.Sprintf("%dx[%s]", max(t.NumNodes, 1), strings.Join(parts, ", "))
}

// DownIfExists tears down a cluster a controller made (a pool worker, a
// service replica) if it is still there; what is reports it under
// (what + " " + name). A teardown that fails keeps the record and is an
// error: the controller tries again, rather than forgetting a cluster
// whose processes and addresses are still there.
func (b *Backend) DownIfExists(ctx context.Context, name string, user User, what string, log io.Writer) error {
	if _, err := b.Store.GetCluster(ctx, name); errors.Is(err, state.ErrNotFound) {
		return nil
	}
	err := b.Down(ctx, name, user, true, false, log)
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("tearing down %s %s: %w", what, name, err)
	}
	fmt.Fprintf(log, "%s cluster %s torn down.\n", strings.ToUpper(what[:1])+what[1:], name)
	return nil
}
