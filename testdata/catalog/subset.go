//go:build ignore

// subset.go cuts the test catalog in testdata/catalog/v8 out of a full v8
// catalog tree (SkyPilot's public price catalog, laid out as
// <dir>/<cloud>/vms.csv):
//
//	go run testdata/catalog/subset.go -from ../shared/catalog/v8 -to testdata/catalog/v8
//
// Rows are copied byte for byte (line endings included), never edited, so
// the test catalog holds real prices; only the choice of rows is ours. The
// rules are below (keep); README.md in this directory says why.
package main

import (
	"bytes"
	"encoding/csv"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// regions keeps only these regions of the large clouds. AWS and GCP keep
// two regions each, so that region filters and "blocked region" cases have
// somewhere else to go; Lambda keeps three that all sell 8x H100.
var regions = map[string][]string{
	"aws":    {"us-east-1", "us-west-2"},
	"gcp":    {"us-central1", "europe-west4"},
	"azure":  {"eastus", "westus2"},
	"lambda": {"us-east-1", "us-west-1", "europe-central-1"},
}

// families keeps, on the large clouds, the instance families the optimizer
// actually considers: the default CPU families and the GPU ones (on GCP the
// GPU hosts, n1 for attachable GPUs and the a2/a3/a4/g2 families).
var families = map[string]*regexp.Regexp{
	"gcp":   regexp.MustCompile(`^(n1-|n2-(standard|highmem|highcpu)-|a2-|a3-|a4-|g2-)`),
	"azure": regexp.MustCompile(`^Standard_(D\d+s_v5|N[CDV]\d)`),
}

// tpuSlice matches a TPU name and its chip count: slices above 8 chips are
// dropped (GCP lists hundreds of v5p pod slices).
var tpuSlice = regexp.MustCompile(`^tpu-v\w+-(\d+)$`)

// perShape: on every other cloud, each shape (accelerator and count, or
// vCPUs and memory for CPU-only rows; and whether it has an on-demand and a
// spot price) keeps its first rows in file order.
const perShape = 3

func keep(cloud string, col map[string]int, rec []string, seen map[string]int) bool {
	get := func(name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return rec[i]
		}
		return ""
	}
	it, region := get("InstanceType"), get("Region")
	if rs, ok := regions[cloud]; ok {
		if !slices.Contains(rs, region) {
			return false
		}
		if it == "" { // a GCP accelerator or TPU row
			if m := tpuSlice.FindStringSubmatch(get("AcceleratorName")); m != nil {
				n, _ := strconv.Atoi(m[1])
				return n <= 8
			}
			return true
		}
		if re := families[cloud]; re != nil {
			return re.MatchString(it)
		}
		return true
	}
	shape := get("AcceleratorName") + ":" + get("AcceleratorCount")
	if get("AcceleratorName") == "" {
		shape = "cpu:" + get("vCPUs") + ":" + get("MemoryGiB")
	}
	shape += fmt.Sprintf(":%t:%t", priced(get("Price")), priced(get("SpotPrice")))
	seen[shape]++
	return seen[shape] <= perShape
}

func priced(s string) bool {
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && v > 0
}

func subset(cloud string, data []byte) ([]byte, int, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	var out bytes.Buffer
	col := map[string]int{}
	seen := map[string]int{}
	kept := 0
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		r := csv.NewReader(bytes.NewReader(line))
		r.FieldsPerRecord = -1
		rec, err := r.Read()
		if err != nil {
			return nil, 0, fmt.Errorf("line %d: %w", i+1, err)
		}
		if i == 0 {
			for j, h := range rec {
				col[strings.TrimPrefix(h, "\ufeff")] = j
			}
			out.Write(line)
			continue
		}
		if keep(cloud, col, rec, seen) {
			out.Write(line)
			kept++
		}
	}
	return out.Bytes(), kept, nil
}

func main() {
	from := flag.String("from", "../shared/catalog/v8", "full v8 catalog directory")
	to := flag.String("to", "testdata/catalog/v8", "output directory")
	flag.Parse()
	clouds, err := filepath.Glob(filepath.Join(*from, "*", "vms.csv"))
	if err != nil || len(clouds) == 0 {
		log.Fatalf("no <cloud>/vms.csv under %s", *from)
	}
	for _, src := range clouds {
		cloud := filepath.Base(filepath.Dir(src))
		data, err := os.ReadFile(src)
		if err != nil {
			log.Fatal(err)
		}
		sub, n, err := subset(cloud, data)
		if err != nil {
			log.Fatalf("%s: %v", src, err)
		}
		write(filepath.Join(*to, cloud, "vms.csv"), sub)
		fmt.Printf("%-15s %6d rows %8d bytes\n", cloud, n, len(sub))
	}
	// Canonical accelerator names: small, copied whole.
	acc, err := os.ReadFile(filepath.Join(*from, "common", "accelerators.csv"))
	if err != nil {
		log.Fatal(err)
	}
	write(filepath.Join(*to, "common", "accelerators.csv"), acc)
}

func write(path string, data []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		log.Fatal(err)
	}
}
