package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
	// transport_ssh.go). Others plug in via Transports.
	Transport string `json:"transport"`
	// Sky is the path of the sky binary on that node; for local nodes the
	// running binary is used when empty.
	Sky string `json:"sky,omitempty"`
	// SSHUser, SSHPort and SSHKey are how the head reaches the node with
	// transport "ssh": the user and port to log in with and the private
	// key's path on the head.
	SSHUser string `json:"ssh_user,omitempty"`
	SSHPort int    `json:"ssh_port,omitempty"`
	SSHKey  string `json:"ssh_key,omitempty"`
	// CPUs and GPUs the node offers to jobs.
	CPUs float64            `json:"cpus"`
	GPUs map[string]float64 `json:"gpus,omitempty"`
}

// ConfigFromCluster builds the Config of node index from a provisioned
// cluster; transport is how the head reaches the nodes ("local").
func ConfigFromCluster(info *provision.ClusterInfo, index int, transport string) Config {
	c := Config{ClusterName: info.Name, Cloud: info.Cloud, Region: info.Region, Zone: info.Zone, NodeIndex: index}
	for _, n := range info.Nodes {
		c.Nodes = append(c.Nodes, Node{IP: n.InternalIP, Home: n.Home, Transport: transport, CPUs: n.CPUs, GPUs: n.GPUs})
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
		if len(n.GPUs) > 1 {
			return fmt.Errorf("config: nodes[%d].gpus lists %d accelerator types; a node has one", i, len(n.GPUs))
		}
	}
	return nil
}

// capacity is the idle cluster in scheduler units.
func (c *Config) capacity() []NodeFree {
	out := make([]NodeFree, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i].MilliCPU = toMilli(n.CPUs)
		names := make([]string, 0, len(n.GPUs))
		for k := range n.GPUs {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			out[i].GPUName = name
			for d := 0; d < int(n.GPUs[name]); d++ {
				out[i].GPUs = append(out[i].GPUs, milli)
			}
		}
	}
	return out
}

// clusterInfoJSON is SKYPILOT_CLUSTER_INFO.
func (c *Config) clusterInfoJSON() string {
	b, _ := json.Marshal(map[string]any{"cluster_name": c.ClusterName, "cloud": c.Cloud, "region": nilIfEmpty(c.Region), "zone": nilIfEmpty(c.Zone)})
	return string(b)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// paths are the agent's files under a node HOME.
type paths struct {
	home string
}

func (p paths) dir() string         { return filepath.Join(p.home, ".sky", "agent") }
func (p paths) db() string          { return filepath.Join(p.dir(), "jobs.db") }
func (p paths) config() string      { return filepath.Join(p.dir(), "config.json") }
func (p paths) pidFile() string     { return filepath.Join(p.dir(), "daemon.pid") }
func (p paths) lockFile() string    { return filepath.Join(p.dir(), "daemon.lock") }
func (p paths) startLock() string   { return filepath.Join(p.dir(), "start.lock") }
func (p paths) daemonLog() string   { return filepath.Join(p.dir(), "daemon.log") }
func (p paths) autostopLog() string { return filepath.Join(p.dir(), "autostop.log") }
func (p paths) hookLog(event string) string {
	return filepath.Join(p.home, ".sky", "hooks", event+".log")
}
func (p paths) rankPid(job, rank int) string {
	return filepath.Join(p.dir(), "ranks", fmt.Sprintf("%d-%d.pid", job, rank))
}
func (p paths) logDir(runTS string) string { return filepath.Join(p.home, "sky_logs", runTS) }

// socket is the daemon's unix socket. Unix socket paths are limited to
// 108 bytes, so a deep HOME falls back to a per-user directory in /tmp
// keyed by a hash of HOME.
func (p paths) socket() string {
	s := filepath.Join(p.dir(), "agent.sock")
	if len(s) < 100 {
		return s
	}
	sum := sha256.Sum256([]byte(p.home))
	return filepath.Join(os.TempDir(), fmt.Sprintf("skygo-%d", os.Getuid()), hex.EncodeToString(sum[:8])+".sock")
}

// rankTag is put in the environment of every rank process; killing a rank
// kills every process carrying its tag, even ones that left the process
// group.
func rankTag(home string, job, rank int) string {
	return fmt.Sprintf("%s=%s:%d:%d", envRankTag, home, job, rank)
}

const envRankTag = "SKYGO_RANK_TAG"

func loadConfig(p paths) (*Config, error) {
	b, err := os.ReadFile(p.config())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errors.New("agent has no config on this node; run `sky agent start` with the cluster config on stdin")
		}
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("agent config %s is corrupt: %v", p.config(), err)
	}
	return &c, c.Validate()
}

func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func homeDir() (string, error) {
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("agent needs HOME: %w", err)
	}
	return strings.TrimSuffix(h, "/"), nil
}
