// Package core is the API server's operations: each is an op.Op that
// decodes its body (internal/api), does the work through the backend,
// optimizer, catalog and check packages, and returns a JSON-able result.
// Progress text goes to the request log, which the CLI streams. The
// server runs these operations without knowing them: `sky api start`
// (internal/cli) builds them with Ops and hands them to server.New.
package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/jobs"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/serve"
	"github.com/skygo/skygo/internal/state"
)

// Env is what the operations share.
type Env struct {
	Home    string
	Store   *state.Store
	Backend *backend.Backend
	// Jobs is the managed-jobs controller.
	Jobs *jobs.Env
	// Serve is the SkyServe controller.
	Serve *serve.Env

	catMu sync.Mutex
	cats  map[string]*catalog.Catalog // by catalog directory ("" = cache/hosted/built-in)
}

// Options are what the operations need from the server that serves them.
type Options struct {
	// Home is where ~/.sky lives.
	Home  string
	Store *state.Store
	// Port is where the server answers locally (default api.DefaultPort);
	// autostop callbacks on local clusters call it back there.
	Port int
	// Sky is the sky binary (default: this executable): local nodes'
	// autostop calls it back, and the node runtime builds that nodes and
	// load balancers run are looked for beside it (after
	// $SKYGO_RUNTIME_DIR; infra.NodeBinariesBeside).
	Sky string
	// CLI is the sky command line local callbacks run (autostop's
	// `sky stop`/`sky down`); default Sky.
	CLI string
	// Host is the address the server listens on; services' load
	// balancers listen there too (default 127.0.0.1).
	Host string
	// Auth is set when callers log in (basic auth or service accounts):
	// then only admins launch on the local infrastructure, unless
	// EnvLocalForUsers allows everyone.
	Auth bool
	// JobTimings and ServeTimings are the managed-job and SkyServe
	// controllers' intervals (zero: SkyPilot's).
	JobTimings   jobs.Timings
	ServeTimings serve.Timings
}

// New builds the operations' environment.
func New(o Options) (*Env, error) {
	sky := o.Sky
	if sky == "" {
		var err error
		if sky, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("locating the sky binary: %w", err)
		}
	}
	port := o.Port
	if port == 0 {
		port = api.DefaultPort
	}
	node := infra.NodeBinariesBeside(sky)
	e := &Env{Home: o.Home, Store: o.Store}
	e.Backend = &backend.Backend{Home: o.Home, Store: o.Store, Sky: sky, Node: node, CLI: o.CLI,
		CallbackEnv: []string{fmt.Sprintf("%s=%d", api.EnvPort, port)}}
	infras, err := infra.Open(infra.Env{Home: o.Home, Settings: o.Store, Sky: sky, Node: node,
		Down: func(ctx context.Context, name string, log io.Writer) error {
			err := e.Backend.Down(ctx, name, backend.User{}, true, false, log)
			if backend.IsNotFound(err) {
				// Remains with no record (a teardown cut short): reaped
				// under the cluster's lock, as the sweeper does.
				_, err = e.Backend.ReapOrphan(ctx, name, log)
			}
			if err != nil {
				return err
			}
			// The backend leaves the per-cluster line to whoever asked.
			fmt.Fprintf(log, "Terminating cluster %s...done.\n", name)
			return nil
		},
		Recheck: func(ctx context.Context) error {
			_, err := e.runCheck(ctx, nil, false)
			return err
		},
		Catalog: func() *catalog.Catalog { return e.catalog(nil) },
	})
	if err != nil {
		return nil, err
	}
	e.Backend.Infras = infras
	if o.Auth {
		e.Backend.MayProvision = e.mayProvision
	}
	e.Jobs = &jobs.Env{Home: o.Home, Store: o.Store, Backend: e.Backend,
		Plan: func(ctx context.Context, body api.LaunchBody, log io.Writer) (backend.Planner, error) {
			return e.planner(ctx, body, log)
		},
		Redact: newRedactingLog, Timings: o.JobTimings}
	e.Serve = &serve.Env{Home: o.Home, Store: o.Store, Backend: e.Backend, Sky: sky, LBHost: o.Host, Redact: newRedactingLog,
		Timings: o.ServeTimings,
		Plan: func(ctx context.Context, body api.LaunchBody, log io.Writer) (backend.Planner, error) {
			return e.planner(ctx, body, log)
		}}
	return e, nil
}

// Ops lists the operations of e. Each checks the client config its
// request carries first, so a bad --config or -w fails every command the
// same way, not only those that read a key of it.
func (e *Env) Ops() []op.Op {
	ops := e.ops()
	for i := range ops {
		run := ops[i].Run
		ops[i].Run = func(ctx context.Context, r *op.Request) (any, error) {
			if bytes.Contains(r.Body, []byte(`"`+requestConfigKey+`"`)) {
				if _, err := e.requestConfig(r); err != nil {
					return nil, err
				}
			}
			return run(ctx, r)
		}
	}
	return ops
}

func (e *Env) ops() []op.Op {
	return append([]op.Op{
		op.Handle(apiop.Validate, e.validate),
		op.Handle(apiop.Check, e.check),
		op.Handle(apiop.ListAccelerators, e.listAccelerators),
		op.Handle(apiop.ListAcceleratorCounts, e.listAcceleratorCounts),
		op.Handle(apiop.Launch, e.launch),
		op.Handle(apiop.Optimize, e.optimize),
		op.Handle(apiop.Exec, e.exec),
		op.Handle(apiop.Status, e.status),
		op.Handle(apiop.Stop, e.stop),
		op.Handle(apiop.Start, e.start),
		op.Handle(apiop.Down, e.down),
		op.Handle(apiop.Autostop, e.autostop),
		op.Handle(apiop.Queue, e.queue),
		op.Handle(apiop.Cancel, e.cancel),
		op.Handle(apiop.Logs, e.logs),
		op.Handle(apiop.JobStatus, e.jobStatus),
		op.Handle(apiop.Workspaces, e.workspaces),
		op.Handle(apiop.ClusterJobSpec, e.clusterJobSpec),
		op.Handle(apiop.DownloadLogs, e.downloadLogs),
		op.Handle(apiop.HookLogs, e.hookLogs),
		op.Handle(apiop.CostReport, e.costReport),
		op.Handle(apiop.StorageLs, e.storageLs),
		op.Handle(apiop.StorageDelete, e.storageDelete),
		op.Handle(apiop.Endpoints, e.endpoints),
		op.Handle(apiop.JobsLaunch, e.jobsLaunch),
		op.HandleStream(apiop.JobsQueue, e.jobsQueue, e.jobsQueueStream),
		op.Handle(apiop.JobsCancel, e.jobsCancel),
		op.Handle(apiop.JobsLogs, e.jobsLogs),
		op.Handle(apiop.JobsDownloadLogs, e.jobsDownloadLogs),
		op.Handle(apiop.PoolApply, e.poolApply),
		op.Handle(apiop.PoolStatus, e.poolStatus),
		op.Handle(apiop.PoolDown, e.poolDown),
		op.Handle(apiop.PoolLogs, e.poolLogs),
		op.Handle(apiop.PoolSyncDownLogs, e.poolSyncDown),
	}, append(append(e.serveOps(), e.volumeOps()...), e.Backend.Infras.Ops()...)...) // then `sky ssh up`, `sky local down`, ...
}

// catalog is the price catalog for a request: the directory its client's
// SKYPILOT_CATALOG_DIR names, else config catalog.dir, else the server's
// own SKYPILOT_CATALOG_DIR, else the cache, hosted and built-in catalogs.
// One Catalog per directory is kept, so each is parsed once.
func (e *Env) catalog(env map[string]string) *catalog.Catalog {
	dir := env[api.EnvCatalogDir]
	if dir == "" {
		cfg, _ := config.Load(config.LoadOptions{Home: e.Home})
		dir = cfg.CatalogDir()
	}
	if dir == "" {
		dir = os.Getenv(api.EnvCatalogDir)
	}
	e.catMu.Lock()
	defer e.catMu.Unlock()
	if c := e.cats[dir]; c != nil {
		return c
	}
	if e.cats == nil {
		e.cats = map[string]*catalog.Catalog{}
	}
	c := catalog.New(catalog.Options{Dir: dir, CacheDir: paths.CatalogCache(e.Home)})
	e.cats[dir] = c
	return c
}

// userOf is the backend's view of the request's user. Without
// authentication every user is an admin (the server trusts the client's
// name), so reading another user's cluster is then allowed, as SkyPilot does.
func userOf(r *op.Request) backend.User {
	return backend.User{Name: r.User.Name, Hash: r.User.ID, Admin: r.User.Role == state.RoleAdmin}
}

const docEnabledInfras = "check/enabled_infras"

// settingEnabledInfras is where builds before the versioned document kept
// the set; it is read when the document is absent.
const settingEnabledInfras = "enabled_infras"

// runCheck runs the credential checks, stores the enabled set and returns
// the results.
func (e *Env) runCheck(ctx context.Context, infras []string, verbose bool) ([]check.Result, error) {
	cfg, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return nil, err
	}
	return e.runCheckWith(ctx, cfg, infras, verbose)
}

// runCheckWith is runCheck under a request's config (its workspace).
func (e *Env) runCheckWith(ctx context.Context, cfg *config.Config, infras []string, verbose bool) ([]check.Result, error) {
	disabled, _ := e.Store.GetSetting(ctx, check.SettingLocalDisabled)
	res, err := check.Run(ctx, check.Options{Home: e.Home, Config: cfg, Infras: infras, Verbose: verbose, LocalDisabled: disabled == "1"})
	if err != nil {
		return nil, err
	}
	for i := range res {
		if !res[i].Enabled {
			continue
		}
		if in, err := e.Backend.Infras.Get(infra.ID{Kind: res[i].Key}); err == nil {
			if d, ok := in.(infra.CheckDescriber); ok {
				d.DescribeCheck(ctx, &res[i])
			}
		}
	}
	// A partial check (`sky check <kind>`) updates the infras it checked and
	// keeps the stored verdict of the others, so what it enabled is usable
	// at once, as SkyPilot's does. Local follows the others: it is enabled
	// automatically while nothing else is, and stays on after.
	var stored []string // what a build before the document kept
	if len(infras) > 0 {
		var ok bool
		if stored, ok = e.storedEnabled(ctx); !ok {
			// Nothing stored yet: the others' verdicts come from a full
			// check, once.
			if _, err := e.runCheck(ctx, nil, false); err != nil {
				return nil, err
			}
		}
	}
	checked := map[string]bool{}
	for _, r := range res {
		checked[r.Key] = true
	}
	order := check.Names()
	// One conditional read-modify-write, so two partial checks at once
	// (`sky check aws` beside `sky check gcp`, on one server or two) both
	// land.
	err = e.Store.UpdateDocument(ctx, docEnabledInfras, func(cur []byte) ([]byte, bool, error) {
		var prev, enabled []string
		if len(infras) > 0 {
			prev = stored
			if cur != nil {
				prev = nil
				_ = json.Unmarshal(cur, &prev)
			}
		}
		for _, k := range prev {
			if !checked[k] {
				enabled = append(enabled, k)
			}
		}
		for _, r := range res {
			if r.Enabled && !slices.Contains(enabled, r.Key) {
				enabled = append(enabled, r.Key)
			}
		}
		slices.SortStableFunc(enabled, func(a, b string) int {
			return slices.Index(order, a) - slices.Index(order, b)
		})
		raw, err := json.Marshal(enabled)
		return raw, true, err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// storedEnabled is the enabled set the last check stored; ok is false when
// none was (or it is unreadable).
func (e *Env) storedEnabled(ctx context.Context) (enabled []string, ok bool) {
	raw, err := e.Store.Document(ctx, docEnabledInfras)
	if errors.Is(err, state.ErrNotFound) {
		var s string
		s, err = e.Store.GetSetting(ctx, settingEnabledInfras)
		raw = []byte(s)
	}
	if err != nil || len(raw) == 0 {
		return nil, false
	}
	if json.Unmarshal(raw, &enabled) != nil {
		return nil, false
	}
	return enabled, true
}

// enabledInfras is the stored result of the last `sky check`, running the
// checks once when there is none.
func (e *Env) enabledInfras(ctx context.Context) ([]string, error) {
	if out, ok := e.storedEnabled(ctx); ok {
		return out, nil
	}
	if _, err := e.runCheck(ctx, nil, false); err != nil {
		return nil, err
	}
	out, _ := e.storedEnabled(ctx)
	return out, nil
}

// requestConfigKey is where a request body carries the client's config.
const requestConfigKey = "override_skypilot_config"

// requestConfig is the config one request runs with: the server's, with
// the client's (--config, -w, its config files) laid over it except for
// the server-only keys, and active_workspace checked against the server's
// workspaces. Warnings about dropped keys go to the request log.
// clientConfigSource names the config a request carries in errors.
const clientConfigSource = "the client's config: --config, -w/--workspace, config files"

func (e *Env) requestConfig(r *op.Request) (*config.Config, error) {
	server, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return nil, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	var b struct {
		Config map[string]any `json:"override_skypilot_config"`
	}
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	if b.Config == nil {
		return server, e.checkWorkspaceAccess(r, server)
	}
	// The CLI merges its config sources without the schema (it does not
	// link it): the check is made here, for every client alike.
	if err := config.Validate(b.Config, clientConfigSource); err != nil {
		return nil, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	merged, warnings := config.OverlayClient(server, config.New(b.Config))
	for _, w := range warnings {
		fmt.Fprintf(r.Log, "Warning: %s\n", w)
	}
	if err := merged.CheckWorkspace(); err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) && ve.Source == "" {
			ve.Source = clientConfigSource
		}
		return nil, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	return merged, e.checkWorkspaceAccess(r, merged)
}

// checkWorkspaceAccess refuses a request whose active workspace is a
// private one its user may not use: every operation that makes or uses
// something reads its config here, so nothing is made in, or run from, a
// workspace the user is not allowed in.
func (e *Env) checkWorkspaceAccess(r *op.Request, cfg *config.Config) error {
	u := userOf(r)
	ws := cfg.ActiveWorkspace()
	if u.Admin || cfg.WorkspaceAllows(ws, u.Name, u.Hash) {
		return nil
	}
	return &op.Error{Type: "PermissionError", Message: config.WorkspaceAccessMessage(ws, u.Name)}
}

// hiddenWorkspaces are the defined workspaces the request's user may not
// see (none for an admin), for the listings that filter in the database.
func (e *Env) hiddenWorkspaces(r *op.Request) ([]string, error) {
	u := userOf(r)
	if u.Admin {
		return nil, nil
	}
	cfg, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return nil, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	var hidden []string
	for _, ws := range cfg.WorkspaceNames() {
		if !cfg.WorkspaceAllows(ws, u.Name, u.Hash) {
			hidden = append(hidden, ws)
		}
	}
	return hidden, nil
}

// workspaceAccess is which workspaces the request's user may see and use,
// under the server's config: all of them for an admin.
func (e *Env) workspaceAccess(r *op.Request) (func(ws string) bool, error) {
	u := userOf(r)
	if u.Admin {
		return func(string) bool { return true }, nil
	}
	cfg, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return nil, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	return func(ws string) bool { return cfg.WorkspaceAllows(ws, u.Name, u.Hash) }, nil
}
