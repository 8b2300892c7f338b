package catalog

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"strings"
)

// Bound is a cpus or memory requirement: exactly Value, at least Value
// ("N+"), or, for memory, PerCPU GB per vCPU ("Nx", at least). A zero
// Bound is unset.
type Bound struct {
	Value   float64
	AtLeast bool
	PerCPU  bool
}

// IsSet reports whether the bound constrains anything.
func (b Bound) IsSet() bool { return b.Value > 0 }

// admits reports whether v satisfies the bound; cpus is the row's vCPU
// count, used by PerCPU bounds. Unknown (NaN) values never satisfy a set
// bound.
func (b Bound) admits(v, cpus float64) bool {
	switch {
	case !b.IsSet():
		return true
	case math.IsNaN(v):
		return false
	case b.PerCPU:
		return !math.IsNaN(cpus) && v >= b.Value*cpus-1e-9
	case b.AtLeast:
		return v >= b.Value-1e-9
	default:
		return math.Abs(v-b.Value) < 1e-6
	}
}

// Query asks one cloud for instances. Zero fields do not constrain.
type Query struct {
	InstanceType string
	AccName      string  // matched case-insensitively
	AccCount     float64 // required when AccName is set
	CPUs, Memory Bound
	Region, Zone string // exact (case-insensitive) matches
	UseSpot      bool
	// MaxHourlyCost drops offerings whose hourly price for one node (spot
	// or on-demand, per UseSpot) is above it.
	MaxHourlyCost float64
}

// Offering is one instance type in one region (and zone, where the cloud
// has zones) with its prices. For GCP accelerators priced separately, the
// prices are host VM + accelerators and HostPrice holds the VM part.
type Offering struct {
	Cloud        string
	InstanceType string
	AccName      string
	AccCount     float64
	VCPUs        float64 // NaN when unknown (TPU VMs)
	MemoryGiB    float64 // NaN when unknown
	DeviceMemGiB float64 // per accelerator; NaN when unknown
	Region       string
	Zone         string
	Price        float64 // on-demand $/hr per node; NaN when not offered
	SpotPrice    float64 // spot $/hr per node; NaN when not offered
	Arch         string
}

// HourlyPrice is the price of one node: spot or on-demand. NaN when that
// market is not offered.
func (o *Offering) HourlyPrice(spot bool) float64 {
	if spot {
		return o.SpotPrice
	}
	return o.Price
}

// Offerings returns every offering of cloud matching q, priced, cheapest
// first (ties: instance type, region, zone). Offerings without a price for
// the requested market (spot or on-demand) are left out. A request naming no
// instance type, accelerator, cpus or memory gets the cloud's defaults.
// A cloud without a catalog returns an error wrapping ErrNoCatalog.
func (c *Catalog) Offerings(ctx context.Context, cloud string, q Query) ([]Offering, error) {
	cloud = strings.ToLower(cloud)
	ix, err := c.cloud(ctx, cloud)
	if err != nil {
		return nil, err
	}
	q = withDefaults(cloud, q)
	var out []Offering
	if cloud == "gcp" {
		out = ix.gcpOfferings(q)
	} else {
		out = ix.plainOfferings(q)
	}
	out = slices.DeleteFunc(out, func(o Offering) bool {
		p := o.HourlyPrice(q.UseSpot)
		return math.IsNaN(p) || (q.MaxHourlyCost > 0 && p > q.MaxHourlyCost+1e-9)
	})
	SortOfferings(out, q.UseSpot)
	return out, nil
}

// SortOfferings orders by hourly price (spot or on-demand), then instance
// type, region and zone, so equal prices always come out the same way.
func SortOfferings(out []Offering, spot bool) {
	slices.SortStableFunc(out, func(a, b Offering) int {
		return cmp.Or(
			cmp.Compare(a.HourlyPrice(spot), b.HourlyPrice(spot)),
			cmp.Compare(a.InstanceType, b.InstanceType),
			cmp.Compare(a.Region, b.Region),
			cmp.Compare(a.Zone, b.Zone),
		)
	})
}

// withDefaults fills cpus/memory for a request that asks for nothing.
func withDefaults(cloud string, q Query) Query {
	if q.InstanceType == "" && q.AccName == "" && !q.CPUs.IsSet() && !q.Memory.IsSet() {
		cpus, ratio := DefaultCPUs(cloud, false)
		q.CPUs = Bound{Value: cpus, AtLeast: true}
		q.Memory = Bound{Value: ratio, PerCPU: true}
	}
	return q
}

func (q *Query) wantsPlace(r *Row) bool {
	return (q.Region == "" || strings.EqualFold(q.Region, r.Region)) &&
		(q.Zone == "" || strings.EqualFold(q.Zone, r.Zone))
}

func (q *Query) wantsShape(r *Row) bool {
	return q.CPUs.admits(r.VCPUs, r.VCPUs) && q.Memory.admits(r.MemoryGiB, r.VCPUs)
}

// sameCount compares accelerator counts, allowing the catalog's rounded
// fractions (0.167 for 1/6).
func sameCount(a, b float64) bool { return math.Abs(a-b) < 1e-3 }

func offeringOf(cloud string, r *Row) Offering {
	return Offering{
		Cloud: cloud, InstanceType: r.InstanceType, AccName: r.AccName, AccCount: r.AccCount,
		VCPUs: r.VCPUs, MemoryGiB: r.MemoryGiB, DeviceMemGiB: r.DeviceMemGiB,
		Region: r.Region, Zone: r.Zone, Price: r.Price, SpotPrice: r.SpotPrice, Arch: r.Arch,
	}
}

// plainOfferings serves clouds whose VM price includes its accelerators.
func (ix *index) plainOfferings(q Query) []Offering {
	var cand []int
	switch {
	case q.InstanceType != "":
		cand = ix.byType[strings.ToLower(q.InstanceType)]
	case q.AccName != "":
		cand = ix.byAcc[strings.ToLower(q.AccName)]
	default:
		cand = ix.cpuOnly
	}
	family := defaultFamily[ix.cloud]
	var out []Offering
	for _, i := range cand {
		r := &ix.rows[i]
		if q.AccName != "" && (!strings.EqualFold(r.AccName, q.AccName) || !sameCount(r.AccCount, q.AccCount)) {
			continue
		}
		if q.InstanceType == "" && q.AccName == "" && family != nil && !family.MatchString(r.InstanceType) {
			continue
		}
		if !q.wantsPlace(r) || !q.wantsShape(r) {
			continue
		}
		out = append(out, offeringOf(ix.cloud, r))
	}
	return out
}

// gcpOfferings joins GCP accelerator-only rows with their host VMs in the
// same zone: price = VM price + accelerator price.
func (ix *index) gcpOfferings(q Query) []Offering {
	if q.AccName == "" && q.InstanceType != "" {
		if acc, n, ok := gcpImplied(q.InstanceType); ok {
			q.AccName, q.AccCount = acc, n
		}
	}
	if q.AccName == "" {
		return ix.plainOfferings(q)
	}
	accLower := strings.ToLower(q.AccName)
	isTPU := strings.HasPrefix(accLower, "tpu-")
	// hostOK decides which VM rows may carry this accelerator.
	var hostOK func(r *Row) bool
	fixed := gcpFixed[accLower]
	switch {
	case isTPU:
		if q.InstanceType != "" && !strings.EqualFold(q.InstanceType, gcpTPUHost) {
			return nil
		}
	case fixed != nil:
		types := fixed[q.AccCount]
		hostOK = func(r *Row) bool { return slices.Contains(types, strings.ToLower(r.InstanceType)) }
	default:
		hostOK = func(r *Row) bool { return gcpAttachHost.MatchString(r.InstanceType) }
		if !q.CPUs.IsSet() && !q.Memory.IsSet() {
			cpus, ratio := DefaultCPUs("gcp", false)
			q.CPUs = Bound{Value: cpus, AtLeast: true}
			q.Memory = Bound{Value: ratio, PerCPU: true}
		}
	}
	// Host VMs by zone, filtered once.
	hostsByZone := map[string][]*Row{}
	if hostOK != nil {
		for _, i := range ix.cpuOnly {
			r := &ix.rows[i]
			if q.InstanceType != "" && !strings.EqualFold(q.InstanceType, r.InstanceType) {
				continue
			}
			if hostOK(r) && q.wantsPlace(r) && q.wantsShape(r) {
				hostsByZone[r.Region+"/"+r.Zone] = append(hostsByZone[r.Region+"/"+r.Zone], r)
			}
		}
	}
	var out []Offering
	for _, i := range ix.byAcc[accLower] {
		a := &ix.rows[i]
		if !a.accelOnly() || !sameCount(a.AccCount, q.AccCount) || !q.wantsPlace(a) {
			continue
		}
		if isTPU {
			if q.CPUs.IsSet() || q.Memory.IsSet() {
				continue // a TPU VM's host shape is not in the catalog
			}
			o := offeringOf("gcp", a)
			o.InstanceType = gcpTPUHost
			out = append(out, o)
			continue
		}
		for _, h := range hostsByZone[a.Region+"/"+a.Zone] {
			o := offeringOf("gcp", a)
			o.InstanceType, o.VCPUs, o.MemoryGiB, o.Arch = h.InstanceType, h.VCPUs, h.MemoryGiB, h.Arch
			o.Price = h.Price + a.Price // NaN if either is unknown
			o.SpotPrice = h.SpotPrice + a.SpotPrice
			out = append(out, o)
		}
	}
	return out
}

// Regions lists the regions where cloud offers instanceType (sorted).
func (c *Catalog) Regions(ctx context.Context, cloud, instanceType string) ([]string, error) {
	ix, err := c.cloud(ctx, strings.ToLower(cloud))
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, i := range ix.byType[strings.ToLower(instanceType)] {
		set[ix.rows[i].Region] = true
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// Zones lists the zones of region where cloud offers instanceType (sorted;
// empty for clouds without zones).
func (c *Catalog) Zones(ctx context.Context, cloud, instanceType, region string) ([]string, error) {
	ix, err := c.cloud(ctx, strings.ToLower(cloud))
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, i := range ix.byType[strings.ToLower(instanceType)] {
		r := &ix.rows[i]
		if strings.EqualFold(r.Region, region) && r.Zone != "" {
			set[r.Zone] = true
		}
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// HasInstanceType reports whether cloud's catalog lists instanceType.
func (c *Catalog) HasInstanceType(ctx context.Context, cloud, instanceType string) (bool, error) {
	ix, err := c.cloud(ctx, strings.ToLower(cloud))
	if err != nil {
		return false, err
	}
	return len(ix.byType[strings.ToLower(instanceType)]) > 0, nil
}
