package infrakind

// The kinds of SkyPilot's catalog plus SkyGo's own. Whether this build
// can provision on one is internal/infra's business (the registered
// plug-ins); an enabled kind nothing provisions is still priced by the
// optimizer. The features follow SkyPilot's unsupported-feature lists
// (spec/infra-*.md).
func init() {
	three := []string{"low", "medium", "high"}
	full := &Features{Spot: true, DiskTiers: AllTiers, Ports: true, VMImage: true, Docker: true}
	for _, k := range []Kind{
		{Name: "aws", Display: "AWS", Storage: true, Features: full},
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

		// Images run as containers; spot if the cluster has spot nodes.
		{Name: "kubernetes", Display: "Kubernetes", Aliases: []string{"k8s"}, Group: OnPrem, Sized: true, TPUs: true,
			Place: Context, RegionNoun: "context",
			Features:      &Features{Spot: true, Ports: true, VMImage: true, Docker: true},
			TaskKeys:      []string{"custom_metadata", "pod_config", "provision_timeout", "dws", "kueue", "quota", "remote_identity", "enable_docker", "set_pod_resource_limits"},
			RegionSection: "context_configs",
			PodKeys:       []string{"pod_config", "custom_metadata"},
			Verbs:         []string{"k8s-exec"}},
		// Docker images need Pyxis: the plug-in's Feasible checks.
		{Name: "slurm", Display: "Slurm", Group: OnPrem, Sized: true, ZeroMemory: true,
			Features:      &Features{Docker: true, FixedDisk: true},
			TaskKeys:      []string{"sbatch_options", "cpu_partition"},
			ServerKeys:    []string{"cluster_configs"},
			RegionSection: "cluster_configs"},
		// A node pool runs tasks on its hosts as they are: it starts no
		// container and boots no image, so image_id cannot be honoured.
		{Name: "ssh", Display: "SSH", Group: OnPrem, Sized: true, Place: Pool, RegionNoun: "node pool",
			Features:      &Features{Ports: true, FixedDisk: true},
			RegionPrefix:  "ssh-",
			TaskKeys:      []string{"custom_metadata", "pod_config", "provision_timeout"},
			RegionSection: "context_configs"},
		{Name: "local", Display: "Local", Group: Fallback, Sized: true, Place: Here,
			Features: &Features{Ports: true, FixedDisk: true}},
	} {
		Register(k)
	}
}
