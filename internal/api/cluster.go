package api

import "encoding/json"

// ClusterRecord is one cluster as /status returns it and `sky status -o
// json` prints it (the CLI passes the server's JSON through).
type ClusterRecord struct {
	Name               string            `json:"name"`
	LaunchedAt         int64             `json:"launched_at"`
	LastUse            *string           `json:"last_use"`
	Status             string            `json:"status"`
	Autostop           int               `json:"autostop"`
	ToDown             bool              `json:"to_down"`
	Owner              []string          `json:"owner"`
	Metadata           map[string]any    `json:"metadata"`
	ClusterHash        string            `json:"cluster_hash"`
	ClusterEverUp      bool              `json:"cluster_ever_up"`
	StatusUpdatedAt    int64             `json:"status_updated_at"`
	UserHash           string            `json:"user_hash"`
	UserName           string            `json:"user_name"`
	ConfigHash         *string           `json:"config_hash"`
	Workspace          string            `json:"workspace"`
	LastCreationYAML   *string           `json:"last_creation_yaml"`
	LastCreationCmd    *string           `json:"last_creation_command"`
	IsManaged          bool              `json:"is_managed"`
	LastEvent          *string           `json:"last_event"`
	LaunchStatusReason *string           `json:"launch_status_reason"`
	ResourcesStr       string            `json:"resources_str"`
	ResourcesStrFull   string            `json:"resources_str_full"`
	Nodes              int               `json:"nodes"`
	Cloud              *string           `json:"cloud"`
	Region             *string           `json:"region"`
	CPUs               *string           `json:"cpus"`
	Memory             *string           `json:"memory"`
	Accelerators       *string           `json:"accelerators"`
	Labels             map[string]string `json:"labels"`
	ClusterNameOnCloud *string           `json:"cluster_name_on_cloud"`
	NodeNames          *string           `json:"node_names"`
	Priority           *int              `json:"priority"`
	PriorityClass      *string           `json:"priority_class"`
	Links              map[string]string `json:"links"`
	// HeadIP is the head node's address (`sky status --ip`).
	HeadIP string `json:"head_ip,omitempty"`
}

// GPUsResult is what /list_accelerators returns: the rendered table and
// strict JSON. The server renders both so that NaN prices (not offered)
// never travel. The field order is the key order of the recorded
// return_value ("json" before "table").
type GPUsResult struct {
	JSON  json.RawMessage `json:"json"`
	Table string          `json:"table"`
}
