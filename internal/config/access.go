package config

import (
	"fmt"
	"strings"
)

// WorkspaceAllows says whether a non-admin user (by name or id) may use
// workspace ws: a workspace is open to everyone unless it is private, and
// a private one only to the users its allowed_users names (by name or
// by id, as SkyPilot allows). Admins are the caller's to let through.
// A workspace that is not defined is open: whether it exists is
// CheckWorkspace's to say.
func (c *Config) WorkspaceAllows(ws, userName, userID string) bool {
	if ws == "" {
		ws = "default"
	}
	v, ok := c.Lookup("workspaces", ws)
	if !ok {
		return true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return true
	}
	if private, _ := m["private"].(bool); !private {
		return true
	}
	users, _ := m["allowed_users"].([]any)
	for _, u := range users {
		if s, ok := u.(string); ok && s != "" && (s == userName || s == userID) {
			return true
		}
	}
	return false
}

// WorkspaceAccessMessage is the refusal of a private workspace, for the
// user to read.
func WorkspaceAccessMessage(ws, userName string) string {
	return fmt.Sprintf("User %s does not have access to workspace '%s': it is private and its allowed_users does not name you. "+
		"Ask an admin to add you to workspaces.%s.allowed_users in the API server's config, or use another workspace (-w NAME).", userName, ws, ws)
}

// Roles are the roles a SkyGo user can have.
const (
	RoleAdmin = "admin"
	RoleUser  = "user"
)

// RBACRule is one {path, method} entry of rbac.roles.<role>.permissions.
// Path matches exactly, or a prefix when it ends in "*"; an empty method
// matches every method.
type RBACRule struct {
	Path   string
	Method string
}

func (r RBACRule) matches(method, path string) bool {
	if r.Method != "" && !strings.EqualFold(r.Method, method) {
		return false
	}
	if p, ok := strings.CutSuffix(r.Path, "*"); ok {
		return strings.HasPrefix(path, p)
	}
	return path == r.Path
}

// RBAC is the rbac: section of the server's config.
type RBAC struct {
	// DefaultRole is the role of a user created without one.
	DefaultRole string
	// Blocklist and Allowlist are per role (only "user" can carry rules:
	// an admin is never restricted).
	Blocklist, Allowlist map[string][]RBACRule
}

// DefaultUserBlocklist is what SkyPilot's user role may never call: the
// workspace and user management endpoints. SkyGo's server answers those
// to admins only anyway; the list keeps the rule where a later endpoint
// would look for it.
var DefaultUserBlocklist = []RBACRule{
	{Path: "/workspaces/config", Method: "POST"},
	{Path: "/workspaces/update", Method: "POST"},
	{Path: "/workspaces/create", Method: "POST"},
	{Path: "/workspaces/delete", Method: "POST"},
	{Path: "/users/update", Method: "POST"},
	{Path: "/users/delete", Method: "POST"},
	{Path: "/users/create", Method: "POST"},
}

// RBACConfig reads and checks the rbac: section. What SkyGo cannot
// enforce is an error, not a key silently dropped: the viewer role and
// role names other than admin and user, and rules on the admin role.
func (c *Config) RBACConfig() (RBAC, error) {
	out := RBAC{DefaultRole: RoleUser, Blocklist: map[string][]RBACRule{}, Allowlist: map[string][]RBACRule{}}
	if d, ok := c.Lookup("rbac", "default_role"); ok {
		s, _ := d.(string)
		if s != RoleAdmin && s != RoleUser {
			return out, fmt.Errorf("rbac.default_role %v: SkyGo has the roles admin and user (no viewer role); set admin or user", d)
		}
		out.DefaultRole = s
	}
	roles, _ := c.Lookup("rbac", "roles")
	rm, _ := roles.(map[string]any)
	for role, v := range rm {
		switch role {
		case RoleUser:
		case RoleAdmin:
			return out, fmt.Errorf("rbac.roles.admin: an admin is never restricted; put rules under rbac.roles.user")
		default:
			return out, fmt.Errorf("rbac.roles.%s: SkyGo has the roles admin and user; only rbac.roles.user can carry rules", role)
		}
		perms, _ := v.(map[string]any)["permissions"].(map[string]any)
		for kind, list := range perms {
			items, _ := list.([]any)
			var rules []RBACRule
			for i, it := range items {
				m, _ := it.(map[string]any)
				p, _ := m["path"].(string)
				meth, _ := m["method"].(string)
				if !strings.HasPrefix(p, "/") {
					return out, fmt.Errorf("rbac.roles.%s.permissions.%s[%d].path %q: want an API path starting with /, e.g. /volumes/delete", role, kind, i, p)
				}
				rules = append(rules, RBACRule{Path: p, Method: strings.ToUpper(meth)})
			}
			switch kind {
			case "blocklist":
				out.Blocklist[role] = rules
			case "allowlist":
				out.Allowlist[role] = rules
			}
		}
	}
	return out, nil
}

// Permits says whether a user of role may call method path. An admin may
// call anything; the /api/ paths (request status, logs, cancel, health)
// are open to every role, as in SkyPilot. Otherwise a path on the role's
// blocklist (or SkyPilot's default user blocklist) is refused, and when
// the role has an allowlist only the paths on it are permitted.
func (r RBAC) Permits(role, method, path string) bool {
	if role == RoleAdmin || strings.HasPrefix(path, "/api/") {
		return true
	}
	for _, list := range [][]RBACRule{DefaultUserBlocklist, r.Blocklist[role]} {
		for _, rule := range list {
			if rule.matches(method, path) {
				return false
			}
		}
	}
	if allow, ok := r.Allowlist[role]; ok {
		for _, rule := range allow {
			if rule.matches(method, path) {
				return true
			}
		}
		return false
	}
	return true
}
