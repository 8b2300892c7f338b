package config

import (
	"strings"
	"testing"
)

func TestWorkspaceAllows(t *testing.T) {
	cfg := New(map[string]any{"workspaces": map[string]any{
		"open":    map[string]any{"aws": map[string]any{"disabled": true}},
		"shut":    map[string]any{"private": false, "allowed_users": []any{"alice"}},
		"secret":  map[string]any{"private": true, "allowed_users": []any{"alice", "b0b1d000"}},
		"nobody":  map[string]any{"private": true},
		"default": map[string]any{},
	}})
	for _, c := range []struct {
		ws, name, id string
		want         bool
	}{
		{"default", "bob", "x", true},
		{"", "bob", "x", true},
		{"open", "bob", "x", true},
		{"shut", "bob", "x", true}, // allowed_users alone does not make a workspace private
		{"secret", "alice", "a11ce000", true},
		{"secret", "bob", "x", false},
		{"secret", "robert", "b0b1d000", true}, // named by id
		{"secret", "", "", false},
		{"nobody", "alice", "a11ce000", false},
		{"undefined", "bob", "x", true}, // existence is CheckWorkspace's to judge
	} {
		if got := cfg.WorkspaceAllows(c.ws, c.name, c.id); got != c.want {
			t.Errorf("WorkspaceAllows(%q, %q, %q) = %v, want %v", c.ws, c.name, c.id, got, c.want)
		}
	}
	if msg := WorkspaceAccessMessage("secret", "bob"); !strings.Contains(msg, "does not have access to workspace 'secret'") || !strings.Contains(msg, "workspaces.secret.allowed_users") {
		t.Errorf("message: %s", msg)
	}
}

func rbacOf(t *testing.T, m map[string]any) (RBAC, error) {
	t.Helper()
	return New(map[string]any{"rbac": m}).RBACConfig()
}

func TestRBACConfig(t *testing.T) {
	r, err := New(nil).RBACConfig()
	if err != nil || r.DefaultRole != RoleUser {
		t.Fatalf("no rbac: %+v, %v; want default role user", r, err)
	}
	if r, err := rbacOf(t, map[string]any{"default_role": "admin"}); err != nil || r.DefaultRole != RoleAdmin {
		t.Errorf("default_role admin: %+v, %v", r, err)
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"default_role": "viewer"}, "no viewer role"},
		{map[string]any{"roles": map[string]any{"viewer": map[string]any{}}}, "rbac.roles.viewer"},
		{map[string]any{"roles": map[string]any{"admin": map[string]any{}}}, "an admin is never restricted"},
		{map[string]any{"roles": map[string]any{"user": map[string]any{"permissions": map[string]any{
			"blocklist": []any{map[string]any{"path": "volumes/delete"}}}}}}, "starting with /"},
	} {
		if _, err := rbacOf(t, c.m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rbac %v: %v, want an error with %q", c.m, err, c.want)
		}
	}
}

func TestRBACPermits(t *testing.T) {
	rules := func(kind string, rs ...map[string]any) map[string]any {
		var items []any
		for _, r := range rs {
			items = append(items, r)
		}
		return map[string]any{"roles": map[string]any{"user": map[string]any{"permissions": map[string]any{kind: items}}}}
	}
	block, err := rbacOf(t, rules("blocklist",
		map[string]any{"path": "/volumes/delete", "method": "post"},
		map[string]any{"path": "/serve/*"}))
	if err != nil {
		t.Fatal(err)
	}
	allow, err := rbacOf(t, rules("allowlist",
		map[string]any{"path": "/status", "method": "POST"},
		map[string]any{"path": "/users/create"}))
	if err != nil {
		t.Fatal(err)
	}
	none, _ := New(nil).RBACConfig()
	for _, c := range []struct {
		name         string
		r            RBAC
		role, method string
		path         string
		want         bool
	}{
		{"no rules", none, "user", "POST", "/launch", true},
		{"default blocklist", none, "user", "POST", "/workspaces/create", false},
		{"default blocklist: users", none, "user", "POST", "/users/create", false},
		{"admin passes the default blocklist", none, "admin", "POST", "/workspaces/create", true},
		{"blocked path", block, "user", "POST", "/volumes/delete", false},
		{"method is case-insensitive", block, "user", "post", "/volumes/delete", false},
		{"other method", block, "user", "GET", "/volumes/delete", true},
		{"prefix rule, any method", block, "user", "POST", "/serve/up", false},
		{"prefix is not a substring", block, "user", "POST", "/jobs/serve/up", true},
		{"unlisted path", block, "user", "POST", "/volumes/ls", true},
		{"admin is never restricted", block, "admin", "POST", "/volumes/delete", true},
		{"/api/ is open to every role", block, "user", "POST", "/api/cancel", true},
		{"allowlisted", allow, "user", "POST", "/status", true},
		{"not allowlisted", allow, "user", "POST", "/launch", false},
		{"/api/ with an allowlist", allow, "user", "GET", "/api/get", true},
		{"default blocklist wins over the allowlist", allow, "user", "POST", "/users/create", false},
	} {
		if got := c.r.Permits(c.role, c.method, c.path); got != c.want {
			t.Errorf("%s: Permits(%s, %s %s) = %v, want %v", c.name, c.role, c.method, c.path, got, c.want)
		}
	}
}
