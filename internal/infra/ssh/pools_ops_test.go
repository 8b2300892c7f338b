package ssh

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/state"
)

func TestHostMisfit(t *testing.T) {
	h := HostRecord{Name: "a", CPUs: 8, MemoryGB: 31.2, GPUs: map[string]int{"A100": 4}}
	for _, c := range []struct {
		name string
		host HostRecord
		req  optimizer.Request
		want string // substring; "" = fits
	}{
		{"no request", h, optimizer.Request{}, ""},
		{"cpus fit", h, optimizer.Request{CPUs: catalog.Bound{Value: 8}}, ""},
		{"too many cpus", h, optimizer.Request{CPUs: catalog.Bound{Value: 16}}, "16 CPUs asked, host has 8"},
		{"too much memory", h, optimizer.Request{Memory: catalog.Bound{Value: 64}}, "64 GB memory asked"},
		{"per-cpu memory is not compared", h, optimizer.Request{Memory: catalog.Bound{Value: 64, PerCPU: true}}, ""},
		{"gpus fit, any case", h, optimizer.Request{AccName: "a100", AccCount: 4}, ""},
		{"too few gpus", h, optimizer.Request{AccName: "A100", AccCount: 8}, "A100:8 asked, host has 4"},
		{"other gpu", h, optimizer.Request{AccName: "H100", AccCount: 1}, "host has 0"},
		{"unreachable host", HostRecord{Name: "b", Error: "ssh to b: unreachable"}, optimizer.Request{}, "unreachable"},
	} {
		got := hostMisfit(c.host, c.req)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: hostMisfit = %q, want %q", c.name, got, c.want)
		}
	}
}

func testInfra(t *testing.T, pools string) *Infra {
	t.Helper()
	home := t.TempDir()
	if pools != "" {
		if err := os.MkdirAll(filepath.Join(home, ".sky"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".sky", "ssh_node_pools.yaml"), []byte(pools), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := state.OpenSQLite(context.Background(), filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &Infra{env: infra.Env{Home: home, Settings: st}}
}

func TestSSHCapacity(t *testing.T) {
	e := testInfra(t, "big:\n  user: u\n  hosts: [h1, h2, h3]\nsmall:\n  user: u\n  hosts: [s1]\n")
	ctx := context.Background()
	rec := PoolRecord{Pool: "big", ProbedAt: time.Now(), Hosts: []HostRecord{
		{Name: "h1", CPUs: 4, MemoryGB: 16}, {Name: "h2", CPUs: 8, MemoryGB: 16}, {Name: "h3", Error: "ssh to h3: unreachable"}}}
	raw, _ := json.Marshal(rec)
	if err := e.env.Settings.SetSetting(ctx, sshPoolKey("big"), string(raw)); err != nil {
		t.Fatal(err)
	}
	capa := capacity{e}
	for _, c := range []struct {
		name       string
		req        optimizer.Request
		nodes      int
		wantPools  []string
		wantReason string
	}{
		{"any pool, one node", optimizer.Request{}, 1, []string{"ssh-big", "ssh-small"}, ""},
		{"two nodes: only big has them", optimizer.Request{}, 2, []string{"ssh-big"}, "pool small: has 1 host(s), 2 node(s) asked for"},
		{"three nodes: a host of big is down", optimizer.Request{}, 3, nil, "2 of 3 host(s) fit 3 node(s)"},
		{"pinned pool", optimizer.Request{Region: "ssh-small"}, 1, []string{"ssh-small"}, ""},
		{"unknown pool", optimizer.Request{Region: "ssh-nope"}, 1, nil, `no SSH node pool "nope"`},
		{"cpus from the record", optimizer.Request{Region: "ssh-big", CPUs: catalog.Bound{Value: 6}}, 2, nil, "6 CPUs asked, host has 4"},
		{"spot", optimizer.Request{UseSpot: true}, 1, nil, "no spot"},
		{"instance type", optimizer.Request{InstanceType: "m5.large"}, 1, nil, "no instance types"},
	} {
		cands, reason := capa.Feasible(ctx, c.req, c.nodes)
		var got []string
		for _, cd := range cands {
			if cd.Cloud != "ssh" || cd.HourlyPrice != 0 {
				t.Errorf("%s: candidate %+v: want cloud ssh at no cost", c.name, cd)
			}
			got = append(got, cd.Region)
		}
		if strings.Join(got, ",") != strings.Join(c.wantPools, ",") {
			t.Errorf("%s: pools %v, want %v (reason %q)", c.name, got, c.wantPools, reason)
		}
		if c.wantReason != "" && !strings.Contains(reason, c.wantReason) {
			t.Errorf("%s: reason %q, want it to contain %q", c.name, reason, c.wantReason)
		}
	}
}

func TestSSHCapacityHonoursAllowedPools(t *testing.T) {
	e := testInfra(t, "a:\n  user: u\n  hosts: [h1]\nb:\n  user: u\n  hosts: [h2]\n")
	if err := os.WriteFile(filepath.Join(e.env.Home, ".sky", "config.yaml"), []byte("ssh:\n  allowed_node_pools: [b]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cands, reason := capacity{e}.Feasible(context.Background(), optimizer.Request{}, 1)
	if len(cands) != 1 || cands[0].Region != "ssh-b" {
		t.Errorf("allowed_node_pools [b]: candidates %+v (reason %q), want only ssh-b", cands, reason)
	}
	if _, reason := (capacity{e}).Feasible(context.Background(), optimizer.Request{Region: "ssh-a"}, 1); !strings.Contains(reason, "allowed_node_pools") {
		t.Errorf("pool a is not allowed: reason %q should say so", reason)
	}
}
