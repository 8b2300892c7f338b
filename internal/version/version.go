// Package version holds the build's version and commit, set with -ldflags.
package version

var (
	// Version is SkyGo's release version.
	Version = "0.1.0-dev"
	// Commit is the git commit the binary was built from.
	Commit = "unknown"
	// APIVersion is the API server protocol version (docs/api.md). 2 added
	// tasks sent as YAML (task_yaml, dag_yaml) and /api/openapi.json.
	APIVersion = 2
)

// ServerHeaderPrefix starts the Server header of every SkyGo API server
// response; a client tells its own server from SkyPilot's (which may hold
// the same port) by it.
const ServerHeaderPrefix = "skygo/"

// ServerHeader is the Server header this build's API server sends.
func ServerHeader() string { return ServerHeaderPrefix + Version }
