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

	"github.com/skygo/skygo/internal/agent/agentapi"
)

// capacityOf is the idle cluster in scheduler units.
func capacityOf(c *agentapi.Config) []NodeFree {
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
func clusterInfoJSON(c *agentapi.Config) string {
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

func (p paths) dir() string       { return filepath.Join(p.home, ".sky", "agent") }
func (p paths) db() string        { return filepath.Join(p.dir(), "jobs.db") }
func (p paths) config() string    { return filepath.Join(p.dir(), "config.json") }
func (p paths) pidFile() string   { return filepath.Join(p.dir(), "daemon.pid") }
func (p paths) lockFile() string  { return filepath.Join(p.dir(), "daemon.lock") }
func (p paths) startLock() string { return filepath.Join(p.dir(), "start.lock") }
func (p paths) daemonLog() string { return filepath.Join(p.dir(), "daemon.log") }

// supervised, when present, says that something lasting on the node (a
// batch system's job script) starts the daemon once the config is
// there: `start` then waits for it instead of spawning one, whose process
// would belong to the short-lived step that ran `start`.
func (p paths) supervised() string  { return filepath.Join(p.dir(), "supervised") }
func (p paths) autostopLog() string { return filepath.Join(p.dir(), "autostop.log") }
func (p paths) hookLog(event string) string {
	return filepath.Join(p.home, ".sky", "hooks", event+".log")
}
func (p paths) rankPid(job, rank int) string {
	return filepath.Join(p.dir(), "ranks", fmt.Sprintf("%d-%d.pid", job, rank))
}
func (p paths) scriptsDir() string         { return filepath.Join(p.dir(), "scripts") }
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

func loadConfig(p paths) (*agentapi.Config, error) {
	b, err := os.ReadFile(p.config())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errors.New("agent has no config on this node; run `sky agent start` with the cluster config on stdin")
		}
		return nil, err
	}
	var c agentapi.Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("agent config %s is corrupt: %v", p.config(), err)
	}
	return &c, c.Validate()
}

// writeFileAtomic replaces path with b: readers see the old file or the
// new one, whole. Concurrent writers each use a temporary file of their
// own (one shared name would let one writer's rename move another's file
// away), and the last rename wins.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := writeTemp(path, b, mode)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes b to a new file beside path, with mode, and returns its
// name.
func writeTemp(path string, b []byte, mode os.FileMode) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// homeOr is home when set, else this process's HOME.
func homeOr(home string) (string, error) {
	if home != "" {
		return strings.TrimSuffix(home, "/"), nil
	}
	return homeDir()
}

func homeDir() (string, error) {
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("agent needs HOME: %w", err)
	}
	return strings.TrimSuffix(h, "/"), nil
}
