package convert

// The task loader the tests check converted YAML with knows every
// infrastructure kind, as the command line does.
import _ "github.com/skygo/skygo/internal/infrakind/all"
