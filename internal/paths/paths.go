// Package paths is the one place that says where SkyGo keeps its files.
//
// SkyGo shares ~/.sky with an installed SkyPilot: it reads SkyPilot's
// inputs there (config.yaml, ssh_node_pools.yaml) so a user's setup carries
// over, but everything SkyGo writes — its database, its API server's
// directory, its caches, the local infrastructure's sandboxes, generated
// ssh config — lives under ~/.sky/skygo, a directory SkyPilot never opens.
// SkyPilot's own state.db and api_server/ are therefore never read,
// migrated or modified, and the two can run side by side.
package paths

import "path/filepath"

// SkyDir is ~/.sky under home: SkyPilot's directory, where the shared
// inputs live.
func SkyDir(home string) string { return filepath.Join(home, ".sky") }

// Root is SkyGo's own directory, ~/.sky/skygo.
func Root(home string) string { return filepath.Join(SkyDir(home), "skygo") }

// StateDB is SkyGo's SQLite database.
func StateDB(home string) string { return filepath.Join(Root(home), "state.db") }

// ServerDir holds the local API server's log, pid, request logs and lock.
func ServerDir(home string) string { return filepath.Join(Root(home), "api_server") }

// Uploads is the API server's store of the files clients uploaded for
// their requests (internal/upload).
func Uploads(home string) string { return filepath.Join(ServerDir(home), "uploads") }

// UploadHashes is the client's cache of the hashes of the files it
// uploaded (internal/upload).
func UploadHashes(home string) string { return filepath.Join(Root(home), "upload_hashes.json") }

// CatalogCache is where downloaded price catalogs are cached.
func CatalogCache(home string) string { return filepath.Join(Root(home), "catalogs") }

// LocalInfra holds the local infrastructure's cluster sandboxes.
func LocalInfra(home string) string { return filepath.Join(Root(home), "local") }

// GeneratedSSH is the directory of generated `ssh <cluster>` entries.
func GeneratedSSH(home string) string { return filepath.Join(Root(home), "generated", "ssh") }

// GeneratedKnownHosts is the known_hosts of a cluster's generated
// entries: the host keys of nodes whose SSH server SkyGo runs. It is not
// in GeneratedSSH, whose every file ~/.ssh/config includes.
func GeneratedKnownHosts(home, cluster string) string {
	return filepath.Join(Root(home), "generated", "known_hosts", cluster)
}

// SSHKey is SkyGo's own private key for `ssh <cluster>` to nodes whose
// SSH server SkyGo runs (local clusters); the public key is beside it
// with a .pub suffix.
func SSHKey(home string) string { return filepath.Join(Root(home), "keys", "sky-key") }

// KnownHosts is SkyGo's known_hosts for node pool hosts.
func KnownHosts(home string) string { return filepath.Join(Root(home), "known_hosts") }

// Cookies is the client's cookie jar.
func Cookies(home string) string { return filepath.Join(Root(home), "cookies.txt") }

// Inputs SkyPilot and SkyGo share; SkyGo only reads them.

// Config is ~/.sky/config.yaml.
func Config(home string) string { return filepath.Join(SkyDir(home), "config.yaml") }

// SSHNodePools is ~/.sky/ssh_node_pools.yaml.
func SSHNodePools(home string) string { return filepath.Join(SkyDir(home), "ssh_node_pools.yaml") }

// SkyPilotStateDB is SkyPilot's own database, which SkyGo never opens for
// writing; it only checks whether it exists (to point users at their
// SkyPilot clusters).
func SkyPilotStateDB(home string) string { return filepath.Join(SkyDir(home), "state.db") }
