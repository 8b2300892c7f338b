package core

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/state"
)

// EnvLocalForUsers, set to "1" in the API server's environment, lets users
// who are not admins launch on the local infrastructure of a server with
// authentication. It is the server's environment, not config, so no
// client's --config can set it.
const EnvLocalForUsers = "SKYGO_LOCAL_FOR_USERS"

// A local node's jobs run as the API server's own Unix user (root on a
// typical team server) in namespaces that hide the server's files and
// processes; namespaces do not hold back a job running as root, which
// can mount, read raw disks or load modules. On a server with
// authentication, only admins are already trusted with that.
const localRefusal = "the local infrastructure runs jobs as the API server's own user (%s), so on a server with users only admins may launch on it; " +
	"use another infrastructure (--infra), or ask an admin to allow it for every user by setting " + EnvLocalForUsers + "=1 in the API server's environment"

// localPolicy decides whether a user may have a new cluster made on the
// infrastructure kind: anyone when the server has no authentication (every
// caller is an admin there) or the admin allowed it, else admins only.
func localPolicy(kind string, auth, allowUsers bool, role string, serverUser string) error {
	if !infrakind.OnThisMachine(kind) || !auth || allowUsers || role == state.RoleAdmin {
		return nil
	}
	return fmt.Errorf(localRefusal, serverUser)
}

// mayProvision is backend.Backend.MayProvision on a server with
// authentication: the user's role comes from the users table, so a
// managed job or a service's replica is held to its owner's role.
func (e *Env) mayProvision(ctx context.Context, user backend.User, kind string) error {
	if !infrakind.OnThisMachine(kind) {
		return nil
	}
	role := ""
	if user.Admin {
		role = state.RoleAdmin
	} else if u, err := e.Store.GetUser(ctx, user.Hash); err == nil {
		role = u.Role
	} else if !errors.Is(err, state.ErrNotFound) {
		return err
	}
	return localPolicy(kind, true, os.Getenv(EnvLocalForUsers) == "1", role, serverUserName())
}

func serverUserName() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return fmt.Sprintf("uid %d", os.Geteuid())
}
