// Package backend is the cluster lifecycle: provision with failover over
// the optimizer's candidates, start the node agents, sync the workdir and
// file mounts, submit jobs (setup and run) to the head agent and read them
// back.
// It reaches nodes only through provision.CommandRunner and drives the
// agent with `sky agent <verb> --json`, so every infrastructure works the
// same way.
package backend

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// Backend runs cluster operations for the API server.
type Backend struct {
	// Home is the user's home (where ~/.sky lives).
	Home  string
	Store *state.Store
	// Sky is the path of the sky binary: local nodes' autostop calls it
	// back, and the node runtime is looked for beside it.
	Sky string
	// Node finds the node runtime builds; local nodes run this
	// machine's (nil: infra.NodeBinariesBeside(Sky)).
	Node infra.NodeBinaries
	// CLI is the sky command line the autostop callback runs (`sky stop`
	// or `sky down`); default Sky. The server program is not the CLI:
	// the CLI that starts it names itself here.
	CLI string
	// CallbackEnv is added to the autostop callback so that it reaches
	// this API server (HOME, SKYPILOT_API_SERVER_LOCAL_PORT, ...).
	CallbackEnv []string
	// Infras are the infrastructures clusters can live on.
	Infras *infra.Set
	// RetryDelay is the first pause of --retry-until-up (default 5 s).
	RetryDelay time.Duration
	// MayProvision, when set, is the server's word on whether user may
	// have a new cluster made on the infrastructure of that kind; an error
	// says why not and what to do, and the launch tries other places.
	MayProvision func(ctx context.Context, user User, kind string) error

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	// instance names this server process in the jobs its launches submit,
	// so a later server tells a job whose launch died with its server
	// from one a live launch is following.
	instance     string
	instanceOnce sync.Once
	// repairs are the agent-start repairs in flight, by cluster name;
	// the channel closes when one ends (see finishAgentStart).
	repairs map[string]chan struct{}
	// launches are the launches holding their cluster's lock on this
	// server, by cluster name: what `sky down` interrupts.
	launches map[string]*launchRun
}

// instanceID is this process's instance name (random, made once).
func (b *Backend) instanceID() string {
	b.instanceOnce.Do(func() {
		var raw [8]byte
		_, _ = rand.Read(raw[:])
		b.instance = hex.EncodeToString(raw[:])
	})
	return b.instance
}

// Handle is what the backend keeps about a cluster in the clusters table.
type Handle struct {
	Infra        string                 `json:"infra"` // an infra.ID: local, ssh/<pool>, ...
	Info         *provision.ClusterInfo `json:"info"`
	PricePerHour float64                `json:"price_per_hour"`
	InstanceType string                 `json:"instance_type,omitempty"`
	CPUs         float64                `json:"cpus"`
	MemoryGB     float64                `json:"memory_gb"`
	GPUs         map[string]float64     `json:"gpus,omitempty"`
	UseSpot      bool                   `json:"use_spot,omitempty"`
	SetupHash    string                 `json:"setup_hash,omitempty"`
	// Reason explains an INIT cluster (a launch in flight or failed half-way).
	Reason string `json:"reason,omitempty"`
	// AgentDown marks an INIT that a refresh recorded because the head
	// agent of an UP cluster died and could not be restarted: such a
	// cluster has run its setup, so a later refresh may restart the agent
	// and call it UP again, which it may not do for a launch cut short.
	AgentDown bool `json:"agent_down,omitempty"`
	// Terminating marks a cluster whose teardown began: only a teardown
	// moves it on from there (no refresh repairs its agents, no launch
	// reuses it), and when the server that began it died, or the
	// teardown failed, the sweeper finishes it (ReapOrphan).
	Terminating bool `json:"terminating,omitempty"`
	// InflightLaunch is the submit key of the job a launch is submitting
	// or following; one left behind names a launch a crash cut off.
	InflightLaunch string `json:"inflight_launch,omitempty"`
	// Volumes are the volumes mounted on the nodes (attachVolumes), for
	// the teardown to unmount.
	Volumes []api.VolumeMount `json:"volumes,omitempty"`
	// StorageMounts are the node paths where buckets are mounted (MOUNT,
	// MOUNT_CACHED): stop and down unmount them first.
	StorageMounts []string `json:"storage_mounts,omitempty"`
	// DeleteBuckets are the non-persistent buckets a `sky launch --down`
	// created: its teardown deletes them.
	DeleteBuckets []string `json:"delete_buckets,omitempty"`
}

// lock serialises the operations that act on a cluster's nodes (launch,
// stop, start, down, autostop): inside this server with a mutex, then
// across every server of the database with the store's cluster lock
// (state.LockCluster), since their effects on the nodes are outside any
// transaction. Taking the mutex first means at most one goroutine of this
// server waits on the shared lock per cluster.
func (b *Backend) lock(ctx context.Context, name string) (func(), error) {
	m := b.clusterMutex(name)
	m.Lock()
	unlock, err := b.Store.LockCluster(ctx, name)
	if err != nil {
		m.Unlock()
		return nil, err
	}
	return func() { unlock(); m.Unlock() }, nil
}

func (b *Backend) clusterMutex(name string) *sync.Mutex {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.locks == nil {
		b.locks = map[string]*sync.Mutex{}
	}
	m := b.locks[name]
	if m == nil {
		m = &sync.Mutex{}
		b.locks[name] = m
	}
	return m
}

// ErrBusy says that another operation holds the cluster's lock.
var ErrBusy = errors.New("another operation on the cluster is in progress")

// tryLock is lock for a background repair, which must not queue behind a
// launch (it would hold a refresher worker for the whole setup) and
// should not act while one runs anyway: it fails with ErrBusy at once
// when this server holds the lock, and after wait when another server
// does.
func (b *Backend) tryLock(ctx context.Context, name string, wait time.Duration) (func(), error) {
	m := b.clusterMutex(name)
	if !m.TryLock() {
		return nil, ErrBusy
	}
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	unlock, err := b.Store.LockCluster(lctx, name)
	if err != nil {
		m.Unlock()
		if lctx.Err() != nil && ctx.Err() == nil {
			return nil, ErrBusy
		}
		return nil, err
	}
	return func() { unlock(); m.Unlock() }, nil
}

// plugin returns the infrastructure a handle's infra ID names.
func (b *Backend) plugin(h *Handle) (infra.Infra, infra.ID, error) {
	id, err := infra.ParseID(h.Infra)
	if err != nil {
		return nil, id, err
	}
	in, err := b.Infras.Get(id)
	return in, id, err
}

// provisioner returns the Provisioner of a handle's infra.
func (b *Backend) provisioner(h *Handle) (provision.Provisioner, error) {
	in, id, err := b.plugin(h)
	if err != nil {
		return nil, err
	}
	return in.Provisioner(id)
}

// ClusterError is a user-facing error about a cluster's state; its Type is
// the request error type SkyPilot clients know.
type ClusterError struct {
	Type string
	Msg  string
}

func (e *ClusterError) Error() string     { return e.Msg }
func (e *ClusterError) ErrorType() string { return e.Type }

// TypeNotOwner is the type of the error an operation on another user's
// cluster gets.
const TypeNotOwner = "ClusterOwnerIdentityMismatchError"

// IsPermission says whether err is a refusal of the caller's rights (the
// cluster is another user's, or a file on the way may not be read): an
// answer, which asking again does not change, not a cluster that did not
// answer.
func IsPermission(err error) bool {
	var ce *ClusterError
	return (errors.As(err, &ce) && ce.Type == TypeNotOwner) || errors.Is(err, fs.ErrPermission)
}

func notFound(name string) error {
	return &ClusterError{Type: "ClusterDoesNotExist", Msg: fmt.Sprintf("Cluster %q does not exist. Run `sky status` to see your clusters.", name)}
}

// loadCluster returns the record and handle of a cluster owned by user
// (any user when allUsers).
func (b *Backend) loadCluster(ctx context.Context, name, userHash string, allUsers bool) (*state.Cluster, *Handle, error) {
	c, err := b.Store.GetCluster(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil, notFound(name)
	}
	if err != nil {
		return nil, nil, err
	}
	if !allUsers && userHash != "" && c.UserHash != "" && c.UserHash != userHash {
		return nil, nil, &ClusterError{Type: TypeNotOwner,
			Msg: fmt.Sprintf("Cluster %q belongs to user %s; you cannot operate on another user's cluster.", name, c.UserName)}
	}
	h, err := HandleOf(c)
	if err != nil {
		return nil, nil, err
	}
	return c, h, nil
}

func (b *Backend) saveHandle(c *state.Cluster, h *Handle) {
	raw, _ := json.Marshal(h)
	c.Handle = raw
}

// update changes a cluster's record through one conditional update
// (state.UpdateCluster): mutate sees the current row and handle, which may
// differ from what the caller read earlier, and decides from them. The
// caller's c and h (when not nil) are set to what was written, so they
// never go stale. A mutation returning state.ErrNoChange writes nothing.
func (b *Backend) update(ctx context.Context, c *state.Cluster, h *Handle, mutate func(c *state.Cluster, h *Handle) (reason string, err error)) error {
	name := c.Name
	got, err := b.Store.UpdateCluster(context.WithoutCancel(ctx), name, func(row *state.Cluster) (string, error) {
		rh, err := HandleOf(row)
		if err != nil {
			return "", err
		}
		reason, err := mutate(row, rh)
		if err != nil {
			return "", err
		}
		b.saveHandle(row, rh)
		return reason, nil
	})
	if errors.Is(err, state.ErrNotFound) {
		return &ClusterError{Type: "ClusterDoesNotExist", Msg: fmt.Sprintf("Cluster %q was removed while this operation ran.", name)}
	}
	if err != nil {
		return err
	}
	gh, err := HandleOf(got)
	if err != nil {
		return err
	}
	*c = *got
	if h != nil {
		*h = *gh
	}
	return nil
}

// runners returns the command runners of a cluster, head first.
func (b *Backend) runners(h *Handle) ([]provision.CommandRunner, error) {
	if h.Info == nil {
		return nil, errors.New("cluster has no nodes recorded")
	}
	p, err := b.provisioner(h)
	if err != nil {
		return nil, err
	}
	return p.Runners(h.Info)
}

// agentCall runs `sky agent <verb> --json args...` on a node, feeding in
// as stdin, and decodes the JSON answer into out.
func (b *Backend) agentCall(ctx context.Context, r provision.CommandRunner, in any, out any, verb string, args ...string) error {
	args = append([]string{"--json"}, args...)
	var raw []byte
	if in != nil {
		var err error
		if raw, err = json.Marshal(in); err != nil {
			return err
		}
	}
	res, handled := provision.Result{}, false
	if ac, ok := r.(provision.AgentCaller); ok {
		res, handled = ac.CallAgent(ctx, verb, args, raw)
	}
	if !handled {
		var stdin io.Reader
		if raw != nil {
			stdin = bytes.NewReader(raw)
		}
		cmd, err := b.agentCommand(r, verb, args...)
		if err != nil {
			return err
		}
		res, err = r.Run(ctx, cmd, provision.RunOptions{Stdin: stdin})
		if err != nil {
			return fmt.Errorf("agent %s on %s: %w", verb, r.NodeIP(), err)
		}
	}
	if res.ExitCode != 0 {
		var e agentapi.Failure
		if json.Unmarshal(res.Stdout, &e) == nil && e.Error != "" {
			return &agentError{verb: verb, node: r.NodeIP(), msg: e.Error}
		}
		msg := strings.TrimSpace(string(res.Stderr) + string(res.Stdout))
		if msg == "" {
			// Killed before it could say anything, e.g. by a stop of the
			// cluster running at the same time: the exit code is all there is.
			msg = fmt.Sprintf("exited with code %d without any output", res.ExitCode)
		}
		return &agentError{verb: verb, node: r.NodeIP(), msg: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res.Stdout, out); err != nil {
		return fmt.Errorf("agent %s on %s: unreadable answer %q: %w", verb, r.NodeIP(), res.Stdout, err)
	}
	return nil
}

type agentError struct{ verb, node, msg string }

func (e *agentError) Error() string {
	return fmt.Sprintf("node agent (%s) on %s: %s", e.verb, e.node, e.msg)
}

// nodeWord is the shell word that runs the node runtime on the node r
// reaches: the copy an infrastructure's bootstrap installed there, else
// this machine's build (the node is this machine).
func (b *Backend) nodeWord(r provision.CommandRunner) (string, error) {
	if l, ok := r.(provision.SkyLocator); ok {
		return l.SkyCommand(), nil
	}
	bins := b.Node
	if bins == nil {
		bins = infra.NodeBinariesBeside(b.Sky)
	}
	p, err := bins(runtime.GOARCH)
	if err != nil {
		return "", err
	}
	return provision.Quote(p), nil
}

// agentCommand is `sky-node agent <verb> args...` with the node runtime
// of the node r reaches.
func (b *Backend) agentCommand(r provision.CommandRunner, verb string, args ...string) (string, error) {
	w, err := b.nodeWord(r)
	if err != nil {
		return "", err
	}
	return w + " " + provision.Join(append([]string{"agent", verb}, args...)...), nil
}

// agentConfigs builds each node's agent config. nodes, when set, is how
// the head reaches each node (SSH clusters); otherwise every node is
// local.
func (b *Backend) agentConfigs(h *Handle, onAutostop string, nodes []agentapi.Node) []agentapi.Config {
	var out []agentapi.Config
	for i := range h.Info.Nodes {
		c := agentapi.ConfigFromCluster(h.Info, i, agentapi.TransportLocal)
		if nodes != nil {
			c.Nodes = nodes
		}
		c.OnAutostop = onAutostop
		out = append(out, c)
	}
	return out
}
