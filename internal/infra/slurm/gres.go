package slurm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/provision"
)

// GRES is one GPU entry of a node's generic resources.
type GRES struct {
	Type  string // "" if untyped (gpu:8)
	Count int
}

// ParseGRES reads the GPU entries of a GRES string such as "gpu:8",
// "gpu:H100:8", "gpu:nvidia_h100_80gb_hbm3:8(S:0-1)" or a comma list of
// them. Other resources (shard, mps, ...) and "(null)" yield nothing.
// GresUsed strings ("gpu:fake:2(IDX:0-1)") parse the same way.
func ParseGRES(s string) []GRES {
	var out []GRES
	for _, item := range splitTopLevel(strings.TrimSpace(s)) {
		if i := strings.IndexByte(item, '('); i >= 0 {
			item = item[:i]
		}
		f := strings.Split(strings.TrimSpace(item), ":")
		if f[0] != "gpu" {
			continue
		}
		g := GRES{Count: 1} // a bare "gpu" is one GPU
		switch len(f) {
		case 1:
		case 2:
			if n, ok := gresCount(f[1]); ok {
				g.Count = n
			} else {
				g.Type = f[1]
			}
		case 3:
			n, ok := gresCount(f[2])
			if !ok {
				continue
			}
			g.Type, g.Count = f[1], n
		default:
			continue
		}
		out = append(out, g)
	}
	return out
}

// gresCount reads a GRES count, with Slurm's k/m/g multipliers.
func gresCount(s string) (int, bool) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "g"), strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n * mult, true
}

// splitTopLevel splits at commas outside parentheses ("(S:0,1)" stays whole).
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// GPUs returns the node's GPU count of one raw type ("" = all GPUs,
// typed or not).
func (n Node) GPUs(rawType string) int {
	total := 0
	for _, g := range n.GRES {
		if rawType == "" || g.Type == rawType {
			total += g.Count
		}
	}
	return total
}

// vendorPrefixes are stripped from GPU names before comparing them.
var vendorPrefixes = []string{"nvidia", "amd", "intel", "tesla"}

// normaliseGPU lower-cases, turns `_` into `-` and strips leading vendor
// words: nvidia_h100_80gb_hbm3 -> h100-80gb-hbm3, Tesla-V100 -> v100.
func normaliseGPU(s string) string {
	s = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	s = strings.ReplaceAll(s, " ", "-")
	for again := true; again; {
		again = false
		for _, v := range vendorPrefixes {
			if strings.HasPrefix(s, v+"-") {
				s, again = s[len(v)+1:], true
			}
		}
	}
	return s
}

// segmentsWithin reports whether the `-` segments of a are an ordered
// subsequence of those of b (whole segments: l4 is not within l40).
func segmentsWithin(a, b []string) bool {
	i := 0
	for _, seg := range b {
		if i < len(a) && a[i] == seg {
			i++
		}
	}
	return i == len(a)
}

// gpuNameMatch applies the spec's three rules: equal ignoring case, equal
// after normalisation, or the shorter name's segments an ordered
// subsequence of the longer's. exact is true for the first rule.
func gpuNameMatch(requested, raw string) (match, exact bool) {
	if raw == "" {
		return false, false
	}
	if strings.EqualFold(requested, raw) {
		return true, true
	}
	a, b := normaliseGPU(requested), normaliseGPU(raw)
	if a == b {
		return true, false
	}
	as, bs := strings.Split(a, "-"), strings.Split(b, "-")
	if len(as) > len(bs) {
		as, bs = bs, as
	}
	return segmentsWithin(as, bs), false
}

// MatchGPU resolves a requested GPU name to the raw GRES type of the
// cluster to put in --gres. nodes is the cluster's inventory; only nodes of
// partition (all nodes when "") with at least count GPUs of a type count.
// Among matching types: an exact (case-insensitive) match first, then the
// type present on most nodes, then the lexicographically first. No match
// is a *provision.CapacityError carrying the spec's message, which names
// the GPU types found on the cluster.
func MatchGPU(requested string, nodes []Node, count int, cluster, partition string) (rawType string, err error) {
	type cand struct {
		raw   string
		exact bool
		nodes int
	}
	byType := map[string]*cand{}
	for _, n := range nodes {
		if partition != "" && !n.InPartition(partition) {
			continue
		}
		for _, raw := range nodeTypes(n) {
			if n.GPUs(raw) < count {
				continue
			}
			ok, exact := gpuNameMatch(requested, raw)
			if !ok {
				continue
			}
			c := byType[raw]
			if c == nil {
				c = &cand{raw: raw, exact: exact}
				byType[raw] = c
			}
			c.nodes++
		}
	}
	if len(byType) == 0 {
		return "", noGPUError(requested, nodes, count, cluster, partition)
	}
	cands := make([]*cand, 0, len(byType))
	for _, c := range byType {
		cands = append(cands, c)
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.exact != b.exact {
			return a.exact
		}
		if a.nodes != b.nodes {
			return a.nodes > b.nodes
		}
		return a.raw < b.raw
	})
	return cands[0].raw, nil
}

// nodeTypes lists a node's distinct typed GRES types.
func nodeTypes(n Node) []string {
	var out []string
	for _, g := range n.GRES {
		if g.Type != "" && !contains(out, g.Type) {
			out = append(out, g.Type)
		}
	}
	return out
}

func noGPUError(requested string, nodes []Node, count int, cluster, partition string) error {
	msg := fmt.Sprintf("No GPU nodes matching '%s' (count>=%d) found on Slurm cluster '%s'", requested, count, cluster)
	if partition != "" {
		msg += fmt.Sprintf(" in partition '%s'", partition)
	}
	msg += "."
	found := DiscoveredGPUTypes(nodes)
	if len(found) == 0 {
		msg += " No GPU nodes found on cluster."
	} else {
		q := make([]string, len(found))
		for i, t := range found {
			q[i] = "'" + t + "'"
		}
		msg += " Discovered GPU types on cluster: [" + strings.Join(q, ", ") + "]"
	}
	where := "slurm/" + cluster
	if partition != "" {
		where += "/" + partition
	}
	return &provision.CapacityError{Where: where, Msg: msg}
}

// DiscoveredGPUTypes lists the raw GPU types of all nodes, sorted; untyped
// GRES shows as "gpu".
func DiscoveredGPUTypes(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		for _, g := range n.GRES {
			t := g.Type
			if t == "" {
				t = "gpu"
			}
			if !contains(out, t) {
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	return out
}

// knownGPUs are SkyPilot's accelerator names that Slurm GRES types are
// canonicalised to for listings. Longer names must win over their
// prefixes (H100-80GB over H100); CanonicalGPU picks the longest match.
var knownGPUs = []string{
	"A100-80GB", "A100", "A10G", "A10", "A16", "A30", "A40", "A2",
	"H100-80GB", "H100-MEGA", "H100-NVL", "H100", "H200", "GH200",
	"B100", "B200", "GB200", "B300", "GB300",
	"L40S", "L40", "L4", "T4", "T4G", "P100", "P40", "P4", "K80", "M60",
	"V100-32GB", "V100",
	"RTX3060", "RTX3080", "RTX3090", "RTX4080", "RTX4090", "RTX5090",
	"RTXA4000", "RTXA5000", "RTXA6000", "RTX6000", "RTXPRO6000",
	"A4000", "A5000", "A6000",
	"MI100", "MI210", "MI250", "MI250X", "MI300A", "MI300X", "MI325X", "MI355X",
	"Gaudi", "Gaudi2", "Gaudi3",
}

// CanonicalGPU names a raw GRES type for listings: the longest known
// accelerator name whose segments appear in order in the normalised type
// (or whose letters equal a run of its segments, for RTX-style names),
// e.g. nvidia_h100_80gb_hbm3 -> H100-80GB; "" (untyped) -> GPU; unknown
// types are upper-cased.
func CanonicalGPU(raw string) string {
	if raw == "" {
		return "GPU"
	}
	segs := strings.Split(normaliseGPU(raw), "-")
	best := ""
	for _, k := range knownGPUs {
		ks := strings.Split(strings.ToLower(k), "-")
		if segmentsWithin(ks, segs) || runJoins(segs, strings.Join(ks, "")) {
			if len(k) > len(best) {
				best = k
			}
		}
	}
	if best != "" {
		return best
	}
	return strings.ToUpper(raw)
}

// runJoins reports whether some contiguous run of segs, concatenated,
// equals want ("geforce-rtx-4090" holds rtx4090).
func runJoins(segs []string, want string) bool {
	for i := range segs {
		s := ""
		for j := i; j < len(segs) && len(s) < len(want); j++ {
			s += segs[j]
			if s == want {
				return true
			}
		}
	}
	return false
}

// SinfoGresUsedFormat is the -O format ParseGresUsed reads, for
// `sinfo -h --Node -O <format>`: node name and GresUsed, separated by the
// unit separator (raw 0x1f bytes; pass it single-quoted).
const SinfoGresUsedFormat = "NodeList:\x1f,GresUsed:"

// ParseGresUsed parses `sinfo -h --Node -O SinfoGresUsedFormat` into node
// name -> GPUs in use (GresUsed, e.g. "gpu:fake:2(IDX:0-1)").
func ParseGresUsed(out string) (map[string][]GRES, error) {
	used := map[string][]GRES{}
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, gres, ok := strings.Cut(line, "\x1f")
		if !ok {
			return nil, fmt.Errorf("sinfo GresUsed: line %d has no separator: %q", i+1, clip(line))
		}
		used[strings.TrimSpace(name)] = ParseGRES(strings.TrimSpace(gres))
	}
	return used, nil
}

// GPUAvailability is one row of `sky gpus list --infra slurm`: a GPU type
// in a partition, with GPUs free and in total over its usable nodes.
type GPUAvailability struct {
	Partition string
	Name      string // CanonicalGPU of the raw type
	RawType   string
	Free      int
	Total     int
	// Counts are the per-node request sizes that fit on some node
	// (1, 2, 4, ... up to the largest node), as the listing shows them.
	Counts []int
}

// GPUAvailabilityByPartition totals each partition's GPUs by type. used
// is ParseGresUsed's result (nil = nothing known to be in use). Nodes that
// cannot take jobs (Node.Usable) count neither as free nor in the total.
func GPUAvailabilityByPartition(nodes []Node, used map[string][]GRES) []GPUAvailability {
	type key struct{ part, raw string }
	rows := map[key]*GPUAvailability{}
	maxPerNode := map[key]int{}
	for _, n := range nodes {
		if ok, _ := n.Usable(); !ok {
			continue
		}
		for _, raw := range gpuTypesOf(n) {
			total := n.GPUs(raw)
			inUse := 0
			for _, g := range used[n.Name] {
				if g.Type == raw {
					inUse += g.Count
				}
			}
			free := max(total-inUse, 0)
			for _, p := range n.Partitions {
				k := key{p, raw}
				r := rows[k]
				if r == nil {
					r = &GPUAvailability{Partition: p, Name: CanonicalGPU(raw), RawType: raw}
					rows[k] = r
				}
				r.Total += total
				r.Free += free
				maxPerNode[k] = max(maxPerNode[k], total)
			}
		}
	}
	out := make([]GPUAvailability, 0, len(rows))
	for k, r := range rows {
		for c := 1; c <= maxPerNode[k]; c *= 2 {
			r.Counts = append(r.Counts, c)
		}
		if m := maxPerNode[k]; m > 0 && !containsInt(r.Counts, m) {
			r.Counts = append(r.Counts, m)
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// gpuTypesOf lists a node's distinct GPU types, "" for untyped GRES.
func gpuTypesOf(n Node) []string {
	var out []string
	for _, g := range n.GRES {
		if !contains(out, g.Type) {
			out = append(out, g.Type)
		}
	}
	return out
}

func containsInt(list []int, v int) bool {
	for _, e := range list {
		if e == v {
			return true
		}
	}
	return false
}
