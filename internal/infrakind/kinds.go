package infrakind

// The clouds of SkyPilot's catalog that have no plug-in directory of their
// own: an enabled one is priced by the optimizer, and nothing provisions
// there. The kinds with a plug-in describe themselves beside it
// (internal/infra/<name>/kind, linked by internal/infrakind/all). The
// features follow SkyPilot's unsupported-feature lists (spec/infra-*.md).
func init() {
	three := []string{"low", "medium", "high"}
	full := &Features{Spot: true, DiskTiers: AllTiers, Ports: true, VMImage: true, Docker: true}
	for _, k := range []Kind{
		{Name: "azure", Display: "Azure", Storage: true, TaskKeys: []string{"remote_identity", "vpc_name"},
			Features: &Features{Spot: true, DiskTiers: three, Ports: true, VMImage: true, Docker: true}},
		{Name: "cudo", Display: "Cudo", Sizes: Sizes{8, 2}},
		{Name: "daytona", Display: "Daytona"},
		{Name: "do", Display: "DO", Aliases: []string{"digitalocean"}},
		{Name: "fluidstack", Display: "Fluidstack", Sizes: Sizes{6, 4}},
		{Name: "gcp", Display: "GCP", Storage: true, Features: full, TPUs: true,
			TaskKeys: []string{"vpc_name", "subnet_names", "managed_instance_group", "enable_gvnic", "enable_gpu_direct", "placement_policy"}},
		{Name: "hyperbolic", Display: "Hyperbolic"},
		{Name: "hyperstack", Display: "Hyperstack"},
		{Name: "ibm", Display: "IBM"},
		{Name: "jarvislabs", Display: "JarvisLabs"},
		{Name: "lambda", Display: "Lambda", Aliases: []string{"lambdalabs"}, Sizes: Sizes{30, 4}},
		{Name: "lium", Display: "Lium"},
		{Name: "mithril", Display: "Mithril"},
		{Name: "nebius", Display: "Nebius", Storage: true, RegionSection: "region_configs"},
		{Name: "oci", Display: "OCI", Storage: true, RegionSection: "region_configs",
			Features: &Features{Spot: true, DiskTiers: three, Ports: true, VMImage: true, Docker: true}},
		{Name: "paperspace", Display: "Paperspace"},
		{Name: "primeintellect", Display: "PrimeIntellect"},
		{Name: "runpod", Display: "RunPod"},
		{Name: "scp", Display: "SCP", Sizes: Sizes{8, 2}},
		{Name: "seeweb", Display: "Seeweb"},
		{Name: "shadeform", Display: "Shadeform"},
		{Name: "spheron", Display: "Spheron"},
		{Name: "vast", Display: "Vast", TaskKeys: []string{"datacenter_only", "create_instance_kwargs"}},
		{Name: "verda", Display: "Verda", Aliases: []string{"datacrunch"}},
		{Name: "vsphere", Display: "vSphere", Sizes: Sizes{2, 4}},
		{Name: "yotta", Display: "Yotta"},
	} {
		Register(k)
	}
}
