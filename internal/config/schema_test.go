package config

import "github.com/skygo/skygo/internal/config/configschema"

// The loader's tests check what the API server checks: with the schema.
func init() { SetSchemaValidator(configschema.Validator{}) }
