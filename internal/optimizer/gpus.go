package optimizer

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/catalog"
)

// commonGPUs are listed in the COMMON_GPU section of `sky gpus list`;
// every other non-TPU accelerator is OTHER_GPU (shown with -a).
var commonGPUs = []string{
	"A10", "A10G", "A100", "A100-80GB", "B200", "H100", "H200", "L4", "L40S", "T4", "V100", "V100-32GB",
}

// GPUListOptions mirrors the flags of `sky gpus list` that shape output.
type GPUListOptions struct {
	// Name is the ACCELERATOR_STR filter (without the :COUNT part); empty
	// prints the summary sections.
	Name string
	// All is -a/--all: with Name, the REGION column is dropped; without,
	// the OTHER_GPU section is added.
	All bool
	// Verbose is -v: every cell in full. Without it, instance types and
	// regions longer than maxCell are shortened in the middle, as `sky
	// status` shortens long places.
	Verbose bool
}

// maxCell is the widest INSTANCE_TYPE or REGION cell without -v.
const maxCell = 30

// shorten cuts s to at most n runes, keeping both ends ("abc...xyz").
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	keep := n - 3
	return string(r[:keep-keep/2]) + "..." + string(r[len(r)-keep/2:])
}

// WriteGPUTable prints `sky gpus list` in table form from catalog.ListGPUs.
func WriteGPUTable(w io.Writer, list map[string][]catalog.GPUOffering, opts GPUListOptions) error {
	ew := &errWriter{w: w}
	names := sortedNames(list)
	if opts.Name == "" {
		var common, tpus, other []string
		for _, n := range names {
			switch {
			case catalog.IsTPU(n):
				tpus = append(tpus, n)
			case slices.Contains(commonGPUs, n):
				common = append(common, n)
			default:
				other = append(other, n)
			}
		}
		section := func(title string, ns []string) {
			if len(ns) == 0 {
				return
			}
			t := table{header: []string{title, "AVAILABLE_QUANTITIES"}}
			for _, n := range ns {
				t.add(false, n, quantities(list[n]))
			}
			t.writePlain(ew)
			ew.printf("\n")
		}
		section("COMMON_GPU", common)
		section("GOOGLE_TPU", tpus)
		if opts.All {
			section("OTHER_GPU", other)
		} else {
			ew.printf("Hint: use -a/--all to see all accelerators (including non-common ones) and pricing.\n")
		}
		return ew.err
	}
	if len(names) == 0 {
		ew.printf("No resources found for the requested accelerator %q.\n", opts.Name)
		return ew.err
	}
	for i, n := range names {
		header := []string{"GPU", "QTY", "CLOUD", "INSTANCE_TYPE", "DEVICE_MEM", "vCPUs", "HOST_MEM", "HOURLY_PRICE", "HOURLY_SPOT_PRICE"}
		if !opts.All {
			header = append(header, "REGION")
		}
		t := table{header: header}
		for _, o := range list[n] {
			it, region := o.InstanceType, o.Region
			if it == "" {
				it = "(attachable)"
			}
			if !opts.Verbose {
				it, region = shorten(it, maxCell), shorten(region, maxCell)
			}
			row := []string{o.AccName, formatNum(o.AccCount), DisplayName(o.Cloud), it,
				gbOrDash(o.DeviceMemGiB), numOrDash(o.VCPUs), gbOrDash(o.MemoryGiB),
				priceOrDash(o.Price), priceOrDash(o.SpotPrice)}
			if !opts.All {
				row = append(row, region)
			}
			t.add(false, row...)
		}
		if i > 0 {
			ew.printf("\n")
		}
		t.writePlain(ew)
	}
	return ew.err
}

func sortedNames(list map[string][]catalog.GPUOffering) []string {
	var names []string
	for n, l := range list {
		if len(l) > 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// quantities is "1, 2, 4, 8": the distinct counts offered, ascending.
func quantities(list []catalog.GPUOffering) string {
	var counts []float64
	for _, o := range list {
		if !slices.Contains(counts, o.AccCount) {
			counts = append(counts, o.AccCount)
		}
	}
	slices.Sort(counts)
	s := make([]string, len(counts))
	for i, c := range counts {
		s[i] = formatNum(c)
	}
	return strings.Join(s, ", ")
}

func gbOrDash(v float64) string {
	if math.IsNaN(v) || v <= 0 {
		return "-"
	}
	return numOrDash(v) + "GB"
}

func priceOrDash(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("$ %.3f", v)
}

// gpuJSON is one offering in `sky gpus list -o json`. Unknown numbers are
// null: the reference prints NaN, which is not JSON.
type gpuJSON struct {
	Cloud           string   `json:"cloud"`
	InstanceType    *string  `json:"instance_type"`
	AcceleratorName string   `json:"accelerator_name"`
	AcceleratorCnt  float64  `json:"accelerator_count"`
	CPUCount        *float64 `json:"cpu_count"`
	DeviceMemory    *float64 `json:"device_memory"`
	Memory          *float64 `json:"memory"`
	Price           *float64 `json:"price"`
	SpotPrice       *float64 `json:"spot_price"`
	Region          string   `json:"region"`
}

func nullable(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// WriteGPUJSON prints `sky gpus list -o json`: an object from accelerator
// name to its offerings, 2-space indented, strict JSON.
func WriteGPUJSON(w io.Writer, list map[string][]catalog.GPUOffering) error {
	out := map[string][]gpuJSON{}
	for name, offs := range list {
		arr := make([]gpuJSON, 0, len(offs))
		for _, o := range offs {
			j := gpuJSON{
				Cloud: DisplayName(o.Cloud), AcceleratorName: o.AccName, AcceleratorCnt: o.AccCount,
				CPUCount: nullable(o.VCPUs), DeviceMemory: nullable(o.DeviceMemGiB), Memory: nullable(o.MemoryGiB),
				Price: nullable(o.Price), SpotPrice: nullable(o.SpotPrice), Region: o.Region,
			}
			if o.InstanceType != "" {
				it := o.InstanceType
				j.InstanceType = &it
			}
			arr = append(arr, j)
		}
		out[name] = arr
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// ParseGPUArg splits the ACCELERATOR_STR argument "NAME[:COUNT]".
func ParseGPUArg(s string) (name string, count float64, err error) {
	name, cnt, found := strings.Cut(strings.TrimSpace(s), ":")
	if name == "" {
		return "", 0, fmt.Errorf("accelerator %q: name is empty; use NAME or NAME:COUNT, e.g. H100:8", s)
	}
	if !found {
		return name, 0, nil
	}
	if _, err := fmt.Sscanf(cnt, "%g", &count); err != nil || count <= 0 || strings.Contains(cnt, ":") {
		return "", 0, fmt.Errorf("accelerator %q: count %q must be a positive number; use NAME or NAME:COUNT, e.g. H100:8", s, cnt)
	}
	return name, count, nil
}
