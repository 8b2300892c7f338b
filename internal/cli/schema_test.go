package cli

import (
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/config/configschema"
	"github.com/skygo/skygo/internal/task"
	"github.com/skygo/skygo/internal/task/taskschema"
)

// Commands run in-process here check task YAML and config as a binary linking the
// schema does (the server's); runBinary tests exercise the CLI's own path,
// which has the server validate.
func init() {
	task.SetSchemaValidator(taskschema.Validator{})
	config.SetSchemaValidator(configschema.Validator{})
}
