package catalog

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Row is one parsed line of a cloud's vms.csv. Numbers that the file leaves
// empty are NaN (vCPUs, memory, prices), so a filter such as "vCPUs >= 8"
// never matches an unknown value by accident; AccCount is 0 when the row has
// no accelerator.
type Row struct {
	InstanceType string  // "" on GCP accelerator-only rows
	AccName      string  // as written in the file (already canonical upstream)
	AccCount     float64 // may be fractional (Azure NV*ads A10 partitions)
	VCPUs        float64
	MemoryGiB    float64
	Price        float64 // on-demand $/hr for the whole row; NaN when not offered
	SpotPrice    float64 // spot $/hr; NaN when not offered
	Region       string
	Zone         string // "" when the cloud has no AvailabilityZone column
	Arch         string // AWS only
	// DeviceMemGiB is the memory of one accelerator, best effort from GpuInfo
	// (NaN when unknown). Display only: see deviceMemory for why.
	DeviceMemGiB float64
}

// accelOnly reports a GCP-style row that prices accelerators separately from
// any host VM.
func (r *Row) accelOnly() bool { return r.InstanceType == "" && r.AccName != "" }

// columns maps the header names we use to their index; -1 when absent.
type columns struct {
	instanceType, accName, accCount, vcpus, mem, gpuInfo, price, spot, region, zone, arch int
}

func headerColumns(header []string) (columns, error) {
	idx := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		idx[h] = i
	}
	get := func(name string) int {
		if i, ok := idx[name]; ok {
			return i
		}
		return -1
	}
	c := columns{
		instanceType: get("InstanceType"), accName: get("AcceleratorName"),
		accCount: get("AcceleratorCount"), vcpus: get("vCPUs"), mem: get("MemoryGiB"),
		gpuInfo: get("GpuInfo"), price: get("Price"), spot: get("SpotPrice"),
		region: get("Region"), zone: get("AvailabilityZone"), arch: get("Arch"),
	}
	var missing []string
	for name, i := range map[string]int{"InstanceType": c.instanceType, "Price": c.price, "Region": c.region} {
		if i < 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("header lacks required column(s) %s (have %s)",
			strings.Join(slices.Sorted(slices.Values(missing)), ", "), strings.Join(header, ","))
	}
	return c, nil
}

// parseVMs reads a vms.csv. Columns are found by header name because their
// order differs per cloud; CRLF and LF both work; rows may carry extra
// unquoted fields (Azure's Generation "V1,V2"), which are ignored. Fully
// identical rows are dropped; rows that differ only in price keep the lowest.
func parseVMs(cloud string, r io.Reader) ([]Row, error) {
	// Reading the file whole lets the row slice and the duplicate map be
	// sized once: growing them was a third of a cold load of the large
	// (Azure, GCP) files.
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	lines := bytes.Count(data, []byte{'\n'}) + 1
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty file: no header line")
		}
		return nil, fmt.Errorf("reading header: %w", err)
	}
	cols, err := headerColumns(append([]string(nil), header...))
	if err != nil {
		return nil, err
	}
	type key struct {
		it, acc       string
		cnt, cpu, mem float64
		region, zone  string
	}
	seen := make(map[key]int, lines)
	rows := make([]Row, 0, lines)
	// A field is a substring of its whole line; kept as is, every row
	// would hold its line (GpuInfo JSON and all) for as long as the index
	// lives. Each distinct value is copied once instead: instance types,
	// regions, zones and accelerators repeat on many rows.
	strs := map[string]string{}
	intern := func(v string) string {
		if v == "" {
			return ""
		}
		if c, ok := strs[v]; ok {
			return c
		}
		c := strings.Clone(v)
		strs[c] = c
		return c
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w", err) // csv.ParseError already says line and column
		}
		line, _ := cr.FieldPos(0)
		field := func(i int) string {
			if i < 0 || i >= len(rec) {
				return ""
			}
			return strings.TrimSpace(rec[i])
		}
		row := Row{
			InstanceType: intern(field(cols.instanceType)),
			AccName:      intern(field(cols.accName)),
			Region:       intern(field(cols.region)),
			Zone:         intern(field(cols.zone)),
			Arch:         intern(field(cols.arch)),
		}
		if cloud == "aws" {
			row.Zone = awsZoneName(row.Region, row.Zone)
		}
		var perr error
		num := func(col int, name string) float64 {
			v, err := parseNum(field(col))
			if err != nil && perr == nil {
				perr = fmt.Errorf("line %d: column %s: %w", line, name, err)
			}
			return v
		}
		row.AccCount = num(cols.accCount, "AcceleratorCount")
		row.VCPUs = num(cols.vcpus, "vCPUs")
		row.MemoryGiB = num(cols.mem, "MemoryGiB")
		row.Price = num(cols.price, "Price")
		row.SpotPrice = num(cols.spot, "SpotPrice")
		if perr != nil {
			return nil, perr
		}
		if math.IsNaN(row.AccCount) || row.AccName == "" {
			row.AccCount = 0
		}
		if row.AccCount == 0 {
			row.AccName = ""
		}
		if row.InstanceType == "" && row.AccName == "" {
			continue // nothing to offer
		}
		// A zero price means "not offered" (Vast's spot 0.00, the zero
		// prices of the kinds that report capacity), never "free": a free row would win every comparison.
		if row.Price <= 0 {
			row.Price = math.NaN()
		}
		if row.SpotPrice <= 0 {
			row.SpotPrice = math.NaN()
		}
		// Placeholder prices (Mithril lists A100 at $0.01 per GPU-hour) would
		// also win every comparison; below this per-accelerator floor a price
		// is treated as unknown.
		if row.AccCount > 0 {
			if row.Price/row.AccCount < minPricePerAccelerator {
				row.Price = math.NaN()
			}
			if row.SpotPrice/row.AccCount < minPricePerAccelerator {
				row.SpotPrice = math.NaN()
			}
		}
		row.DeviceMemGiB = deviceMemory(cloud, field(cols.gpuInfo), row.AccCount)
		k := key{row.InstanceType, row.AccName, row.AccCount, nanZero(row.VCPUs), nanZero(row.MemoryGiB), row.Region, row.Zone}
		if i, ok := seen[k]; ok {
			rows[i].Price = minKnown(rows[i].Price, row.Price)
			rows[i].SpotPrice = minKnown(rows[i].SpotPrice, row.SpotPrice)
			continue
		}
		seen[k] = len(rows)
		rows = append(rows, row)
	}
	// Sized for every line; duplicates and empty rows leave a tail that
	// the index would otherwise keep.
	if cap(rows)-len(rows) > len(rows)/8 {
		rows = slices.Clone(rows)
	}
	return rows, nil
}

// awsZoneID is an AWS availability-zone ID as the catalog writes it
// ("use2-az3").
var awsZoneID = regexp.MustCompile(`^[a-z]+[0-9]+-az([0-9]+)$`)

// awsZoneName turns the catalog's zone ID into the zone name users write and
// SkyPilot prints ("us-east-2c"): the Nth zone of the region gets the Nth
// letter. AWS maps IDs to names per account; without an account (offline,
// dry runs) this default is the best guess, and it keeps names stable.
func awsZoneName(region, zone string) string {
	m := awsZoneID.FindStringSubmatch(zone)
	if m == nil || region == "" {
		return zone
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > 26 {
		return zone
	}
	return region + string(rune('a'+n-1))
}

// minPricePerAccelerator is the lowest believable $/accelerator-hour.
const minPricePerAccelerator = 0.05

// parseNum parses a catalog number: "" is NaN (unknown), float noise and
// "8.0" are fine.
func parseNum(s string) (float64, error) {
	if s == "" {
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN(), fmt.Errorf("%q is not a number", s)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return math.NaN(), nil
	}
	return v, nil
}

func nanZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// minKnown is the smaller of two prices, ignoring unknown (NaN) ones.
func minKnown(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return math.Min(a, b)
}

var sizeInMiB = regexp.MustCompile(`SizeInMiB['"]?\s*:\s*([0-9.]+)`)

// deviceMemory extracts one accelerator's memory (GiB) from GpuInfo. The
// field is display-only and inconsistent across clouds, so each quirk from
// the catalog README is handled here and nowhere else:
//   - vast, verda and primeintellect store the total over all devices;
//   - shadeform and runpod write GB in "SizeInMiB" (values below 1024);
//   - GCP TPU rows hold just the TPU name (no memory: NaN).
func deviceMemory(cloud, info string, count float64) float64 {
	m := sizeInMiB.FindStringSubmatch(info)
	if m == nil {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v <= 0 {
		return math.NaN()
	}
	switch cloud {
	case "vast", "verda", "primeintellect":
		if count >= 1 {
			v /= count
		}
	}
	if v < 1024 { // already GB
		return v
	}
	return v / 1024
}
