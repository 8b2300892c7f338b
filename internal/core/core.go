// Package core is the API server's operations: each is an op.Op that
// decodes its body (internal/api), does the work through the backend,
// optimizer, catalog and check packages, and returns a JSON-able result.
// Progress text goes to the request log, which the CLI streams. The
// server runs these operations without knowing them: `sky api start`
// (internal/cli) builds them with Ops and hands them to server.New.
package core

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra/local"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/state"
)

// Env is what the operations share.
type Env struct {
	Home    string
	Store   *state.Store
	Backend *backend.Backend

	catOnce sync.Once
	cat     *catalog.Catalog
}

// Options are what the operations need from the server that serves them.
type Options struct {
	// Home is where ~/.sky lives.
	Home  string
	Store *state.Store
	// Port is where the server answers locally (default api.DefaultPort);
	// autostop callbacks on local clusters call it back there.
	Port int
}

// New builds the operations' environment.
func New(o Options) (*Env, error) {
	sky, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating the sky binary: %w", err)
	}
	lp, err := local.New("")
	if err != nil {
		return nil, err
	}
	port := o.Port
	if port == 0 {
		port = api.DefaultPort
	}
	e := &Env{Home: o.Home, Store: o.Store}
	e.Backend = &backend.Backend{Home: o.Home, Store: o.Store, Sky: sky, Local: lp,
		CallbackEnv: []string{fmt.Sprintf("%s=%d", api.EnvPort, port)}}
	return e, nil
}

// Ops lists the operations of e.
func (e *Env) Ops() []op.Op {
	return []op.Op{
		{Name: "validate", Schedule: op.Short, Run: e.validate},
		{Name: "check", Schedule: op.Short, Run: e.check},
		{Name: "list_accelerators", Schedule: op.Short, Run: e.listAccelerators},
		{Name: "launch", Schedule: op.Long, Run: e.launch},
		{Name: "exec", Schedule: op.Long, Run: e.exec},
		{Name: "status", Schedule: op.Short, Run: e.status},
		{Name: "stop", Schedule: op.Short, Run: e.stop},
		{Name: "start", Schedule: op.Long, Run: e.start},
		{Name: "down", Schedule: op.Short, Run: e.down},
		{Name: "autostop", Schedule: op.Short, Run: e.autostop},
		{Name: "queue", Schedule: op.Short, Run: e.queue},
		{Name: "cancel", Schedule: op.Short, Run: e.cancel},
		{Name: "logs", Schedule: op.Long, Run: e.logs},
		{Name: "job_status", Schedule: op.Short, Run: e.jobStatus},
		{Name: "hook_logs", Schedule: op.Short, Run: e.hookLogs},
		{Name: "cost_report", Schedule: op.Short, Run: e.costReport},
		{Name: "local_up", Schedule: op.Long, Run: e.localUp},
		{Name: "local_down", Schedule: op.Long, Run: e.localDown},
		{Name: "ssh_up", Schedule: op.Long, Run: e.sshUp},
		{Name: "ssh_down", Schedule: op.Long, Run: e.sshDown},
	}
}

func (e *Env) catalog() *catalog.Catalog {
	e.catOnce.Do(func() {
		cfg, _ := config.Load(config.LoadOptions{Home: e.Home})
		e.cat = catalog.New(catalog.Options{Dir: cfg.CatalogDir(), CacheDir: e.Home + "/.sky/catalogs"})
	})
	return e.cat
}

func userOf(r *op.Request) backend.User {
	return backend.User{Name: r.User.Name, Hash: r.User.ID}
}

const settingLocalDisabled = "local_disabled"
const settingEnabledInfras = "enabled_infras"

// runCheck runs the credential checks, stores the enabled set and returns
// the results.
func (e *Env) runCheck(ctx context.Context, infras []string, verbose bool) ([]check.Result, error) {
	cfg, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return nil, err
	}
	disabled, _ := e.Store.GetSetting(ctx, settingLocalDisabled)
	res, err := check.Run(ctx, check.Options{Home: e.Home, Config: cfg, Infras: infras, Verbose: verbose, LocalDisabled: disabled == "1"})
	if err != nil {
		return nil, err
	}
	for i := range res {
		if infraKey(res[i].Infra) == "ssh" && res[i].Enabled {
			e.describeSSHPools(ctx, &res[i])
		}
	}
	if len(infras) == 0 {
		var enabled []string
		for _, r := range res {
			if r.Enabled {
				enabled = append(enabled, infraKey(r.Infra))
			}
		}
		raw, _ := json.Marshal(enabled)
		_ = e.Store.SetSetting(ctx, settingEnabledInfras, string(raw))
	}
	return res, nil
}

// infraKey maps a check display name ("AWS", "Kubernetes") to the
// optimizer's infra name ("aws", "kubernetes").
func infraKey(display string) string {
	k := strings.ToLower(display)
	switch k {
	case "ssh node pools", "ssh":
		return "ssh"
	}
	return strings.ReplaceAll(k, " ", "")
}

// enabledInfras is the stored result of the last `sky check`, running the
// checks once when there is none.
func (e *Env) enabledInfras(ctx context.Context) ([]string, error) {
	raw, err := e.Store.GetSetting(ctx, settingEnabledInfras)
	if err == nil && raw != "" {
		var out []string
		if json.Unmarshal([]byte(raw), &out) == nil {
			return out, nil
		}
	}
	if _, err := e.runCheck(ctx, nil, false); err != nil {
		return nil, err
	}
	raw, _ = e.Store.GetSetting(ctx, settingEnabledInfras)
	var out []string
	_ = json.Unmarshal([]byte(raw), &out)
	return out, nil
}

// localCapacity offers this machine as the local infrastructure: free of
// charge, with this machine's CPUs and memory, and no GPUs.
type localCapacity struct{ p *local.Provisioner }

func (l localCapacity) Name() string { return "local" }

func (l localCapacity) Feasible(_ context.Context, req optimizer.Request, numNodes int) ([]optimizer.Candidate, string) {
	switch {
	case req.AccName != "":
		return nil, fmt.Sprintf("this machine has no %s accelerators", req.AccName)
	case req.InstanceType != "":
		return nil, "the local infrastructure has no instance types (asked for " + req.InstanceType + ")"
	case req.UseSpot:
		return nil, "the local infrastructure has no spot instances"
	case req.CPUs.IsSet() && req.CPUs.Value > l.p.CPUs:
		return nil, fmt.Sprintf("asked for %g CPUs per node; this machine has %g", req.CPUs.Value, l.p.CPUs)
	case req.Memory.IsSet() && !req.Memory.PerCPU && req.Memory.Value > l.p.MemoryGB:
		return nil, fmt.Sprintf("asked for %g GB of memory per node; this machine has %.0f GB", req.Memory.Value, l.p.MemoryGB)
	}
	cpus := float64(runtime.NumCPU())
	if req.CPUs.IsSet() {
		cpus = req.CPUs.Value
	}
	mem := l.p.MemoryGB
	if req.Memory.IsSet() && !req.Memory.PerCPU {
		mem = req.Memory.Value
	}
	return []optimizer.Candidate{{Cloud: "local", VCPUs: cpus, MemoryGiB: mem}}, ""
}
