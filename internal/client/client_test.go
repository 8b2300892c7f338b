package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

func TestEndpointResolution(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opt, env   string
		login      string
		port       string
		want       string
		wantLocal  bool
		wantAuth   string
		wantErrSub string
	}{
		{name: "default local", want: "http://127.0.0.1:46580", wantLocal: true},
		{name: "local port env", port: "47001", want: "http://127.0.0.1:47001", wantLocal: true},
		{name: "login", login: "http://10.0.0.5:46580", want: "http://10.0.0.5:46580"},
		{name: "env beats login", env: "https://sky.example.com/", login: "http://10.0.0.5:46580", want: "https://sky.example.com"},
		{name: "option beats env", opt: "http://1.2.3.4:1", env: "https://sky.example.com", want: "http://1.2.3.4:1"},
		{name: "basic auth in URL is hidden", env: "http://bob:s3cret@h:1", want: "http://h:1", wantAuth: "Basic "},
		{name: "not http", env: "ftp://x", wantErrSub: "not an http(s):// URL"},
		{name: "bad port", port: "x", wantErrSub: "not a port number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv(EnvEndpoint, tc.env)
			t.Setenv(api.EnvPort, tc.port)
			t.Setenv(EnvToken, "")
			if tc.login != "" {
				if err := WriteLogin(home, LoginConfig{Endpoint: tc.login}); err != nil {
					t.Fatal(err)
				}
			}
			c, err := New(Options{Endpoint: tc.opt, Home: home})
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("err = %v, want %q", err, tc.wantErrSub)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatal("error leaks the password")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Endpoint != tc.want || c.Local != tc.wantLocal || !strings.HasPrefix(c.auth, tc.wantAuth) {
				t.Fatalf("got %s local=%v auth=%q", c.Endpoint, c.Local, c.auth)
			}
			if strings.Contains(c.Endpoint, "s3cret") {
				t.Fatal("endpoint leaks the password")
			}
		})
	}
}

func TestLoginFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvToken, "")
	// A SkyPilot user's config.yaml, with the endpoint its own login wrote.
	cfg := ConfigPath(home)
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	orig := []byte("allowed_clouds: [aws]\napi_server:\n  endpoint: http://skypilot:46580\n")
	os.WriteFile(cfg, orig, 0o644)
	if lc, err := ReadLogin(home); err != nil || lc.Endpoint != "http://skypilot:46580" {
		t.Fatalf("before any SkyGo login, ReadLogin = %+v, %v; want config.yaml's endpoint", lc, err)
	}

	if err := WriteLogin(home, LoginConfig{Endpoint: "http://h:1", Token: "sky_abc"}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(LoginPath(home))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("login file: %v, mode %v, want 0600 (it holds a token)", err, st.Mode().Perm())
	}
	lc, err := ReadLogin(home)
	if err != nil || lc.Endpoint != "http://h:1" || lc.Token != "sky_abc" {
		t.Fatalf("ReadLogin = %+v, %v", lc, err)
	}
	c, _ := New(Options{Home: home})
	if c.auth != "Bearer sky_abc" || c.Local {
		t.Fatalf("client from login: auth=%q local=%v", c.auth, c.Local)
	}

	if err := WriteLogin(home, LoginConfig{}); err != nil {
		t.Fatal(err)
	}
	if lc, err := ReadLogin(home); err != nil || lc.Endpoint != "" || lc.Token != "" {
		t.Fatalf("after logout ReadLogin = %+v, %v; want nothing (not config.yaml's endpoint)", lc, err)
	}
	if c, _ := New(Options{Home: home}); !c.Local {
		t.Fatalf("after logout the client uses %s, want the local server", c.Endpoint)
	}
	if b, _ := os.ReadFile(cfg); string(b) != string(orig) {
		t.Fatalf("config.yaml was modified:\n%s", b)
	}
}
