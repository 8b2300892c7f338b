package replicaset

import (
	"slices"

	"github.com/skygo/skygo/internal/api"
)

// Listed is a member as pruning sees it.
type Listed struct {
	ID, Version int
	Status      string
	// CleanedUp says a failed member's cluster is gone.
	CleanedUp bool
}

// NoLimit is Prune's keep for a set that lists every failed member of
// its newest version.
const NoLimit = -1

// Prune says what a set lists no longer: failed members whose clusters
// are gone, when of an older version (the newer one replaced them) or
// beyond the newest keep of the rest; and the versions no member left
// runs (latest is always kept). Members are given in id order.
func Prune(ms []Listed, latest int, versions []int, keep int) (members, dropVersions []int) {
	var failed []int
	for _, m := range ms {
		if !api.ReplicaFailedStatus(m.Status) || !m.CleanedUp {
			continue
		}
		if m.Version < latest {
			members = append(members, m.ID)
		} else {
			failed = append(failed, m.ID)
		}
	}
	if keep >= 0 && len(failed) > keep {
		members = append(members, failed[:len(failed)-keep]...)
	}
	used := map[int]bool{latest: true}
	for _, m := range ms {
		if !slices.Contains(members, m.ID) {
			used[m.Version] = true
		}
	}
	for _, v := range versions {
		if !used[v] {
			dropVersions = append(dropVersions, v)
		}
	}
	slices.Sort(dropVersions)
	return members, dropVersions
}

// Retiring says whether a set going down retires a member of status
// (SHUTTING_DOWN): every one not already, but a failed member whose
// cluster is gone (it has nothing left to tear down).
func Retiring(status string, cleanedUp bool) bool {
	return status != api.ReplicaShuttingDown && !(api.ReplicaFailedStatus(status) && cleanedUp)
}
