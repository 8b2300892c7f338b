// Package resources is the resources: section of a task: parsing from
// decoded YAML, validation, the alternatives (any_of, ordered, accelerator
// sets) the optimizer considers, CLI overrides, and canonical string and
// JSON forms.
//
// A Resources holds what the user asked for, normalised: the legacy
// cloud/region/zone fields become Infra, the gpus alias becomes
// Accelerators, sizes are whole GB, ports are merged ranges. Catalog checks
// (does this accelerator or instance type exist) happen later, in the
// optimizer; this package only needs the request itself.
package resources

import "maps"

// Resources is one resource request. Every field's zero value means "not
// given"; fields where false or 0 is a real choice are pointers.
type Resources struct {
	Infra           Infra
	Accelerators    Accelerators
	AcceleratorArgs *AcceleratorArgs
	CPUs            *Quantity
	Memory          *Quantity
	InstanceType    string
	UseSpot         *bool
	JobRecovery     *JobRecovery
	DiskSize        int // GB; 0 = DefaultDiskSizeGB
	// EphemeralStorage is a container's ephemeral storage in GB, on the
	// kinds that size it.
	EphemeralStorage int
	DiskTier         string // one of DiskTiers
	NetworkTier      string // one of NetworkTiers
	LocalDisk        *LocalDisk
	MaxHourlyCost    float64 // dollars; 0 = no limit
	Ports            []string
	Labels           map[string]string
	ImageID          *ImageID
	Autostop         *Autostop
	Priority         *int
	PriorityClass    string
	Volumes          []Volume

	// AnyOf and Ordered hold the alternatives as written: each item has
	// only the fields it set; Candidates merges them over the base.
	AnyOf   []*Resources
	Ordered []*Resources

	// Internal fields SkyGo itself writes when it stores a task.
	DockerLoginConfig      *DockerLoginConfig
	IsImageManaged         bool
	RequiresFuse           bool
	ClusterConfigOverrides map[string]any
	NoMissingAccelWarnings bool
}

// Copy returns a deep copy: changing it never changes r.
func (r *Resources) Copy() *Resources {
	if r == nil {
		return nil
	}
	out := *r
	out.Accelerators = r.Accelerators.copy()
	if r.AcceleratorArgs != nil {
		a := *r.AcceleratorArgs
		a.TPUVM = copyPtr(a.TPUVM)
		a.GCPQueuedResource = copyPtr(a.GCPQueuedResource)
		out.AcceleratorArgs = &a
	}
	out.CPUs = copyPtr(r.CPUs)
	out.Memory = copyPtr(r.Memory)
	out.UseSpot = copyPtr(r.UseSpot)
	if r.JobRecovery != nil {
		out.JobRecovery = r.JobRecovery.copy()
	}
	out.LocalDisk = copyPtr(r.LocalDisk)
	if r.Ports != nil {
		out.Ports = append([]string(nil), r.Ports...)
	}
	if r.Labels != nil {
		out.Labels = maps.Clone(r.Labels)
	}
	if r.ImageID != nil {
		out.ImageID = r.ImageID.copy()
	}
	out.Autostop = copyPtr(r.Autostop)
	out.Priority = copyPtr(r.Priority)
	if r.Volumes != nil {
		out.Volumes = make([]Volume, len(r.Volumes))
		for i, v := range r.Volumes {
			v.AutoDelete = copyPtr(v.AutoDelete)
			out.Volumes[i] = v
		}
	}
	out.AnyOf = copyList(r.AnyOf)
	out.Ordered = copyList(r.Ordered)
	out.DockerLoginConfig = copyPtr(r.DockerLoginConfig)
	if r.ClusterConfigOverrides != nil {
		out.ClusterConfigOverrides = deepCopyValue(r.ClusterConfigOverrides).(map[string]any)
	}
	return &out
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyList(l []*Resources) []*Resources {
	if l == nil {
		return nil
	}
	out := make([]*Resources, len(l))
	for i, r := range l {
		out[i] = r.Copy()
	}
	return out
}

// deepCopyValue copies a decoded YAML/JSON value (maps and lists nest).
func deepCopyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = deepCopyValue(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = deepCopyValue(val)
		}
		return out
	}
	return v
}

// IsZero reports whether nothing at all was asked for.
func (r *Resources) IsZero() bool {
	if r == nil {
		return true
	}
	return len(r.ToMap()) == 0
}

// HasAccelerators reports whether any accelerator is requested.
func (r *Resources) HasAccelerators() bool { return !r.Accelerators.IsZero() }

// AcceleratorName is the accelerator of a single-accelerator request, or
// "" when there is none or several alternatives.
func (r *Resources) AcceleratorName() string {
	if len(r.Accelerators.List) != 1 {
		return ""
	}
	return r.Accelerators.List[0].Name
}

// AcceleratorCount is the count of a single-accelerator request, or 0.
func (r *Resources) AcceleratorCount() float64 {
	if len(r.Accelerators.List) != 1 {
		return 0
	}
	return r.Accelerators.List[0].Count
}

// Spot reports whether spot instances are requested (unset = on-demand).
func (r *Resources) Spot() bool { return r.UseSpot != nil && *r.UseSpot }

// DiskSizeGB is the OS disk size, with the default filled in.
func (r *Resources) DiskSizeGB() int {
	if r.DiskSize == 0 {
		return DefaultDiskSizeGB
	}
	return r.DiskSize
}

// DockerImage is the container image the task runs in (without the
// docker: prefix), or "".
func (r *Resources) DockerImage() string {
	if r.ImageID == nil {
		return ""
	}
	return r.ImageID.DockerImage()
}
