package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/state"
)

// rbacTTL bounds how stale the rbac: section a request is judged by may
// be: the server's config is re-read at most this often, so an edited
// ~/.sky/config.yaml takes effect without a restart (as SkyPilot's does)
// and a storm of requests does not re-read the file for each one.
const rbacTTL = 2 * time.Second

type rbacCache struct {
	mu   sync.Mutex
	at   time.Time
	rbac config.RBAC
	err  error
}

// rbac is the server config's rbac: section, or why it cannot be enforced.
func (s *Server) rbac() (config.RBAC, error) {
	c := &s.rbacCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < rbacTTL {
		return c.rbac, c.err
	}
	cfg, err := config.Load(config.LoadOptions{Home: s.opts.Home})
	if err == nil {
		c.rbac, c.err = cfg.RBACConfig()
	} else {
		c.rbac, c.err = config.RBAC{}, err
	}
	c.at = time.Now()
	return c.rbac, c.err
}

// authorize applies the role rules of rbac: to one request. Without
// authentication every caller is an admin, so there is nothing to check.
func (s *Server) authorize(r *http.Request, role string) error {
	if !s.authEnabled() || role == state.RoleAdmin {
		return nil
	}
	rb, err := s.rbac()
	if err != nil {
		// A rule that cannot be read is not a rule that can be skipped.
		return errf(http.StatusInternalServerError, "the API server's config cannot be enforced: %v; an admin must fix ~/.sky/config.yaml on the server", err)
	}
	if !rb.Permits(role, r.Method, r.URL.Path) {
		return errf(http.StatusForbidden, "Forbidden: role %s may not call %s %s (rbac.roles.%s.permissions in the API server's config)", role, r.Method, r.URL.Path, role)
	}
	return nil
}

// defaultRole is the role of a user created without one: rbac.default_role.
func (s *Server) defaultRole() (string, error) {
	rb, err := s.rbac()
	if err != nil {
		return "", errf(http.StatusInternalServerError, "the API server's config cannot be enforced: %v; an admin must fix ~/.sky/config.yaml on the server", err)
	}
	return rb.DefaultRole, nil
}
