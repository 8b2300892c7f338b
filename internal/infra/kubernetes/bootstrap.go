package kubernetes

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
)

// agentSSHPort is where a worker pod's agent serves SSH to the head pod.
// Not 22: images that run their own sshd keep it.
const agentSSHPort = 10022

// headKey is the head pod's private key for its workers, in the head's
// home; made for the cluster, so no other cluster's or the server's key
// is ever inside a pod.
const headKey = ".sky/ssh/cluster-key"

// Bootstrap implements infra.Bootstrapper: the node runtime in every pod,
// the container user's home recorded, and, for a multi-node cluster, a
// key of the cluster's own that lets the head's agent reach each worker's
// agent (`sky agent ssh-serve` on the pod network).
func (in *Infra) Bootstrap(ctx context.Context, info *provision.ClusterInfo, runners []provision.CommandRunner, log io.Writer) ([]agentapi.Node, error) {
	runcmd, err := in.postProvisionScript(info.Meta[metaContext])
	if err != nil {
		return nil, err
	}
	users := make([]string, len(runners))
	var mu sync.Mutex
	err = forEach(len(runners), 16, func(i int) error {
		r, ok := runners[i].(*Runner)
		if !ok {
			return fmt.Errorf("node %d is not a pod", i)
		}
		home, user, err := r.identity(ctx)
		if err != nil {
			return err
		}
		copied, err := infra.EnsureBinary(ctx, r, in.env.NodeBinaries())
		if err != nil {
			return fmt.Errorf("pod %s: %w", r.pod, err)
		}
		if runcmd != "" {
			if err := runPostProvision(ctx, r, runcmd, log); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		info.Nodes[i].Home, users[i] = home, user
		st := "up to date"
		if copied {
			st = "copied"
		}
		fmt.Fprintf(log, "node runtime in pod %s: %s\n", r.pod, st)
		return nil
	})
	if err != nil {
		return nil, err
	}
	nodes := make([]agentapi.Node, len(info.Nodes))
	for i, n := range info.Nodes {
		nodes[i] = agentapi.Node{IP: n.InternalIP, Home: n.Home, Transport: agentapi.TransportAgentSSH,
			Sky: skyInPod(n.Home), CPUs: schedulableCPUs(n.CPUs), GPUs: n.GPUs,
			SSHUser: users[i], SSHPort: agentSSHPort}
	}
	if len(runners) == 1 {
		return nodes, nil
	}
	pub, err := ensureHeadKey(ctx, runners[0])
	if err != nil {
		return nil, err
	}
	err = forEach(len(runners)-1, 16, func(k int) error {
		i := k + 1
		hostKey, err := serveAgentSSH(ctx, runners[i].(*Runner), nodes[i], pub)
		if err != nil {
			return err
		}
		nodes[i].SSHHostKey = hostKey
		nodes[i].SSHKey = nodes[0].Home + "/" + headKey
		return nil
	})
	if err != nil {
		return nil, err
	}
	return nodes, nil
}

// postProvisionDone marks a pod whose post_provision_runcmd ran.
const postProvisionDone = ".sky/post_provision_runcmd.done"

// postProvisionScript is kubernetes.post_provision_runcmd of the server's
// config for a context, as one script that stops at the first failing
// command; "" when there is none. An entry is a command line, or a list
// of words (cloud-init's two forms).
func (in *Infra) postProvisionScript(context string) (string, error) {
	cfg, err := in.serverConfig()
	if err != nil {
		return "", err
	}
	v, _ := cfg.RegionValue("kubernetes", context, "post_provision_runcmd")
	if v == nil {
		return "", nil
	}
	list, ok := v.([]any)
	if !ok {
		return "", fmt.Errorf("kubernetes.post_provision_runcmd must be a list of commands, not %T", v)
	}
	lines := []string{"set -e"}
	for i, e := range list {
		switch t := e.(type) {
		case string:
			lines = append(lines, t)
		case []any:
			words := make([]string, len(t))
			for k, w := range t {
				words[k] = fmt.Sprint(w)
			}
			lines = append(lines, provision.Join(words...))
		default:
			return "", fmt.Errorf("kubernetes.post_provision_runcmd[%d] must be a command line or a list of words, not %T", i, e)
		}
	}
	if len(lines) == 1 {
		return "", nil
	}
	return strings.Join(lines, "\n"), nil
}

// runPostProvision runs the script once in a pod (a marker in its home
// says it ran, so a relaunch onto the same pod does not run it again),
// its output going to the launch's log; a failure fails the launch.
func runPostProvision(ctx context.Context, r *Runner, script string, log io.Writer) error {
	cmd := `[ -e ~/` + postProvisionDone + ` ] && exit 0; ( ` + "bash -c " + provision.Quote(script) +
		` ) && mkdir -p ~/.sky && touch ~/` + postProvisionDone
	res, err := provision.RunChecked(ctx, r, cmd, provision.RunOptions{})
	if len(res.Stdout) > 0 {
		fmt.Fprintf(log, "post_provision_runcmd in pod %s:\n%s", r.pod, res.Stdout)
	}
	if err != nil {
		return &provision.ConfigError{Where: where(r.c.context), Msg: "kubernetes.post_provision_runcmd failed in pod " + r.pod, Err: err}
	}
	return nil
}

// ensureHeadKey returns the public half of the head's key for its
// workers, making the pair on the first launch.
func ensureHeadKey(ctx context.Context, head provision.CommandRunner) (string, error) {
	res, err := head.Run(ctx, "cat ~/"+headKey+".pub 2>/dev/null", provision.RunOptions{})
	if err != nil {
		return "", fmt.Errorf("head pod: reading its key: %w", err)
	}
	if pub := strings.TrimSpace(string(res.Stdout)); res.ExitCode == 0 && pub != "" {
		return pub, nil
	}
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	block, err := gossh.MarshalPrivateKey(sk, "skygo head of a Kubernetes cluster")
	if err != nil {
		return "", err
	}
	spub, err := gossh.NewPublicKey(pk)
	if err != nil {
		return "", err
	}
	pub := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(spub)))
	files := map[string][]byte{headKey: pem.EncodeToMemory(block), headKey + ".pub": []byte(pub + "\n")}
	if err := provision.WriteSecretFiles(ctx, head, files); err != nil {
		return "", fmt.Errorf("head pod: giving it the cluster's key: %w", err)
	}
	return pub, nil
}

// serveAgentSSH authorizes the head's key on a worker, starts the
// worker agent's SSH server on the pod's address (idempotent) and returns
// the worker's host key for the head to pin.
func serveAgentSSH(ctx context.Context, r *Runner, n agentapi.Node, pub string) (string, error) {
	sky := provision.Quote(n.Sky)
	addr := net.JoinHostPort(n.IP, strconv.Itoa(agentSSHPort))
	hk, err := infra.NodeHostKey(ctx, r, pub, sky, sky+` agent ssh-serve --listen `+provision.Quote(addr)+` --detach`)
	if err != nil {
		return "", fmt.Errorf("pod %s: starting its agent's SSH server for the head: %w", r.pod, err)
	}
	return hk, nil
}

// schedulableCPUs is what a pod offers the agent's scheduler: SkyPilot
// gives Ray max(int(cpus), 1), so a pod asked for 0.2 CPUs still runs one
// default job (0.5 CPU) at a time, as it does there.
func schedulableCPUs(cpus float64) float64 {
	return max(math.Floor(cpus), 1)
}
