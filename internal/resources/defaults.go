package resources

import "github.com/skygo/skygo/internal/infrakind"

// DefaultDiskSizeGB is the OS disk size when disk_size is not given.
const DefaultDiskSizeGB = 256

// virtualCloud reports whether the infra has no real instance types and
// sizes a pod/allocation to the request instead (exact CPUs, not "at
// least"), and otherwise what the cloud picks when neither cpus nor
// memory is given (internal/infrakind: at least Sizes.CPUs vCPUs with
// Sizes.MemPerCPU GB each).
func virtualCloud(cloud string) (bool, infrakind.Sizes) {
	k, ok := infrakind.Lookup(cloud)
	if !ok {
		return false, infrakind.DefaultSizes
	}
	return k.Sized, k.DefaultSizes()
}

// DefaultCPUs is the cpus request a cloud uses when the task gives neither
// cpus nor memory: its kind's Sizes as a minimum ("8+" on most catalog
// clouds), and on a Sized kind (nodes sized to the request) exactly 2 (4
// when accelerators are requested).
func DefaultCPUs(cloud string, withAccelerators bool) Quantity {
	virtual, d := virtualCloud(cloud)
	if virtual {
		if withAccelerators {
			return Quantity{Value: 4}
		}
		return Quantity{Value: 2}
	}
	return Quantity{Value: d.CPUs, AtLeast: true}
}

// DefaultMemory is the matching memory request, in GB per vCPU
// (Quantity.PerCPU): its kind's Sizes (4x on most clouds), and on a Sized
// kind 1x (4x with accelerators).
func DefaultMemory(cloud string, withAccelerators bool) Quantity {
	virtual, d := virtualCloud(cloud)
	if virtual {
		if withAccelerators {
			return Quantity{Value: 4, PerCPU: true}
		}
		return Quantity{Value: 1, PerCPU: true}
	}
	return Quantity{Value: d.MemPerCPU, PerCPU: true}
}
