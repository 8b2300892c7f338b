// Package kind is how SSH node pools describe themselves to the registry
// (internal/infrakind): their name, what the optimizer may ask of them,
// their config section, the volumes they hold and how `sky check` finds
// the pools. It is the part of the plug-in the command line links, so it
// stays light: the standard library, the registry and a YAML reader.
package kind

import (
	_ "embed"

	"github.com/skygo/skygo/internal/infrakind"
)

// Name is the kind's name, as in allowed_clouds.
const Name = "ssh"

//go:embed config.schema.json
var schema []byte

//go:embed workspace.schema.json
var workspaceSchema []byte

func init() {
	// A node pool runs tasks on its hosts as they are: it starts no
	// container and boots no image, so image_id cannot be honoured.
	infrakind.Register(infrakind.Kind{
		Name: Name, Display: "SSH", Group: infrakind.OnPrem, Sized: true, Place: infrakind.Pool, RegionNoun: "node pool",
		Features:        &infrakind.Features{Ports: true, FixedDisk: true},
		RegionPrefix:    "ssh-",
		TaskKeys:        []string{"custom_metadata", "pod_config", "provision_timeout"},
		RegionSection:   "context_configs",
		Schema:          schema,
		WorkspaceSchema: workspaceSchema,
		Volumes: []infrakind.VolumeType{
			{Type: "host-dir", Where: "on a host of an SSH node pool (infra: ssh/<pool>[/<host>])",
				Table: "Host directory volumes:", Columns: []infrakind.VolumeColumn{
					{Header: "HOST_PATH", Field: "host_path"}, {Header: "NAME_ON_CLOUD", Field: "name_on_cloud", Verbose: true}}},
		},
		Check: check,
	})
}
