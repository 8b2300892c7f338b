package ssh

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParsePools(t *testing.T) {
	yaml := `
gpus:
  user: ubuntu
  identity_file: ~/.ssh/gpu_key
  hosts:
    - 10.0.1.10
    - gpu-box
    - ip: 10.0.1.12
      user: alice
      password: s3cret
    - ip: jump-alias
      use_ssh_config: true
cpu:
  hosts: [cpu1.example.com]
`
	pools, err := ParsePools("pools.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if got := PoolNames(pools); !reflect.DeepEqual(got, []string{"cpu", "gpus"}) {
		t.Fatalf("names %v", got)
	}
	g := pools["gpus"]
	if g.User != "ubuntu" || g.IdentityFile != "~/.ssh/gpu_key" || len(g.Hosts) != 4 {
		t.Fatalf("pool: %+v", g)
	}
	want := []Host{
		{Name: "10.0.1.10", UseSSHConfig: true, Line: 6},
		{Name: "gpu-box", UseSSHConfig: true, Line: 7},
		{Name: "10.0.1.12", User: "alice", Password: "s3cret", Line: 8},
		{Name: "jump-alias", UseSSHConfig: true, Line: 11},
	}
	if !reflect.DeepEqual(g.Hosts, want) {
		t.Fatalf("hosts:\n%+v\nwant\n%+v", g.Hosts, want)
	}
}

func TestParsePoolsErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{"not a mapping", "- a\n- b\n", []string{"pools.yaml:1:1", "must be a mapping"}},
		{"no hosts", "p1:\n  user: x\n", []string{"pools.yaml:2:3", `pool "p1"`, "field hosts", "missing"}},
		{"empty hosts", "p1:\n  hosts: []\n", []string{`pool "p1"`, "field hosts", "non-empty"}},
		{"unknown pool field", "p1:\n  hosts: [a]\n  usr: x\n", []string{"pools.yaml:3:3", "field usr", "unknown field"}},
		{"bad host field", "p1:\n  hosts:\n    - ip: 1.2.3.4\n      port: 22\n", []string{"pools.yaml:4:7", `pool "p1"`, "host 1.2.3.4", "field port"}},
		{"host without ip", "p1:\n  hosts:\n    - user: bob\n", []string{"pools.yaml:3:7", "host #1", "field ip", "missing"}},
		{"bad use_ssh_config", "p1:\n  hosts:\n    - ip: h\n      use_ssh_config: maybe\n", []string{"host h", "field use_ssh_config", "true or false"}},
		{"list user", "p1:\n  user: [a]\n  hosts: [h]\n", []string{"pools.yaml:2:9", "field user", "must be a string"}},
		{"duplicate host", "p1:\n  hosts: [h, h]\n", []string{"host h", "listed twice"}},
		{"slash in name", "a/b:\n  hosts: [h]\n", []string{`pool "a/b"`, "may not contain '/'"}},
		{"two errors reported", "p1:\n  hosts: [a]\n  x: 1\np2:\n  hosts: 3\n", []string{"field x", `pool "p2"`}},
		{"bad yaml", "p1: [\n", []string{"not valid YAML"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePools("pools.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestPoolErrorsNeverShowPasswords(t *testing.T) {
	_, err := ParsePools("p.yaml", []byte("p1:\n  password: hunter2\n  hosts:\n    - ip: h\n      password: hunter3\n      bogus: 1\n"))
	if err == nil || strings.Contains(err.Error(), "hunter") {
		t.Fatalf("err = %v", err)
	}
	var pe *PoolError
	if !errors.As(err, &pe) || pe.Pool != "p1" || pe.Host != "h" || pe.Field != "bogus" || pe.Line != 6 {
		t.Fatalf("PoolError = %+v", pe)
	}
}

func TestLoadPoolsMissingFile(t *testing.T) {
	_, err := LoadPools(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestFilterAllowed(t *testing.T) {
	pools := map[string]*Pool{"a": {Name: "a"}, "b": {Name: "b"}, "c": {Name: "c"}}
	tests := []struct {
		allowed     []string
		wantKept    []string
		wantMissing []string
	}{
		{nil, []string{"a", "b", "c"}, nil},
		{[]string{}, []string{}, nil},
		{[]string{"c", "a", "zz"}, []string{"a", "c"}, []string{"zz"}},
	}
	for _, tc := range tests {
		kept, missing := FilterAllowed(pools, tc.allowed)
		if got := PoolNames(kept); !reflect.DeepEqual(got, tc.wantKept) || !reflect.DeepEqual(missing, tc.wantMissing) {
			t.Errorf("FilterAllowed(%v) = %v, %v; want %v, %v", tc.allowed, got, missing, tc.wantKept, tc.wantMissing)
		}
	}
}

func TestSSHConfigLookup(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh", "conf.d"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "conf.d", "extra"), []byte("Host inc-*\n  HostName 10.9.9.9\n  User incuser\n"), 0o600)
	cfg := `
# global
Include conf.d/*
Host web? !web9
  HostName %h.example.com
  Port 2200
Host db
  HostName=10.0.0.5
  User "db admin"
  IdentityFile ~/.ssh/db_key
  ProxyJump bastion
Host *
  User fallback
  IdentityFile ~/.ssh/default
Match host foo
  User never
`
	c, err := ParseConfig(cfg, home)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		alias string
		want  HostConfig
	}{
		{"web1", HostConfig{HostName: "web1.example.com", Port: "2200", User: "fallback", IdentityFiles: []string{home + "/.ssh/default"}}},
		{"web9", HostConfig{User: "fallback", IdentityFiles: []string{home + "/.ssh/default"}}},
		{"web10", HostConfig{User: "fallback", IdentityFiles: []string{home + "/.ssh/default"}}},
		{"db", HostConfig{HostName: "10.0.0.5", User: "db admin", ProxyJump: "bastion", IdentityFiles: []string{home + "/.ssh/db_key", home + "/.ssh/default"}}},
		{"inc-1", HostConfig{HostName: "10.9.9.9", User: "incuser", IdentityFiles: []string{home + "/.ssh/default"}}},
		{"foo", HostConfig{User: "fallback", IdentityFiles: []string{home + "/.ssh/default"}}},
	}
	for _, tc := range tests {
		if got := c.Lookup(tc.alias, home); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lookup(%s) = %+v, want %+v", tc.alias, got, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	home := t.TempDir()
	c, _ := ParseConfig("Host alias\n  HostName 10.1.1.1\n  User cfguser\n  Port 2022\n  IdentityFile ~/cfgkey\n  ProxyJump jumper@bastion:2222\nHost bastion\n  HostName 10.1.1.254\n", home)
	r := &Resolver{Home: home, Config: c, LocalUser: "me"}
	pool := &Pool{Name: "p", User: "pooluser", IdentityFile: "~/poolkey"}
	tests := []struct {
		name string
		host Host
		want Endpoint
	}{
		{"plain ip with pool defaults", Host{Name: "10.0.0.1", UseSSHConfig: true},
			Endpoint{Name: "10.0.0.1", Addr: "10.0.0.1", Port: 22, User: "pooluser", IdentityFiles: []string{home + "/poolkey"}}},
		{"alias: ssh config wins over pool", Host{Name: "alias", UseSSHConfig: true},
			Endpoint{Name: "alias", Addr: "10.1.1.1", Port: 2022, User: "cfguser", IdentityFiles: []string{home + "/cfgkey"},
				Jumps: []Endpoint{{Name: "bastion", Addr: "10.1.1.254", Port: 2222, User: "jumper"}}}},
		{"dict: pool wins over ssh config, host wins over both", Host{Name: "alias", User: "hostuser"},
			Endpoint{Name: "alias", Addr: "10.1.1.1", Port: 2022, User: "hostuser", IdentityFiles: []string{home + "/poolkey"},
				Jumps: []Endpoint{{Name: "bastion", Addr: "10.1.1.254", Port: 2222, User: "jumper"}}}},
		{"password only", Host{Name: "10.0.0.2", Password: "pw"},
			Endpoint{Name: "10.0.0.2", Addr: "10.0.0.2", Port: 22, User: "pooluser", Password: "pw", IdentityFiles: []string{home + "/poolkey"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Resolve(pool, tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if tc.host.Password != "" && strings.Contains(got.String(), tc.host.Password) {
				t.Fatalf("String() shows the password: %s", got)
			}
		})
	}
	// No pool defaults, no config: the current user and no key at all.
	got, err := r.Resolve(&Pool{Name: "bare"}, Host{Name: "h", UseSSHConfig: true})
	if err != nil || got.User != "me" || got.Port != 22 || len(got.IdentityFiles) != 0 {
		t.Fatalf("bare: %+v %v", got, err)
	}
	if _, err := authMethods(got); err == nil || !strings.Contains(err.Error(), "no identity_file or password") {
		t.Fatalf("auth without credentials: %v", err)
	}
}

func TestParseFacts(t *testing.T) {
	out := "Linux\nx86_64\n8\n16384000\n/home/u\n10.0.0.7\nNVIDIA A100-SXM4-80GB\nNVIDIA A100-SXM4-80GB\nTesla T4\n"
	f, err := parseFacts(out)
	if err != nil {
		t.Fatal(err)
	}
	want := HostFacts{OS: "linux", Arch: "amd64", CPUs: 8, MemoryGB: 15.6, Home: "/home/u", IP: "10.0.0.7", GPUs: map[string]int{"A100-80GB": 2, "T4": 1}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("got %+v want %+v", f, want)
	}
	if _, err := parseFacts("Linux\naarch64\nmany\n1\n/\n\n"); err == nil || !strings.Contains(err.Error(), "CPU count") {
		t.Fatalf("bad cpus: %v", err)
	}
}
