package task

import "github.com/skygo/skygo/internal/task/taskschema"

// The loader's tests check what the API server checks: with the schema.
func init() { SetSchemaValidator(taskschema.Validator{}) }
