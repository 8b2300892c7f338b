// Package kind is how Slurm describes itself to the registry
// (internal/infrakind): its name, what the optimizer may ask of it, its
// config section and how `sky check` finds its clusters. It is the part of
// the plug-in the command line links: the standard library and the
// registry alone.
package kind

import (
	_ "embed"

	"github.com/skygo/skygo/internal/infrakind"
)

// Name is the kind's name, as in allowed_clouds.
const Name = "slurm"

//go:embed config.schema.json
var schema []byte

func init() {
	// Docker images need Pyxis: the plug-in's Feasible checks.
	infrakind.Register(infrakind.Kind{
		Name: Name, Display: "Slurm", Group: infrakind.OnPrem, Sized: true, ZeroMemory: true,
		Features:      &infrakind.Features{Docker: true, FixedDisk: true},
		TaskKeys:      []string{"sbatch_options", "cpu_partition"},
		ServerKeys:    []string{"cluster_configs"},
		RegionSection: "cluster_configs",
		Schema:        schema,
		Check:         check,
	})
}
