package resources

// DefaultDiskSizeGB is the OS disk size when disk_size is not given.
const DefaultDiskSizeGB = 256

// cpuDefaults is what a cloud picks when neither cpus nor memory is given:
// at least cpus vCPUs with memPerCPU GB each.
type cpuDefaults struct {
	cpus      float64
	memPerCPU float64
}

var cloudDefaults = map[string]cpuDefaults{
	"aws": {8, 4}, "gcp": {8, 4}, "azure": {8, 4}, "oci": {8, 4},
	"cudo": {8, 2}, "scp": {8, 2},
	"lambda":     {30, 4},
	"fluidstack": {6, 4},
	"vsphere":    {2, 4},
}

// fallbackDefaults is used for clouds the spec gives no numbers for; it
// matches the common cloud default.
var fallbackDefaults = cpuDefaults{8, 4}

// virtualCloud reports whether the infra has no real instance types and
// sizes a pod/allocation to the request instead (exact CPUs, not "at
// least"). SkyGo's local infra behaves the same way.
func virtualCloud(cloud string) bool {
	switch cloud {
	case "kubernetes", "ssh", "slurm", "local":
		return true
	}
	return false
}

// DefaultCPUs is the cpus request a cloud uses when the task gives neither
// cpus nor memory: "8+" on the big clouds, "30+" on Lambda, and on
// Kubernetes, SSH, Slurm and local exactly 2 (4 when accelerators are
// requested).
func DefaultCPUs(cloud string, withAccelerators bool) Quantity {
	if virtualCloud(cloud) {
		if withAccelerators {
			return Quantity{Value: 4}
		}
		return Quantity{Value: 2}
	}
	d, ok := cloudDefaults[cloud]
	if !ok {
		d = fallbackDefaults
	}
	return Quantity{Value: d.cpus, AtLeast: true}
}

// DefaultMemory is the matching memory request, in GB per vCPU
// (Quantity.PerCPU): 4x on most clouds, 2x on Cudo and SCP, and on
// Kubernetes, SSH, Slurm and local 1x (4x with accelerators).
func DefaultMemory(cloud string, withAccelerators bool) Quantity {
	if virtualCloud(cloud) {
		if withAccelerators {
			return Quantity{Value: 4, PerCPU: true}
		}
		return Quantity{Value: 1, PerCPU: true}
	}
	d, ok := cloudDefaults[cloud]
	if !ok {
		d = fallbackDefaults
	}
	return Quantity{Value: d.memPerCPU, PerCPU: true}
}
