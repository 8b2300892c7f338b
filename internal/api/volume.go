package api

// VolumeMount is one task `volumes:` entry as the server receives it:
// Path is the mount path on the nodes as written (absolute or ~/...),
// Name the volume made by `sky volumes apply`, SubPath an optional
// directory inside it that is mounted instead of its root.
type VolumeMount struct {
	Path    string `json:"path"`
	Name    string `json:"volume_name"`
	SubPath string `json:"sub_path,omitempty"`
	// Ephemeral is set for a volume made with the cluster and deleted
	// with it (the task gave a size, not a name); the backend names it.
	Ephemeral *EphemeralVolume `json:"ephemeral,omitempty"`
}

// EphemeralVolume is the task's description of an ephemeral volume.
type EphemeralVolume struct {
	SizeGi float64           `json:"size_gi"`
	Type   string            `json:"type,omitempty"` // when empty: infrakind.EphemeralVolumeType
	Labels map[string]string `json:"labels,omitempty"`
	Config map[string]any    `json:"config,omitempty"`
}

// VolumeApplyBody is the body of /volumes/apply: the volume spec after
// the CLI flags were laid over the YAML.
type VolumeApplyBody struct {
	Name        string            `json:"name"`
	Type        string            `json:"volume_type"`
	Infra       string            `json:"infra,omitempty"`
	Size        string            `json:"size,omitempty"`
	UseExisting bool              `json:"use_existing,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Config      map[string]any    `json:"config,omitempty"`
	// YAML is the spec as given, kept as the volume's creation_yaml.
	YAML string `json:"yaml,omitempty"`
}

// VolumeLsBody is the body of /volumes/ls.
type VolumeLsBody struct {
	Names   []string `json:"names,omitempty"`
	Refresh bool     `json:"refresh,omitempty"`
}

// VolumeDeleteBody is the body of /volumes/delete.
type VolumeDeleteBody struct {
	Names []string `json:"names,omitempty"`
	All   bool     `json:"all,omitempty"`
	Purge bool     `json:"purge,omitempty"`
}

// VolumeRecord is one volume as /volumes/ls returns it (SkyPilot's
// record fields).
type VolumeRecord struct {
	Name           string         `json:"name"`
	Type           string         `json:"type"`
	LaunchedAt     float64        `json:"launched_at"`
	Cloud          string         `json:"cloud"`
	Region         string         `json:"region"`
	Zone           string         `json:"zone"`
	Size           string         `json:"size"`
	Config         map[string]any `json:"config"`
	NameOnCloud    string         `json:"name_on_cloud"`
	UserHash       string         `json:"user_hash"`
	UserName       string         `json:"user_name"`
	Workspace      string         `json:"workspace"`
	LastAttachedAt float64        `json:"last_attached_at"`
	LastUse        string         `json:"last_use"`
	Status         string         `json:"status"`
	UsedByPods     []string       `json:"usedby_pods"`
	UsedByClusters []string       `json:"usedby_clusters"`
	IsEphemeral    bool           `json:"is_ephemeral"`
	ErrorMessage   string         `json:"error_message,omitempty"`
	// Infra is the volume's place as an infra string (local,
	// ssh/<pool>, ssh/<pool>/<host>).
	Infra string `json:"infra"`
	// HostPath is where the data lives on the host, for host-directory
	// volumes.
	HostPath string `json:"host_path,omitempty"`
}
