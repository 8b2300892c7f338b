package api

import (
	"fmt"
	"regexp"
)

// MaxClusterNameLen bounds a cluster name: names become host names, file
// names and labels, and 63 is the shortest such limit (a DNS label).
const MaxClusterNameLen = 63

var clusterNameRE = regexp.MustCompile(`^[a-zA-Z]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?$`)

// CheckClusterName is the one cluster name rule (SkyPilot's pattern plus
// the length bound). The CLI, the backend and every infrastructure apply
// this same function, so a name accepted before anything is recorded is
// never refused later by the provisioner, which would leave an INIT record.
// A leading letter and no '/' already rule out path traversal, so '..'
// inside a name is harmless wherever the name becomes a path.
func CheckClusterName(name string) error {
	if name == "" {
		return fmt.Errorf("cluster name is empty; pass one with -c NAME")
	}
	if !clusterNameRE.MatchString(name) || len(name) > MaxClusterNameLen {
		return fmt.Errorf("invalid cluster name %q: it must start with a letter, end with a letter or digit, contain only letters, digits, '-', '_' and '.', and be at most %d characters", name, MaxClusterNameLen)
	}
	return nil
}
