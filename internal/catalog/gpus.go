package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// GPUFilter selects accelerator offerings for `sky gpus list`.
type GPUFilter struct {
	// Name matches accelerator names case-insensitively as a substring
	// ("a100" lists A100 and A100-80GB); empty lists all.
	Name string
	// Count keeps only offerings with exactly this many accelerators; 0 = any.
	Count float64
	// Clouds restricts the clouds queried (lower case); empty = all of Clouds.
	Clouds []string
	// Region keeps only offerings in this region.
	Region string
	// AllRegions returns one offering per region instead of only the
	// cheapest region of each (cloud, accelerator, count, instance type).
	AllRegions bool
}

// GPUOffering is one row of `sky gpus list NAME`: an accelerator count on an
// instance type of one cloud, at its cheapest region (or one region with
// AllRegions). InstanceType is "" for GCP accelerators that attach to a VM
// of the user's choice (and TPUs); their prices cover the accelerators only.
type GPUOffering struct {
	Cloud        string
	InstanceType string
	AccName      string
	AccCount     float64
	VCPUs        float64 // NaN when unknown
	MemoryGiB    float64 // host memory; NaN when unknown
	DeviceMemGiB float64 // per accelerator; NaN when unknown
	Price        float64 // on-demand $/hr; NaN when not offered
	SpotPrice    float64 // NaN when not offered
	Region       string
}

// IsTPU reports whether name is a Google TPU slice name.
func IsTPU(name string) bool { return strings.HasPrefix(strings.ToLower(name), "tpu-") }

// ListGPUs returns offerings grouped by accelerator name. Each group is
// sorted by count, then price, cloud, instance type and region. Clouds whose
// catalog cannot be loaded are skipped; their errors are joined into the
// returned error while the other clouds' results are still returned. When
// no cloud was asked for, a cloud without a catalog at all (a catalog
// directory holding only some clouds) is simply not listed.
func (c *Catalog) ListGPUs(ctx context.Context, f GPUFilter) (map[string][]GPUOffering, error) {
	clouds := f.Clouds
	if len(clouds) == 0 {
		clouds = Clouds
	}
	out := map[string][]GPUOffering{}
	var errs []error
	for _, cloud := range clouds {
		cloud = strings.ToLower(cloud)
		ix, err := c.cloud(ctx, cloud)
		if err != nil {
			if len(f.Clouds) > 0 || !errors.Is(err, ErrNoCatalog) {
				errs = append(errs, fmt.Errorf("%s: %w", cloud, err))
			}
			continue
		}
		for _, o := range ix.gpuOfferings(f) {
			out[o.AccName] = append(out[o.AccName], o)
		}
	}
	for name, list := range out {
		slices.SortFunc(list, func(a, b GPUOffering) int {
			return cmp.Or(cmp.Compare(a.AccCount, b.AccCount), cmp.Compare(a.Price, b.Price),
				cmp.Compare(a.Cloud, b.Cloud), cmp.Compare(a.InstanceType, b.InstanceType),
				cmp.Compare(a.Region, b.Region))
		})
		out[name] = list
	}
	return out, errors.Join(errs...)
}

// gpuOfferings lists one cloud's accelerator rows matching f, reduced to
// the cheapest per group (and per region with AllRegions).
func (ix *index) gpuOfferings(f GPUFilter) []GPUOffering {
	nameLower := strings.ToLower(f.Name)
	type group struct {
		acc    string
		count  float64
		it     string
		region string
	}
	best := map[group]GPUOffering{}
	var order []group
	add := func(o GPUOffering) {
		g := group{o.AccName, o.AccCount, o.InstanceType, ""}
		if f.AllRegions {
			g.region = o.Region
		}
		cur, ok := best[g]
		if !ok {
			order = append(order, g)
			best[g] = o
			return
		}
		if cheaper(o, cur) {
			best[g] = o
		}
	}
	for accLower, rows := range ix.byAcc {
		if nameLower != "" && !strings.Contains(accLower, nameLower) {
			continue
		}
		for _, i := range rows {
			r := &ix.rows[i]
			if (f.Count > 0 && !sameCount(r.AccCount, f.Count)) ||
				(f.Region != "" && !strings.EqualFold(f.Region, r.Region)) {
				continue
			}
			o := GPUOffering{
				Cloud: ix.cloud, InstanceType: r.InstanceType, AccName: r.AccName, AccCount: r.AccCount,
				VCPUs: r.VCPUs, MemoryGiB: r.MemoryGiB, DeviceMemGiB: r.DeviceMemGiB,
				Price: r.Price, SpotPrice: r.SpotPrice, Region: r.Region,
			}
			if ix.cloud == "gcp" && r.accelOnly() && gcpFixed[accLower][r.AccCount] != nil {
				// Show the machine type it comes with and the full price.
				host, ok := ix.cheapestGCPHost(accLower, r)
				if !ok {
					continue
				}
				o.InstanceType, o.VCPUs, o.MemoryGiB = host.InstanceType, host.VCPUs, host.MemoryGiB
				o.Price, o.SpotPrice = host.Price+r.Price, host.SpotPrice+r.SpotPrice
			}
			if math.IsNaN(o.Price) && math.IsNaN(o.SpotPrice) {
				continue
			}
			add(o)
		}
	}
	res := make([]GPUOffering, 0, len(order))
	for _, g := range order {
		res = append(res, best[g])
	}
	return res
}

// cheapestGCPHost finds the cheapest fixed host VM for accelerator row a
// in a's zone.
func (ix *index) cheapestGCPHost(accLower string, a *Row) (*Row, bool) {
	var best *Row
	for _, t := range gcpFixed[accLower][a.AccCount] {
		for _, i := range ix.byType[t] {
			h := &ix.rows[i]
			if h.Region != a.Region || h.Zone != a.Zone || math.IsNaN(h.Price) {
				continue
			}
			if best == nil || h.Price < best.Price {
				best = h
			}
		}
	}
	return best, best != nil
}

// cheaper orders offerings by on-demand price (unknown last), then spot,
// then region, so the chosen representative does not depend on map order.
func cheaper(a, b GPUOffering) bool {
	pa, pb := a.Price, b.Price
	if math.IsNaN(pa) {
		pa = math.Inf(1)
	}
	if math.IsNaN(pb) {
		pb = math.Inf(1)
	}
	if pa != pb {
		return pa < pb
	}
	sa, sb := a.SpotPrice, b.SpotPrice
	if math.IsNaN(sa) {
		sa = math.Inf(1)
	}
	if math.IsNaN(sb) {
		sb = math.Inf(1)
	}
	if sa != sb {
		return sa < sb
	}
	return a.Region < b.Region
}
