package ssh

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/resources"
)

// HostFacts is what Probe learns about a host.
type HostFacts struct {
	OS       string         `json:"os"`   // uname -s, lower-case: "linux"
	Arch     string         `json:"arch"` // Go-style: "amd64", "arm64"
	CPUs     int            `json:"cpus"`
	MemoryGB float64        `json:"memory_gb"`
	GPUs     map[string]int `json:"gpus,omitempty"` // from nvidia-smi, when present
	Home     string         `json:"home"`
	// IP is the host's own address of the connection we came in on
	// ($SSH_CONNECTION), i.e. its real address even when the pool names it
	// by alias.
	IP string `json:"ip"`
}

// probeScript prints one fact per line, in a fixed order, then the GPU
// names one per line.
const probeScript = `uname -s; uname -m; nproc 2>/dev/null || getconf _NPROCESSORS_ONLN; ` +
	`awk '/^MemTotal:/{print $2}' /proc/meminfo 2>/dev/null || echo 0; printf '%s\n' "$HOME"; ` +
	`set -- $SSH_CONNECTION; printf '%s\n' "$3"; ` +
	`if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null; fi; true`

// Probe connects to ep and reports its OS, architecture, CPUs, memory and
// GPUs. Errors name the host and the cause (a *DialError for unreachable,
// timeout and auth failures).
func (d *Dialer) Probe(ctx context.Context, ep Endpoint) (HostFacts, error) {
	r := NewRunner(d, ep, "", "", "")
	res, err := r.Run(ctx, probeScript, provision.RunOptions{})
	if err != nil {
		return HostFacts{}, err
	}
	if res.ExitCode != 0 {
		return HostFacts{}, fmt.Errorf("probing %s: exit %d: %s", ep, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	f, err := parseFacts(string(res.Stdout))
	if err != nil {
		return HostFacts{}, fmt.Errorf("probing %s: %w", ep, err)
	}
	if f.IP == "" {
		f.IP = ep.Addr
	}
	return f, nil
}

func parseFacts(out string) (HostFacts, error) {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 6 {
		return HostFacts{}, fmt.Errorf("unexpected probe output %q", out)
	}
	f := HostFacts{OS: strings.ToLower(strings.TrimSpace(lines[0])), Arch: goArch(strings.TrimSpace(lines[1]))}
	cpus, err := strconv.Atoi(strings.TrimSpace(lines[2]))
	if err != nil {
		return HostFacts{}, fmt.Errorf("CPU count %q is not a number", lines[2])
	}
	f.CPUs = cpus
	kb, err := strconv.ParseFloat(strings.TrimSpace(lines[3]), 64)
	if err != nil {
		return HostFacts{}, fmt.Errorf("memory size %q is not a number", lines[3])
	}
	f.MemoryGB = float64(int(kb/(1024*1024)*10)) / 10 // one decimal, rounded down
	f.Home = strings.TrimSpace(lines[4])
	f.IP = strings.TrimSpace(lines[5])
	for _, l := range lines[6:] {
		if name := resources.GPUName(l); name != "" {
			if f.GPUs == nil {
				f.GPUs = map[string]int{}
			}
			f.GPUs[name]++
		}
	}
	return f, nil
}

// goArch is the GOARCH of a `uname -m`, or the name itself when SkyGo has
// no node runtime for it (EnsureBinary then says so).
func goArch(uname string) string {
	if a, err := infra.NodeArch(uname); err == nil {
		return a
	}
	return uname
}
