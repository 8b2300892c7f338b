package resources

import "maps"

// Candidates is the flattened list of alternatives the optimizer weighs,
// each a complete Resources with at most one accelerator and no any_of or
// ordered of its own:
//
//   - any_of items, each merged over the base (ordered false);
//   - ordered items, merged the same way, to be tried in order (ordered
//     true);
//   - an accelerator set ({A100: 1, H100: 1}) expands into one alternative
//     per accelerator (any of them), also inside each any_of item (cross
//     product); an accelerator list ([A100:1, H100:1]) into alternatives
//     tried in order;
//   - anything else is [a copy of r].
//
// Parse rejects the combinations that have no meaning (a list with
// any_of, several accelerators with ordered).
func (r *Resources) Candidates() (list []*Resources, ordered bool) {
	switch {
	case len(r.Ordered) > 0:
		for _, it := range r.Ordered {
			list = append(list, mergeOver(r, it))
		}
		return list, true
	case len(r.AnyOf) > 0:
		for _, it := range r.AnyOf {
			list = append(list, expandAccelerators(mergeOver(r, it))...)
		}
		return list, false
	}
	base := r.Copy()
	base.AnyOf, base.Ordered = nil, nil
	return expandAccelerators(base), r.Accelerators.Ordered
}

// expandAccelerators splits a multi-accelerator request into one request
// per accelerator.
func expandAccelerators(r *Resources) []*Resources {
	if len(r.Accelerators.List) < 2 {
		return []*Resources{r}
	}
	out := make([]*Resources, len(r.Accelerators.List))
	for i, a := range r.Accelerators.List {
		c := r.Copy()
		c.Accelerators = Accelerators{List: []Accelerator{a}}
		out[i] = c
	}
	return out
}

// mergeOver returns item laid over base: every field the item sets
// replaces the base's, labels are merged (item wins per key), and the
// result has no alternatives of its own.
//
// Infra merges by part: an item that names a cloud replaces the base infra
// whole; an item that gives only a region or zone (infra: */us-east-1, or
// the legacy region:) keeps the base cloud.
func mergeOver(base, item *Resources) *Resources {
	out := base.Copy()
	out.AnyOf, out.Ordered = nil, nil
	it := item.Copy()

	switch {
	case it.Infra.Cloud != "":
		out.Infra = it.Infra
	case !it.Infra.IsZero():
		inf := Infra{Cloud: out.Infra.Cloud, Region: it.Infra.Region, Zone: it.Infra.Zone}
		if fixed, _, err := checkInfraShape(inf); err == nil {
			inf = fixed
		}
		out.Infra = inf
	}
	if !it.Accelerators.IsZero() {
		out.Accelerators = it.Accelerators
	}
	setIf(&out.AcceleratorArgs, it.AcceleratorArgs)
	setIf(&out.CPUs, it.CPUs)
	setIf(&out.Memory, it.Memory)
	setIf(&out.InstanceType, it.InstanceType)
	setIf(&out.UseSpot, it.UseSpot)
	setIf(&out.JobRecovery, it.JobRecovery)
	setIf(&out.DiskSize, it.DiskSize)
	setIf(&out.EphemeralStorage, it.EphemeralStorage)
	setIf(&out.DiskTier, it.DiskTier)
	setIf(&out.NetworkTier, it.NetworkTier)
	setIf(&out.LocalDisk, it.LocalDisk)
	setIf(&out.MaxHourlyCost, it.MaxHourlyCost)
	if it.Ports != nil {
		out.Ports = it.Ports
	}
	if it.Labels != nil {
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		maps.Copy(out.Labels, it.Labels)
	}
	setIf(&out.ImageID, it.ImageID)
	setIf(&out.Autostop, it.Autostop)
	setIf(&out.Priority, it.Priority)
	setIf(&out.PriorityClass, it.PriorityClass)
	if it.Volumes != nil {
		out.Volumes = it.Volumes
	}
	setIf(&out.DockerLoginConfig, it.DockerLoginConfig)
	out.IsImageManaged = out.IsImageManaged || it.IsImageManaged
	out.RequiresFuse = out.RequiresFuse || it.RequiresFuse
	out.NoMissingAccelWarnings = out.NoMissingAccelWarnings || it.NoMissingAccelWarnings
	if it.ClusterConfigOverrides != nil {
		out.ClusterConfigOverrides = it.ClusterConfigOverrides
	}
	return out
}

// setIf overwrites *dst with v unless v is the zero value (unset).
func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}
