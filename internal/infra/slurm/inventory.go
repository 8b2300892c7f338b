package slurm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Partition is one line of `scontrol show partitions -o`.
type Partition struct {
	Name    string
	Default bool
	// MaxTime and DefaultTime are raw: UNLIMITED, INFINITE, NONE,
	// 1-00:00:00, 04:00:00, ...
	MaxTime, DefaultTime string
	Nodes                string // hostlist expression, e.g. tihost[1-3]
	State                string // UP, DOWN, DRAIN, INACTIVE
}

// ParsePartitions parses `scontrol show partitions -o`, ordered default
// partition first, then alphabetically (the failover order).
func ParsePartitions(out string) ([]Partition, error) {
	var parts []Partition
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := parseKeyValues(line)
		name, ok := f["PartitionName"]
		if !ok || name == "" {
			return nil, fmt.Errorf("scontrol show partitions: line %d has no PartitionName: %q", i+1, clip(line))
		}
		parts = append(parts, Partition{
			Name:        name,
			Default:     strings.EqualFold(f["Default"], "YES"),
			MaxTime:     f["MaxTime"],
			DefaultTime: f["DefaultTime"],
			Nodes:       f["Nodes"],
			State:       f["State"],
		})
	}
	sort.SliceStable(parts, func(i, j int) bool {
		if parts[i].Default != parts[j].Default {
			return parts[i].Default
		}
		return parts[i].Name < parts[j].Name
	})
	return parts, nil
}

// Up reports whether jobs can start in the partition (State=UP; an empty
// state, from output that lacks the field, counts as up).
func (p Partition) Up() bool { return p.State == "" || strings.EqualFold(p.State, "UP") }

// Unavailable is why no job can start in the partition now ("" when it
// is up): DOWN, DRAIN and INACTIVE partitions queue or refuse jobs.
func (p Partition) Unavailable(cluster string) string {
	if p.Up() {
		return ""
	}
	return fmt.Sprintf("Partition '%s' of Slurm cluster '%s' is %s.", p.Name, cluster, p.State)
}

// Node is one compute node from sinfo, merged over its partitions.
type Node struct {
	Name       string
	State      string // sinfo's compact state with its suffix, e.g. idle, mix, drain, down*
	GRES       []GRES
	CPUs       int
	MemoryMB   int
	Partitions []string
}

// SinfoNodeFormat is the -o format ParseSinfoNodes reads: node, state,
// GRES, CPUs, memory, partition, separated by the unit separator (a byte
// no field contains). Pass it to sinfo single-quoted; it holds raw 0x1f
// bytes, not a `\x1f` escape.
const SinfoNodeFormat = "%N\x1f%t\x1f%G\x1f%c\x1f%m\x1f%P"

// ParseSinfoNodes parses `sinfo -h --Node -o SinfoNodeFormat`: one line
// per node and partition, merged into one Node each (first-seen order);
// the `*` that marks the default partition is stripped. Lines separated
// by a literal `\x1f` (a format that reached sinfo unexpanded) or by `|`
// are read too.
func ParseSinfoNodes(out string) ([]Node, error) {
	var nodes []Node
	index := map[string]int{}
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		sep := "\x1f"
		switch {
		case strings.Contains(line, "\x1f"):
		case strings.Contains(line, `\x1f`):
			sep = `\x1f`
		default:
			sep = "|"
		}
		f := strings.Split(line, sep)
		if len(f) != 6 {
			return nil, fmt.Errorf("sinfo: line %d has %d fields, want 6 (node, state, GRES, CPUs, memory, partition): %q", i+1, len(f), clip(line))
		}
		for j := range f {
			f[j] = strings.TrimSpace(f[j])
		}
		cpus, err := sinfoCount(f[3])
		if err != nil {
			return nil, fmt.Errorf("sinfo: line %d: CPUs %q: %v", i+1, f[3], err)
		}
		mem, err := sinfoCount(f[4])
		if err != nil {
			return nil, fmt.Errorf("sinfo: line %d: memory %q: %v", i+1, f[4], err)
		}
		part := strings.TrimSuffix(f[5], "*")
		if k, ok := index[f[0]]; ok {
			n := &nodes[k]
			if part != "" && !contains(n.Partitions, part) {
				n.Partitions = append(n.Partitions, part)
			}
			continue
		}
		n := Node{Name: f[0], State: f[1], GRES: ParseGRES(f[2]), CPUs: cpus, MemoryMB: mem}
		if part != "" {
			n.Partitions = []string{part}
		}
		index[n.Name] = len(nodes)
		nodes = append(nodes, n)
	}
	// sinfo's line order varies between calls.
	for i := range nodes {
		sort.Strings(nodes[i].Partitions)
	}
	return nodes, nil
}

// sinfoCount reads a CPU or memory figure; sinfo appends `+` when a
// group's nodes differ, and the smallest figure is what every node has.
func sinfoCount(s string) (int, error) {
	s = strings.TrimSuffix(s, "+")
	if s == "" || s == "N/A" {
		return 0, nil
	}
	return strconv.Atoi(s)
}

// InPartition reports whether the node belongs to partition p.
func (n Node) InPartition(p string) bool { return contains(n.Partitions, p) }

// Usable says whether the node can take a new job, and if not, why
// (e.g. "drained", "not responding"). Busy, reserved or maintained nodes
// (alloc, mix, comp, resv, maint) are usable: a job waits for them.
// Powered-down power-saving nodes (`~`, `%`) are usable: Slurm boots them
// for the job.
func (n Node) Usable() (ok bool, why string) { return StateUsable(n.State) }

// StateUsable judges an sinfo state (compact %t or long %T form, with or
// without a suffix, `+`-joined flags allowed).
func StateUsable(state string) (bool, string) {
	s := strings.ToLower(strings.TrimSpace(state))
	base := strings.TrimRight(s, "*~#!%$@^-")
	suffix := s[len(base):]
	for _, word := range strings.Split(base, "+") {
		if why, bad := unusableStates[word]; bad {
			return false, why
		}
	}
	if strings.Contains(suffix, "*") {
		return false, "not responding"
	}
	return true, ""
}

// unusableStates are the base states in which Slurm will not start a new
// job on the node (short and long spellings).
var unusableStates = map[string]string{
	"down":     "down",
	"drain":    "drained",
	"drained":  "drained",
	"drng":     "draining",
	"draining": "draining",
	"fail":     "failed",
	"failg":    "failing",
	"failing":  "failing",
	"futr":     "not yet in service (future)",
	"future":   "not yet in service (future)",
	"inval":    "invalid configuration",
	"unk":      "state unknown",
	"unknown":  "state unknown",
}

// NodeInfo is the part of one `scontrol show node -o` line SkyGo uses.
type NodeInfo struct {
	Name, Addr, HostName, State, Reason string
	Partitions                          []string
}

// ParseNodeInfo parses `scontrol show node -o` (one node per line).
func ParseNodeInfo(out string) []NodeInfo {
	var nodes []NodeInfo
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "NodeName=") {
			continue
		}
		f := parseKeyValues(line)
		n := NodeInfo{Name: f["NodeName"], Addr: f["NodeAddr"], HostName: f["NodeHostName"], State: f["State"], Reason: f["Reason"]}
		if p := f["Partitions"]; p != "" && p != "(null)" {
			n.Partitions = strings.Split(p, ",")
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// ParseNodeAddrs parses `scontrol show node -o` into NodeName -> NodeAddr
// (the node's internal address; a hostname there still needs resolving).
func ParseNodeAddrs(out string) map[string]string {
	addrs := map[string]string{}
	for _, n := range ParseNodeInfo(out) {
		if n.Name == "" {
			continue
		}
		addr := n.Addr
		if addr == "" {
			addr = n.Name // Slurm's default NodeAddr is the NodeName
		}
		addrs[n.Name] = addr
	}
	return addrs
}

// SelectMemory reports whether `scontrol show config` has memory as a
// consumable resource (SelectTypeParameters such as CR_CPU_MEMORY or
// CR_Core_Memory). Without it --mem only fails jobs, so it is omitted.
func SelectMemory(showConfig string) bool {
	for _, line := range strings.Split(showConfig, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "SelectTypeParameters" {
			continue
		}
		return strings.Contains(strings.ToUpper(v), "MEMORY")
	}
	return false
}

// ProctrackType is ProctrackType from `scontrol show config`, e.g.
// proctrack/linuxproc; "" if absent.
func ProctrackType(showConfig string) string {
	for _, line := range strings.Split(showConfig, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "ProctrackType" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// parseKeyValues splits one `scontrol ... -o` line into Key=Value fields.
// Values may hold spaces (OS=Linux 6.1 #1 SMP, Reason=Not responding): a
// word without `=` belongs to the value before it.
func parseKeyValues(line string) map[string]string {
	f := map[string]string{}
	last := ""
	for _, w := range strings.Fields(line) {
		k, v, ok := strings.Cut(w, "=")
		if ok && k != "" && !strings.ContainsAny(k, "[](),:") {
			f[k] = v
			last = k
			continue
		}
		if last != "" {
			f[last] += " " + w
		}
	}
	return f
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
