package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/state"
)

// MayUseVolume says whether u may list, mount or delete v: its owner and
// admins may. A volume is one user's data, so a workspace does not share
// it (SkyGo is stricter than SkyPilot here: see docs/api.md "Users, roles
// and what a non-admin can do"). u with no hash is the server itself
// (teardown, refresh), and a record with no owner predates owners.
func MayUseVolume(v *state.Volume, u User) bool {
	return u.Admin || u.Hash == "" || v.UserHash == "" || v.UserHash == u.Hash
}

// VolumeOwnerError is the refusal of another user's volume.
func VolumeOwnerError(v *state.Volume, what string) error {
	return &ClusterError{Type: "PermissionError", Msg: fmt.Sprintf(
		"Volume %s belongs to another user (%s); only its owner or an admin can %s it.", v.Name, v.UserName, what)}
}

// CheckVolumeAccess refuses a task that mounts a volume u may not use, so
// a managed job or a service is refused when it is submitted, not when its
// controller launches it.
func (b *Backend) CheckVolumeAccess(ctx context.Context, tasks []api.TaskSpec, u User) error {
	for _, t := range tasks {
		for _, m := range t.Volumes {
			if m.Ephemeral != nil || m.Name == "" {
				continue
			}
			v, err := b.Store.GetVolume(ctx, m.Name)
			if errors.Is(err, state.ErrNotFound) {
				continue // the launch says "not found" in its own words
			}
			if err != nil {
				return err
			}
			if !MayUseVolume(v, u) {
				return VolumeOwnerError(v, "mount")
			}
		}
	}
	return nil
}
