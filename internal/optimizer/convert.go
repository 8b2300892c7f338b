package optimizer

import (
	"maps"
	"slices"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/resources"
)

// FromResources turns a task's parsed resources into optimizer options,
// one per alternative (any_of items, accelerator sets and lists,
// ordered items), and whether they are to be tried in order.
func FromResources(r *resources.Resources) (opts []Request, ordered bool) {
	if r == nil {
		return []Request{{}}, false
	}
	list, ordered := r.Candidates()
	for _, c := range list {
		opts = append(opts, requestOf(c))
	}
	if len(opts) == 0 {
		opts = []Request{{}}
	}
	return opts, ordered
}

func requestOf(r *resources.Resources) Request {
	q := Request{
		Cloud: r.Infra.Cloud, Region: r.Infra.Region, Zone: r.Infra.Zone,
		InstanceType:  r.InstanceType,
		CPUs:          bound(r.CPUs),
		Memory:        bound(r.Memory),
		UseSpot:       r.UseSpot != nil && *r.UseSpot,
		DiskTier:      r.DiskTier,
		Ports:         slices.Clone(r.Ports),
		MaxHourlyCost: r.MaxHourlyCost,
		DiskSize:      r.DiskSize,
		NetworkTier:   r.NetworkTier,
	}
	if r.LocalDisk != nil {
		q.LocalDisk = r.LocalDisk.String()
	}
	if len(r.Accelerators.List) > 0 {
		a := r.Accelerators.List[0] // Candidates leaves one per alternative
		q.AccName, q.AccCount = a.Name, a.Count
	}
	if im := r.ImageID; im != nil {
		switch {
		case im.DockerImage() != "":
			q.ImageID = resources.DockerPrefix + im.DockerImage()
		case im.Any() != "":
			q.ImageID = im.Any()
		default:
			// Per-region images: any value says "custom VM image".
			if keys := slices.Sorted(maps.Keys(im.ByRegion)); len(keys) > 0 {
				q.ImageID = im.ByRegion[keys[0]]
			}
		}
	}
	return q
}

func bound(q *resources.Quantity) catalog.Bound {
	if q == nil {
		return catalog.Bound{}
	}
	return catalog.Bound{Value: q.Value, AtLeast: q.AtLeast, PerCPU: q.PerCPU}
}
