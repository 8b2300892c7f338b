package catalog

import (
	"github.com/skygo/skygo/internal/infrakind"
	"regexp"
	"strings"
)

// index is one cloud's rows plus lookup maps, built once per cloud.
type index struct {
	cloud   string
	rows    []Row
	byType  map[string][]int // lower instance type -> rows
	byAcc   map[string][]int // lower accelerator name -> rows (incl. GCP accelerator-only rows)
	cpuOnly []int            // rows with an instance type and no accelerator
}

func buildIndex(cloud string, rows []Row) *index {
	ix := &index{cloud: cloud, rows: rows, byType: map[string][]int{}, byAcc: map[string][]int{}}
	for i := range rows {
		r := &rows[i]
		if r.InstanceType != "" {
			k := strings.ToLower(r.InstanceType)
			ix.byType[k] = append(ix.byType[k], i)
		}
		if r.AccName != "" {
			k := strings.ToLower(r.AccName)
			ix.byAcc[k] = append(ix.byAcc[k], i)
		} else if r.InstanceType != "" {
			ix.cpuOnly = append(ix.cpuOnly, i)
		}
	}
	return ix
}

// defaultFamily restricts CPU-only requests (no instance type, no
// accelerator) to a cloud's general-purpose families, as SkyPilot does: on
// AWS the spec lists them; GCP uses n2 and Azure the Dsv5 series (SkyPilot's
// documented default choices n2-standard-8 and Standard_D8s_v5).
var defaultFamily = map[string]*regexp.Regexp{
	"aws":   regexp.MustCompile(`^(m6i|m6id|m7i|r6i|r6id|r7i|c6i|c6id|c7i)\.`),
	"gcp":   regexp.MustCompile(`^n2-(standard|highmem|highcpu)-\d+$`),
	"azure": regexp.MustCompile(`^Standard_D\d+s_v5$`),
}

// DefaultCPUs returns the default vCPU floor and memory GB per vCPU for a
// cloud when a request names no instance type, no accelerator, no cpus and
// no memory (spec resources.md §Defaults), as the kind describes it
// (internal/infrakind); kinds sized to the request get 2 CPUs and 1 GB/CPU
// (4 and 4 with GPUs).
func DefaultCPUs(cloud string, withGPU bool) (cpus, memPerCPU float64) {
	k, ok := infrakind.Lookup(cloud)
	if ok && k.Sized {
		if withGPU {
			return 4, 4
		}
		return 2, 1
	}
	d := infrakind.DefaultSizes
	if ok {
		d = k.DefaultSizes()
	}
	return d.CPUs, d.MemPerCPU
}

// GCP sells most GPUs only attached to a fixed machine type. gcpFixed maps a
// (lower-case accelerator, count) to the host types that carry it, in the
// order SkyPilot prefers (smallest first); gcpImplied is the reverse.
var gcpFixed = map[string]map[float64][]string{
	"a100":      {1: {"a2-highgpu-1g"}, 2: {"a2-highgpu-2g"}, 4: {"a2-highgpu-4g"}, 8: {"a2-highgpu-8g"}, 16: {"a2-megagpu-16g"}},
	"a100-80gb": {1: {"a2-ultragpu-1g"}, 2: {"a2-ultragpu-2g"}, 4: {"a2-ultragpu-4g"}, 8: {"a2-ultragpu-8g"}},
	"h100":      {1: {"a3-highgpu-1g"}, 2: {"a3-highgpu-2g"}, 4: {"a3-highgpu-4g"}, 8: {"a3-highgpu-8g"}},
	"h100-mega": {8: {"a3-megagpu-8g"}},
	"h200":      {8: {"a3-ultragpu-8g"}},
	"b200":      {8: {"a4-highgpu-8g"}},
	"l4": {1: {"g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"},
		2: {"g2-standard-24"}, 4: {"g2-standard-48"}, 8: {"g2-standard-96"}},
}

// gcpImplied returns the accelerator a GCP fixed-GPU machine type carries.
func gcpImplied(instanceType string) (acc string, count float64, ok bool) {
	it := strings.ToLower(instanceType)
	for a, byCount := range gcpFixed {
		for n, types := range byCount {
			for _, t := range types {
				if t == it {
					return a, n, true
				}
			}
		}
	}
	return "", 0, false
}

// gcpAttachHost matches the n1 machine types that GPUs such as T4, V100,
// P100 and P4 are attached to.
var gcpAttachHost = regexp.MustCompile(`^n1-(standard|highmem|highcpu)-\d+$`)

// gcpTPUHost is the pseudo instance type of a TPU VM: the host is included
// in the TPU slice price.
const gcpTPUHost = "TPU-VM"
