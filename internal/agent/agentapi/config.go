package agentapi

import (
	"errors"
	"fmt"

	"github.com/skygo/skygo/internal/provision"
)

// Config is what `sky agent start` reads on stdin: the cluster as the
// head sees it. The backend writes the same Config to every node, changing
// only NodeIndex.
type Config struct {
	ClusterName string `json:"cluster_name"`
	// Cloud, Region, Zone fill SKYPILOT_CLUSTER_INFO.
	Cloud  string `json:"cloud"`
	Region string `json:"region,omitempty"`
	Zone   string `json:"zone,omitempty"`
	// NodeIndex is the node this agent runs on; 0 is the head.
	NodeIndex int `json:"node_index"`
	// Nodes, head first; their order defines node ranks.
	Nodes []Node `json:"nodes"`
	// OnAutostop is a shell command the head daemon runs (detached, with
	// SKYGO_AUTOSTOP_ACTION=stop|down) when autostop fires; the backend
	// points it at `sky stop`/`sky down`. Empty: autostop only runs hooks
	// and records AUTOSTOPPING.
	OnAutostop string `json:"on_autostop,omitempty"`
}

// Node is one node of the cluster and how the head reaches it.
type Node struct {
	IP   string `json:"ip"`
	Home string `json:"home"`
	// Transport is how the head runs commands there: "local" (exec with
	// HOME=Home on this machine) or "ssh" (the system ssh client, see
	// internal/agent/transport_ssh.go). Others plug in via
	// agent.Transports.
	Transport string `json:"transport"`
	// Sky is the path of the node runtime (sky-node) on that node; for local nodes the
	// running binary is used when empty.
	Sky string `json:"sky,omitempty"`
	// SSHUser, SSHPort and SSHKey are how the head reaches the node with
	// transport "ssh" or "agent-ssh": the user and port to log in with and
	// the private key's path on the head.
	SSHUser string `json:"ssh_user,omitempty"`
	SSHPort int    `json:"ssh_port,omitempty"`
	SSHKey  string `json:"ssh_key,omitempty"`
	// SSHHostKey pins, for transport "agent-ssh", the node's SSH host key
	// (authorized_keys form, as `sky agent ssh-serve --print-host-key`
	// prints it): any other key is refused. Empty: the key is learnt on
	// first contact and kept in the head's ~/.sky/known_hosts.
	SSHHostKey string `json:"ssh_host_key,omitempty"`
	// CPUs and GPUs the node offers to jobs.
	CPUs float64            `json:"cpus"`
	GPUs map[string]float64 `json:"gpus,omitempty"`
	// AgentSSHPort, when set on a node of this machine (the head, or a
	// node with transport "local"), makes the head's daemon serve SSH for
	// that node on IP:AgentSSHPort, sessions running as the node's jobs do.
	AgentSSHPort int `json:"agent_ssh_port,omitempty"`
	// NetNS names the network namespace of a node with transport "local"
	// that has one (provision.NodeInfo.NetNS): the head starts the node's
	// commands, and listens for its SSH, inside it.
	NetNS string `json:"netns,omitempty"`
	// Options are what the node's transport needs beyond the fields
	// above, in its own words: the package that registers the transport
	// (an infrastructure's node package) owns the keys.
	Options map[string]string `json:"transport_options,omitempty"`
}

// Transports of Node: how the head reaches a node.
const (
	TransportLocal = "local" // exec with HOME=Home on this machine (the default)
	TransportSSH   = "ssh"   // the system ssh client
	// TransportAgentSSH is an SSH client inside the head's agent, dialling
	// the node's `sky agent ssh-serve` (nodes with neither ssh nor sshd,
	// such as containers). An infrastructure may register a transport of
	// its own (agent.Transports).
	TransportAgentSSH = "agent-ssh"
)

// ConfigFromCluster builds the Config of node index from a provisioned
// cluster; transport is how the head reaches the nodes ("local").
func ConfigFromCluster(info *provision.ClusterInfo, index int, transport string) Config {
	c := Config{ClusterName: info.Name, Cloud: info.Cloud, Region: info.Region, Zone: info.Zone, NodeIndex: index}
	for _, n := range info.Nodes {
		c.Nodes = append(c.Nodes, Node{IP: n.InternalIP, Home: n.Home, Transport: transport, CPUs: n.CPUs, GPUs: n.GPUs, AgentSSHPort: n.AgentSSHPort, NetNS: n.NetNS})
	}
	return c
}

// Validate says what is wrong with a config, if anything.
func (c *Config) Validate() error {
	if len(c.Nodes) == 0 {
		return errors.New("config: nodes is empty; list the cluster's nodes, head first")
	}
	if c.NodeIndex < 0 || c.NodeIndex >= len(c.Nodes) {
		return fmt.Errorf("config: node_index %d is outside nodes (0..%d)", c.NodeIndex, len(c.Nodes)-1)
	}
	for i, n := range c.Nodes {
		if n.CPUs <= 0 {
			return fmt.Errorf("config: nodes[%d].cpus must be positive", i)
		}
		if n.AgentSSHPort < 0 || n.AgentSSHPort > 65535 {
			return fmt.Errorf("config: nodes[%d].agent_ssh_port %d is not a TCP port", i, n.AgentSSHPort)
		}
		if len(n.GPUs) > 1 {
			return fmt.Errorf("config: nodes[%d].gpus lists %d accelerator types; a node has one", i, len(n.GPUs))
		}
	}
	return nil
}
