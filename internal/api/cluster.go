package api

import (
	"encoding/json"
	"fmt"
)

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

// Interval is one period a cluster was up: [start, end]; End nil = still up.
type Interval struct {
	Start int64
	End   *int64
}

// MarshalJSON writes [start, end-or-null], the cost-report format.
func (iv Interval) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{iv.Start, iv.End})
}

// OpenAPISchema describes the [start, end-or-null] pair for the API's
// description.
func (Interval) OpenAPISchema() map[string]any {
	return map[string]any{"type": "array", "minItems": 2, "maxItems": 2,
		"description": "[start, end]: epoch seconds; end null while the cluster is up",
		"items":       map[string]any{"type": "integer", "nullable": true}}
}

// UnmarshalJSON reads [start, end-or-null].
func (iv *Interval) UnmarshalJSON(b []byte) error {
	var pair []*int64
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if len(pair) != 2 || pair[0] == nil {
		return fmt.Errorf("usage interval %s: want [start, end-or-null]", b)
	}
	iv.Start, iv.End = *pair[0], pair[1]
	return nil
}

// CostRecord is one row of `sky cost-report -o json` (cli-output.md): a
// cluster incarnation, live or TERMINATED. The server builds it and the
// CLI renders the table from it.
type CostRecord struct {
	Name       string `json:"name"`
	LaunchedAt int64  `json:"launched_at"`
	Duration   int64  `json:"duration"`
	NumNodes   int    `json:"num_nodes"`
	// Resources is what was launched, as a resources-YAML mapping.
	Resources      map[string]any `json:"resources"`
	ClusterHash    string         `json:"cluster_hash"`
	UsageIntervals []Interval     `json:"usage_intervals"`
	TotalCost      float64        `json:"total_cost"`
	// CostPerHour is all nodes' hourly price (the table's COST/hr).
	CostPerHour      float64 `json:"cost_per_hour"`
	Cloud            *string `json:"cloud"`
	Region           *string `json:"region"`
	CPUs             *string `json:"cpus"`
	Memory           *string `json:"memory"`
	Accelerators     *string `json:"accelerators"`
	ResourcesStr     string  `json:"resources_str"`
	ResourcesStrFull string  `json:"resources_str_full"`
	Status           string  `json:"status"`
	UserHash         string  `json:"user_hash"`
	UserName         string  `json:"user_name"`
	Workspace        string  `json:"workspace"`
	LastEvent        *string `json:"last_event"`
	NodeNames        *string `json:"node_names"`
	Priority         *int    `json:"priority"`
	PriorityClass    *string `json:"priority_class"`
}
