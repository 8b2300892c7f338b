package core

import (
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/state"
)

func TestLocalPolicy(t *testing.T) {
	for _, c := range []struct {
		name       string
		kind       string
		auth       bool
		allowUsers bool
		role       string
		refused    bool
	}{
		{"no auth: every caller is an admin", "local", false, false, "", false},
		{"auth, admin", "local", true, false, state.RoleAdmin, false},
		{"auth, user", "local", true, false, state.RoleUser, true},
		{"auth, unknown user", "local", true, false, "", true},
		{"auth, user, allowed by the admin", "local", true, true, state.RoleUser, false},
		{"auth, user, another infra", "aws", true, false, state.RoleUser, false},
	} {
		err := localPolicy(c.kind, c.auth, c.allowUsers, c.role, "root")
		if (err != nil) != c.refused {
			t.Errorf("%s: err = %v, refused want %v", c.name, err, c.refused)
		}
		if err != nil && (!strings.Contains(err.Error(), EnvLocalForUsers+"=1") || !strings.Contains(err.Error(), "--infra") || !strings.Contains(err.Error(), "(root)")) {
			t.Errorf("%s: the refusal %q does not say what to do", c.name, err)
		}
	}
}
