package awsx

import "testing"

func TestRemoteIdentity(t *testing.T) {
	list := []any{map[string]any{"prod-*": "LOCAL_CREDENTIALS"}, map[string]any{"*": "my-profile"}}
	for _, c := range []struct {
		v       any
		cluster string
		want    string
	}{
		{nil, "x", IdentityServiceAccount}, // SkyGo's default never copies credentials
		{"", "x", IdentityServiceAccount},
		{"NO_UPLOAD", "x", IdentityNoUpload},
		{list, "prod-1", IdentityLocal},
		{list, "dev", "my-profile"},
		{[]any{map[string]any{"a*": "NO_UPLOAD"}}, "b", IdentityServiceAccount},
	} {
		got, err := RemoteIdentity(c.v, c.cluster)
		if err != nil || got != c.want {
			t.Errorf("RemoteIdentity(%v, %q) = %q, %v; want %q", c.v, c.cluster, got, err, c.want)
		}
	}
	for _, bad := range []any{42, []any{"x"}, []any{map[string]any{"a": 1}}, []any{map[string]any{"[": "X"}}} {
		if _, err := RemoteIdentity(bad, "a"); err == nil {
			t.Errorf("RemoteIdentity(%v): want an error", bad)
		}
	}
}
