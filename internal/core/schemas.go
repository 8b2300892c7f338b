package core

import (
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/config/configschema"
	"github.com/skygo/skygo/internal/task"
	"github.com/skygo/skygo/internal/task/taskschema"
)

// The operations check task YAML and config against their JSON schemas.
// The loaders leave the check out unless a binary installs it, so the CLI,
// which does not link this package, starts without compiling any schema
// and has the server validate instead; every binary that runs the
// operations validates. Installing only stores a pointer: the schemas
// compile on first use.
func init() {
	task.SetSchemaValidator(taskschema.Validator{})
	config.SetSchemaValidator(configschema.Validator{})
}
