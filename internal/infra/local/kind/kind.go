// Package kind is how the local infrastructure (this machine) describes
// itself to the registry (internal/infrakind): the fallback, enabled when
// nothing else is, sized to the request, holding host-dir volumes. It is
// the part of the plug-in the command line links: the standard library
// and the registry alone.
package kind

import "github.com/skygo/skygo/internal/infrakind"

// Name is the kind's name, as in allowed_clouds.
const Name = "local"

func init() {
	infrakind.Register(infrakind.Kind{
		Name: Name, Display: "Local", Group: infrakind.Fallback, Sized: true, Place: infrakind.Here,
		Features: &infrakind.Features{Ports: true, FixedDisk: true},
		Volumes: []infrakind.VolumeType{
			{Type: "host-dir", Where: "on this machine (infra: local)",
				Table: "Host directory volumes:", Columns: []infrakind.VolumeColumn{
					{Header: "HOST_PATH", Field: "host_path"}, {Header: "NAME_ON_CLOUD", Field: "name_on_cloud", Verbose: true}}},
		},
	})
}
