package ssh

import "github.com/skygo/skygo/internal/sshconfig"

// The OpenSSH client config reader, under the names this package's
// callers use (see internal/sshconfig).
type (
	Config     = sshconfig.Config
	HostConfig = sshconfig.HostConfig
)

// LoadConfig parses the OpenSSH client config at path; a missing file is
// an empty config.
func LoadConfig(path, home string) (*Config, error) { return sshconfig.LoadConfig(path, home) }

// ParseConfig parses config text.
func ParseConfig(text, home string) (*Config, error) { return sshconfig.ParseConfig(text, home) }

func expandTilde(p, home string) string { return sshconfig.ExpandTilde(p, home) }
