package slurm

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/provision"
)

// Request is what one node of a cluster needs.
type Request struct {
	CPUs, MemoryGB float64
	// MemorySet says MemoryGB was given (or decided): 0 then means "do not
	// reserve memory, omit --mem" rather than "use the default".
	MemorySet bool
	GPU       string
	GPUCount  int
	// NumNodes is how many nodes must fit (0 is taken as 1).
	NumNodes int
}

// DefaultSizes fills the fields the user left unset: 2 CPUs and 1 GB per
// CPU; with GPUs, 4 CPUs per GPU and 4 GB per CPU.
func DefaultSizes(req Request) Request {
	if req.CPUs <= 0 {
		if req.GPUCount > 0 {
			req.CPUs = float64(4 * req.GPUCount)
		} else {
			req.CPUs = 2
		}
	}
	if req.MemoryGB > 0 {
		req.MemorySet = true
	}
	if !req.MemorySet {
		perCPU := 1.0
		if req.GPUCount > 0 {
			perCPU = 4
		}
		req.MemoryGB = req.CPUs * perCPU
		req.MemorySet = true
	}
	return req
}

// DefaultSizesOnCluster is DefaultSizes for a cluster whose
// SelectTypeParameters may lack MEMORY (selectMemory false): memory is then
// not a schedulable resource, so an unrequested memory size becomes 0
// (no --mem) and the returned warning says so.
func DefaultSizesOnCluster(req Request, selectMemory bool, cluster string) (Request, string) {
	warning := ""
	if !selectMemory && !req.MemorySet {
		req.MemoryGB, req.MemorySet = 0, true
		warning = fmt.Sprintf("Slurm cluster '%s' does not schedule memory (SelectTypeParameters lacks MEMORY); submitting without --mem.", cluster)
	}
	return DefaultSizes(req), warning
}

// Gres is the --gres value for the request: "gpu:<raw>:<n>", "gpu:<n>" for
// an untyped request (rawType ""), "" without GPUs.
func Gres(rawType string, n int) string {
	if n <= 0 {
		return ""
	}
	if rawType == "" {
		return "gpu:" + strconv.Itoa(n)
	}
	return "gpu:" + rawType + ":" + strconv.Itoa(n)
}

// Fit judges one partition of a cluster for req. nodes is the cluster's
// inventory (ParseSinfoNodes). It returns the nodes of the partition that
// can each hold req, the --gres value, and, when the partition cannot take
// the request, a one-line reason for the user (reason == "" means it fits).
// GPU requests are limited to gpu_partition_map's partitions when the map
// names the GPU (and then ask for untyped --gres=gpu:<n>); CPU-only ones
// to cpu_partition when set.
func Fit(nodes []Node, partition string, req Request, s Settings) (fitting []Node, gres string, reason string) {
	where := fmt.Sprintf("partition '%s' of Slurm cluster '%s'", partition, s.Cluster)
	rawType, mapped := "", false
	if req.GPUCount > 0 {
		if parts, ok := s.GPUPartitions(req.GPU); ok {
			if !contains(parts, partition) {
				return nil, "", fmt.Sprintf("%s is not in slurm gpu_partition_map for %s (%s).", capitalise(where), req.GPU, strings.Join(parts, ", "))
			}
			mapped = true
		}
	} else if len(s.CPUPartition) > 0 && !contains(s.CPUPartition, partition) {
		return nil, "", fmt.Sprintf("%s is not the slurm cpu_partition (%s) for CPU-only tasks.", capitalise(where), strings.Join(s.CPUPartition, ", "))
	}

	var inPart []Node
	for _, n := range nodes {
		if n.InPartition(partition) {
			inPart = append(inPart, n)
		}
	}
	if len(inPart) == 0 {
		return nil, "", capitalise(where) + " has no nodes."
	}
	if req.GPUCount > 0 {
		if mapped {
			gres = Gres("", req.GPUCount)
		} else {
			t, err := MatchGPU(req.GPU, nodes, req.GPUCount, s.Cluster, partition)
			if err != nil {
				return nil, "", matchMessage(err)
			}
			rawType = t
			gres = Gres(t, req.GPUCount)
		}
	}

	// Each node is charged to the first check it fails (state, GPUs, CPUs,
	// memory), so the reason counts every node once; "largest" is among
	// the nodes that failed that check.
	var unusable []string
	var fewCPUs, littleMem, fewGPUs, maxCPUs, maxMemMB, maxGPUs int
	memMB := int(req.MemoryGB * 1024)
	for _, n := range inPart {
		if ok, why := n.Usable(); !ok {
			unusable = append(unusable, n.Name+": "+why)
			continue
		}
		if have := n.GPUs(rawType); req.GPUCount > 0 && have < req.GPUCount { // rawType "" (map hit) counts every GPU
			fewGPUs++
			maxGPUs = max(maxGPUs, have)
			continue
		}
		if float64(n.CPUs) < req.CPUs {
			fewCPUs++
			maxCPUs = max(maxCPUs, n.CPUs)
			continue
		}
		if req.MemoryGB > 0 && n.MemoryMB < memMB {
			littleMem++
			maxMemMB = max(maxMemMB, n.MemoryMB)
			continue
		}
		fitting = append(fitting, n)
	}
	need := req.NumNodes
	if need < 1 {
		need = 1
	}
	if len(fitting) >= need {
		return fitting, gres, ""
	}

	var why []string
	if len(unusable) > 0 {
		sort.Strings(unusable)
		shown := unusable
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(unusable)-5))
		}
		why = append(why, fmt.Sprintf("%s cannot take jobs (%s)", nodeCount(len(unusable)), strings.Join(shown, ", ")))
	}
	if fewGPUs > 0 {
		name := req.GPU
		if rawType != "" {
			name = rawType
		}
		why = append(why, fmt.Sprintf("%s %s fewer than %d %s GPUs (largest: %d)", nodeCount(fewGPUs), have(fewGPUs), req.GPUCount, name, maxGPUs))
	}
	if fewCPUs > 0 {
		why = append(why, fmt.Sprintf("%s %s fewer than %s CPUs (largest: %d)", nodeCount(fewCPUs), have(fewCPUs), formatFigure(req.CPUs), maxCPUs))
	}
	if littleMem > 0 {
		why = append(why, fmt.Sprintf("%s %s less than %s GB of memory (largest: %s GB)", nodeCount(littleMem), have(littleMem), formatFigure(req.MemoryGB), formatFigure(float64(maxMemMB)/1024)))
	}
	detail := ""
	if len(why) > 0 {
		detail = ": " + strings.Join(why, "; ")
	}
	want := describeRequest(req)
	if need > 1 {
		return fitting, gres, fmt.Sprintf("%s has %d of the %d nodes needed that fit %s%s.", capitalise(where), len(fitting), need, want, detail)
	}
	return nil, gres, fmt.Sprintf("No node in %s fits %s%s.", where, want, detail)
}

// matchMessage is the spec's text of a MatchGPU error, without the
// "no capacity on ..." prefix of the error type.
func matchMessage(err error) string {
	var ce *provision.CapacityError
	if errors.As(err, &ce) {
		return ce.Msg
	}
	return err.Error()
}

func describeRequest(req Request) string {
	s := formatFigure(req.CPUs) + " CPUs"
	if req.CPUs == 1 {
		s = "1 CPU"
	}
	if req.MemoryGB > 0 {
		s += ", " + formatFigure(req.MemoryGB) + " GB memory"
	}
	if req.GPUCount > 0 {
		s += fmt.Sprintf(", %s:%d", req.GPU, req.GPUCount)
	}
	return s
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}

func have(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
