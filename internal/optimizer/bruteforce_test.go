package optimizer

import (
	"encoding/csv"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/skygo/skygo/internal/catalog"
)

// This file is an independent oracle: it scans the raw v8 CSV files with
// encoding/csv and the SkyPilot facts written out here (default cpus and
// memory, default families, GCP machine types per GPU), without using the
// catalog package's parsing or indexing.

type rawRow struct {
	cloud, it, acc string
	cnt, cpu, mem  float64
	price, spot    float64 // NaN when empty/zero
	region, zone   string
}

var (
	rawMu  sync.Mutex
	rawAll = map[string]map[string][]rawRow{} // catalog dir -> cloud -> rows
)

// rawRows reads every cloud's vms.csv under dir once.
func rawRows(t *testing.T, dir string) map[string][]rawRow {
	t.Helper()
	rawMu.Lock()
	defer rawMu.Unlock()
	if rawAll[dir] == nil {
		rows := map[string][]rawRow{}
		rawAll[dir] = rows
		for _, cloud := range catalog.Clouds {
			f, err := os.Open(filepath.Join(dir, cloud, "vms.csv"))
			if err != nil {
				continue
			}
			r := csv.NewReader(f)
			r.FieldsPerRecord = -1
			head, _ := r.Read()
			col := map[string]int{}
			for i, h := range head {
				col[h] = i
			}
			get := func(rec []string, name string) string {
				if i, ok := col[name]; ok && i < len(rec) {
					return rec[i]
				}
				return ""
			}
			num := func(s string) float64 {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return math.NaN()
				}
				return v
			}
			for {
				rec, err := r.Read()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Errorf("%s: %v", cloud, err)
					break
				}
				row := rawRow{cloud: cloud, it: get(rec, "InstanceType"), acc: get(rec, "AcceleratorName"),
					cnt: num(get(rec, "AcceleratorCount")), cpu: num(get(rec, "vCPUs")), mem: num(get(rec, "MemoryGiB")),
					price: num(get(rec, "Price")), spot: num(get(rec, "SpotPrice")),
					region: get(rec, "Region"), zone: get(rec, "AvailabilityZone")}
				if math.IsNaN(row.cnt) {
					row.cnt = 0
				}
				// Zero is "not offered"; Mithril-style $0.01/GPU-hr placeholders too.
				for _, p := range []*float64{&row.price, &row.spot} {
					if *p <= 0 || (row.cnt > 0 && *p/row.cnt < 0.05) {
						*p = math.NaN()
					}
				}
				rows[cloud] = append(rows[cloud], row)
			}
			f.Close()
		}
	}
	return rawAll[dir]
}

var (
	oracleFamilies = map[string]*regexp.Regexp{
		"aws":   regexp.MustCompile(`^(m6i|m6id|m7i|r6i|r6id|r7i|c6i|c6id|c7i)\.`),
		"gcp":   regexp.MustCompile(`^n2-(standard|highmem|highcpu)-\d+$`),
		"azure": regexp.MustCompile(`^Standard_D\d+s_v5$`),
	}
	oracleGCPHosts = map[string][]string{
		"A100:1": {"a2-highgpu-1g"}, "A100:2": {"a2-highgpu-2g"}, "A100:4": {"a2-highgpu-4g"}, "A100:8": {"a2-highgpu-8g"}, "A100:16": {"a2-megagpu-16g"},
		"A100-80GB:1": {"a2-ultragpu-1g"}, "A100-80GB:8": {"a2-ultragpu-8g"},
		"A100-80GB:2": {"a2-ultragpu-2g"}, "A100-80GB:4": {"a2-ultragpu-4g"},
		"H100:1": {"a3-highgpu-1g"}, "H100:2": {"a3-highgpu-2g"}, "H100:4": {"a3-highgpu-4g"}, "H100:8": {"a3-highgpu-8g"}, "H200:8": {"a3-ultragpu-8g"}, "B200:8": {"a4-highgpu-8g"},
		"L4:1": {"g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"},
		"L4:2": {"g2-standard-24"}, "L4:4": {"g2-standard-48"}, "L4:8": {"g2-standard-96"},
	}
	oracleN1 = regexp.MustCompile(`^n1-(standard|highmem|highcpu)-\d+$`)
)

func oracleDefault(cloud string) (float64, float64) {
	switch cloud {
	case "lambda":
		return 30, 4
	case "cudo":
		return 8, 2
	}
	return 8, 4
}

type oracleOffer struct {
	cloud, it, region, zone string
	price                   float64
}

func boundOK(b catalog.Bound, v, cpus float64) bool {
	switch {
	case b.Value == 0:
		return true
	case math.IsNaN(v):
		return false
	case b.PerCPU:
		return v >= b.Value*cpus-1e-9
	case b.AtLeast:
		return v >= b.Value-1e-9
	}
	return math.Abs(v-b.Value) < 1e-6
}

// oracle lists every offering (one per CSV row, GCP rows joined) for req
// in the catalog under dir.
func oracle(t *testing.T, dir string, req Request) []oracleOffer {
	var out []oracleOffer
	clouds := catalog.Clouds
	if req.Cloud != "" {
		clouds = []string{req.Cloud}
	}
	priceOf := func(r rawRow) float64 {
		if req.UseSpot {
			return r.spot
		}
		return r.price
	}
	place := func(r rawRow) bool {
		return (req.Region == "" || r.region == req.Region) && (req.Zone == "" || r.zone == req.Zone)
	}
	for _, cloud := range clouds {
		rows := rawRows(t, dir)[cloud]
		cpus, mem := req.CPUs, req.Memory
		if req.InstanceType == "" && req.AccName == "" && cpus.Value == 0 && mem.Value == 0 {
			c, m := oracleDefault(cloud)
			cpus, mem = catalog.Bound{Value: c, AtLeast: true}, catalog.Bound{Value: m, PerCPU: true}
		}
		if cloud == "gcp" && req.AccName != "" {
			key := req.AccName + ":" + formatNum(req.AccCount)
			hosts := oracleGCPHosts[key]
			hostOK := func(it string) bool { return slices.Contains(hosts, it) }
			if hosts == nil {
				hostOK = oracleN1.MatchString
				if cpus.Value == 0 && mem.Value == 0 {
					cpus, mem = catalog.Bound{Value: 8, AtLeast: true}, catalog.Bound{Value: 4, PerCPU: true}
				}
			}
			tpu := strings.HasPrefix(strings.ToLower(req.AccName), "tpu-")
			for _, a := range rows {
				if tpu && a.it == "" && strings.EqualFold(a.acc, req.AccName) && place(a) && !math.IsNaN(priceOf(a)) {
					out = append(out, oracleOffer{cloud, "TPU-VM", a.region, a.zone, priceOf(a)})
					continue
				}
				if tpu || a.it != "" || !strings.EqualFold(a.acc, req.AccName) || math.Abs(a.cnt-req.AccCount) > 1e-3 || !place(a) {
					continue
				}
				for _, h := range rows {
					if h.acc != "" || h.region != a.region || h.zone != a.zone || !hostOK(h.it) ||
						!boundOK(cpus, h.cpu, h.cpu) || !boundOK(mem, h.mem, h.cpu) {
						continue
					}
					if req.InstanceType != "" && h.it != req.InstanceType {
						continue
					}
					p := priceOf(h) + priceOf(a)
					if !math.IsNaN(p) && (req.MaxHourlyCost == 0 || p <= req.MaxHourlyCost) {
						out = append(out, oracleOffer{cloud, h.it, a.region, a.zone, p})
					}
				}
			}
			continue
		}
		for _, r := range rows {
			if r.it == "" {
				continue
			}
			switch {
			case req.InstanceType != "":
				if r.it != req.InstanceType {
					continue
				}
			case req.AccName != "":
			default:
				if r.acc != "" || (oracleFamilies[cloud] != nil && !oracleFamilies[cloud].MatchString(r.it)) {
					continue
				}
			}
			if req.AccName != "" && (!strings.EqualFold(r.acc, req.AccName) || math.Abs(r.cnt-req.AccCount) > 1e-3) {
				continue
			}
			if !place(r) || !boundOK(cpus, r.cpu, r.cpu) || !boundOK(mem, r.mem, r.cpu) {
				continue
			}
			p := priceOf(r)
			if !math.IsNaN(p) && (req.MaxHourlyCost == 0 || p <= req.MaxHourlyCost+1e-9) {
				out = append(out, oracleOffer{cloud, r.it, r.region, r.zone, p})
			}
		}
	}
	return out
}
