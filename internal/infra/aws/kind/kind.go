// Package kind is how AWS describes itself to the registry
// (internal/infrakind): its names, features, config section and how
// `sky check` finds its credentials. It is the part of the plug-in the
// command line links, so it links the standard library and the registry
// alone, never the SDK.
package kind

import (
	_ "embed"

	"github.com/skygo/skygo/internal/infrakind"
)

// Name is the kind's name, as in allowed_clouds.
const Name = "aws"

//go:embed config.schema.json
var schema []byte

//go:embed workspace.schema.json
var workspaceSchema []byte

func init() {
	infrakind.Register(infrakind.Kind{
		Name: Name, Display: "AWS", Storage: true,
		Features:        &infrakind.Features{Spot: true, DiskTiers: infrakind.AllTiers, Ports: true, VMImage: true, Docker: true},
		Schema:          schema,
		WorkspaceSchema: workspaceSchema,
		Check:           check,
	})
}
