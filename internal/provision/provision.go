// Package provision holds the seams between the backend and every kind of
// infrastructure: a Provisioner creates, stops, starts and removes the nodes
// of a cluster, and a CommandRunner runs shell commands and copies files on
// one node. Local sandboxes, SSH hosts, batch allocations, pods and cloud
// VMs all implement these two interfaces, so the backend drives
// them the same way:
//
//	info, err := prov.Provision(ctx, provision.ClusterSpec{Name: "dev", NumNodes: 2})
//	var capErr *provision.CapacityError
//	if errors.As(err, &capErr) { /* block this candidate, ask the optimizer again */ }
//	runners, err := prov.Runners(info) // head first
//	res, err := runners[0].Run(ctx, provision.Quote("sky")+" agent status --json", provision.RunOptions{})
//
// Commands are shell strings. Build them with Quote / Join so that user
// values are never pasted into a command unquoted.
package provision

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"
)

// Result is what one finished command produced.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// RunOptions adjusts one Run. A zero value runs the command with no input
// and captures its output into the Result.
type RunOptions struct {
	// Stdin is fed to the command; nil means no input. Prefer stdin over
	// command-line arguments for secrets: arguments are visible in ps.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the output as it is produced
	// instead of it being captured into Result.
	Stdout io.Writer
	Stderr io.Writer
}

// RsyncOptions adjusts one Rsync.
type RsyncOptions struct {
	// Excludes are rsync-style patterns (as in .skyignore / .gitignore).
	Excludes []string
	// Delete removes files on the node that are absent locally. The default
	// is additive, like SkyPilot's workdir sync.
	Delete bool
}

// CommandRunner runs commands on one node. A non-zero exit code is not an
// error: err is for "could not run the command at all" (transport down,
// context cancelled), and callers read Result.ExitCode.
type CommandRunner interface {
	// Run runs cmd with bash on the node and waits for it.
	Run(ctx context.Context, cmd string, opts RunOptions) (Result, error)
	// Stream runs cmd and copies its output to stdout and stderr as it
	// arrives; it returns the command's exit code.
	Stream(ctx context.Context, cmd string, stdout, stderr io.Writer) (exitCode int, err error)
	// Upload copies one local file to remotePath ("~/" or a relative path
	// is under the node's home).
	Upload(ctx context.Context, localPath, remotePath string) error
	// Rsync copies the contents of localDir into remoteDir.
	Rsync(ctx context.Context, localDir, remoteDir string, opts RsyncOptions) error
	// NodeIP is the node's address on the cluster's internal network.
	NodeIP() string
	// Home is the home directory of the remote user on the node.
	Home() string
}

// Resources is what each node of a cluster must offer.
type Resources struct {
	// CPUs per node; 0 means "whatever the instance has".
	CPUs float64
	// MemoryGB per node; 0 means "whatever the instance has".
	MemoryGB float64
	// GPUs per node by accelerator name, e.g. {"A100": 8}.
	GPUs map[string]float64
	// InstanceType, when the infrastructure has named instance types.
	InstanceType string
}

// ClusterSpec is what the backend asks a Provisioner for.
type ClusterSpec struct {
	Name      string
	NumNodes  int
	Resources Resources
	Region    string
	Zone      string
	// Ports to open on the head node, where the kind opens ports.
	Ports []string
	// UseSpot asks for spot (preemptible) instances where there are any.
	UseSpot bool
	// DiskSizeGB and DiskTier size the OS disk of cloud VMs (0 / "": the
	// infrastructure's default).
	DiskSizeGB int
	DiskTier   string
	// Labels to put on the created resources where supported.
	Labels map[string]string
	// ZoneRequested is set when the task named the zone itself (a cloud
	// zone, a batch cluster's partition) rather than the optimizer choosing it:
	// there is no other zone to fail over to, so waiting is worth more.
	ZoneRequested bool
	// ImageID is the task's image_id ("docker:<image>" for a container);
	// empty means the infrastructure's default.
	ImageID string
	// Config is the task's `config:` overrides (api.TaskSpec.Config).
	Config map[string]any
	// Log, when set, receives warnings worth showing the user (options
	// dropped, defaults applied), one line each.
	Log io.Writer
	// Progress, when set, receives one-line launch-progress texts while
	// Provision waits (a batch allocation's pending reason); the managed
	// jobs controller shows the latest as the job's details.
	Progress func(text string)
	// Volumes are the task's volumes, for infrastructures whose nodes
	// take a volume only when they are made (a pod's spec lists its
	// claims); every infrastructure still gets AttachVolume afterwards,
	// where the others do their mounting.
	Volumes []Volume
}

// Volume is one volume a cluster's nodes mount, as a provisioner sees it.
type Volume struct {
	// Name is the volume's record name; Type its volume type (one of
	// infrakind.Kind.Volumes).
	Name string
	Type string
	// NameOnCloud is the object that holds the data (the claim name).
	NameOnCloud string
	// Path is the mount path as the task wrote it (absolute or ~/...),
	// SubPath a directory inside the volume mounted instead of its root.
	Path    string
	SubPath string
	// Config is the volume's config (host_path, storage_class_name,
	// access_mode, namespace, labels).
	Config map[string]any
	// Ephemeral volumes are made with the cluster and go with it; SizeGi
	// is their size.
	Ephemeral bool
	SizeGi    float64
}

// NodeInfo describes one provisioned node.
type NodeInfo struct {
	// Index is the node's position in the cluster; 0 is the head.
	Index int `json:"index"`
	// ID names the node on its infrastructure (instance id, pod name...).
	ID string `json:"id"`
	// InternalIP is the address other nodes of the cluster use.
	InternalIP string `json:"internal_ip"`
	// ExternalIP is the address the backend reaches, when different.
	ExternalIP string `json:"external_ip,omitempty"`
	// Home is the remote user's home directory on the node.
	Home string `json:"home"`
	// CPUs, MemoryGB and GPUs are what the node offers to jobs.
	CPUs     float64            `json:"cpus"`
	MemoryGB float64            `json:"memory_gb"`
	GPUs     map[string]float64 `json:"gpus,omitempty"`
	// AgentSSHPort, when set, is the port on InternalIP where the node
	// agent serves SSH for the node: infrastructures whose nodes have no
	// sshd of their own (the local one) set it.
	AgentSSHPort int `json:"agent_ssh_port,omitempty"`
	// NetNS, when set, names the network namespace of a node on this
	// machine (the local infrastructure's, when it gives each node its own
	// network); its processes run inside it.
	NetNS string `json:"netns,omitempty"`
}

// ClusterInfo is the result of a successful Provision or Start.
type ClusterInfo struct {
	Name string `json:"name"`
	// Cloud is the display name used in SKYPILOT_CLUSTER_INFO ("Local", "AWS", ...).
	Cloud  string `json:"cloud"`
	Region string `json:"region,omitempty"`
	Zone   string `json:"zone,omitempty"`
	// Nodes, head first, in the stable order that defines node ranks.
	Nodes []NodeInfo `json:"nodes"`
	// Meta holds what an infrastructure needs to reach the cluster again
	// and that fits no field above (a batch allocation's job id and shared
	// directory). Only that infrastructure reads it.
	Meta map[string]string `json:"meta,omitempty"`
}

// NodeStatus is the observed state of one node.
type NodeStatus string

// Node states reported by Query.
const (
	NodePending    NodeStatus = "PENDING"    // being created or queued
	NodeUp         NodeStatus = "UP"         // running
	NodeStopping   NodeStatus = "STOPPING"   // on its way to STOPPED
	NodeStopped    NodeStatus = "STOPPED"    // kept but not running
	NodeTerminated NodeStatus = "TERMINATED" // gone
)

// NodeState pairs a node with its observed status.
type NodeState struct {
	Index  int        `json:"index"`
	ID     string     `json:"id"`
	Status NodeStatus `json:"status"`
}

// Provisioner manages the nodes of clusters on one infrastructure. Every
// method is idempotent and safe to retry after a crash at any point:
// Provision of an existing cluster returns it, Stop of a stopped one and
// Terminate of a missing one succeed.
type Provisioner interface {
	// Provision creates (or adopts) the cluster's nodes and returns them.
	Provision(ctx context.Context, spec ClusterSpec) (*ClusterInfo, error)
	// Stop stops every process and node of the cluster, keeping its disks.
	Stop(ctx context.Context, name string) error
	// Start restarts a stopped cluster and returns its nodes.
	Start(ctx context.Context, name string) (*ClusterInfo, error)
	// Terminate removes everything the cluster owns.
	Terminate(ctx context.Context, name string) error
	// Query observes the cluster's nodes. A cluster that does not exist
	// yields an empty slice and no error.
	Query(ctx context.Context, name string) ([]NodeState, error)
	// Runners returns one CommandRunner per node, head first.
	Runners(info *ClusterInfo) ([]CommandRunner, error)
}

// Quote returns s as one shell word for bash, safe whatever s contains.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// Join quotes every word and joins them with spaces into one command.
func Join(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// QuoteHomePath quotes a path that may start with "~/" so that the shell
// still expands the home directory: "~/a b" becomes ~/'a b'.
func QuoteHomePath(p string) string {
	if p == "~" {
		return "~"
	}
	if strings.HasPrefix(p, "~/") {
		return "~/" + Quote(p[2:])
	}
	return Quote(p)
}

// SkyLocator is implemented by runners whose node runs its own copy of the
// sky binary (installed by an infrastructure's bootstrap) rather than the
// API server's: SkyCommand is the shell word that runs it there.
type SkyLocator interface {
	SkyCommand() string
}

// AgentCaller is implemented by runners whose node is this machine: the
// backend runs the node agent's short verbs (status, submit, queue, ...)
// in-process through it, the same answer as `sky agent <verb>` on the node
// without starting a shell and a sky process. handled false means the verb
// must go through Run as usual.
type AgentCaller interface {
	CallAgent(ctx context.Context, verb string, args []string, stdin []byte) (res Result, handled bool)
}

// RunChecked runs cmd on r, a nonzero exit being an error too ("exit N:
// <stderr>"); the result is returned either way, for its output.
func RunChecked(ctx context.Context, r CommandRunner, cmd string, opts RunOptions) (Result, error) {
	res, err := r.Run(ctx, cmd, opts)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return res, err
}

// WriteSecretFiles writes files (paths relative to the node's home) to
// the node through stdin, never a command line, with mode 0600 (umask
// 077 for the directories made), each replaced whole by a rename.
func WriteSecretFiles(ctx context.Context, r CommandRunner, files map[string][]byte) error {
	for rel, data := range files {
		dir := path.Dir(rel)
		cmd := "umask 077 && mkdir -p ~/" + Quote(dir) + " && cat > ~/" + Quote(rel) + ".skygo-tmp && mv ~/" +
			Quote(rel) + ".skygo-tmp ~/" + Quote(rel)
		res, err := r.Run(ctx, cmd, RunOptions{Stdin: bytes.NewReader(data)})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("writing ~/%s: exit %d: %s", rel, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// AuthorizeKeyCommand is the shell command that adds an authorized_keys
// line to the node user's ~/.ssh/authorized_keys once (a repeated launch
// adds nothing), with the modes sshd and the agent's SSH server demand.
func AuthorizeKeyCommand(publicKey string) string {
	q := Quote(strings.TrimSpace(publicKey))
	return `mkdir -p ~/.ssh && chmod 700 ~/.ssh && { grep -qxF ` + q + ` ~/.ssh/authorized_keys 2>/dev/null || echo ` + q +
		` >> ~/.ssh/authorized_keys; } && chmod 600 ~/.ssh/authorized_keys`
}

// HomePath resolves "~", "~/x" and relative paths against a node's home.
func HomePath(home, p string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return home + "/" + p[2:]
	case !strings.HasPrefix(p, "/"):
		return home + "/" + p
	}
	return p
}
