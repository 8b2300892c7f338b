package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/task"
)

func (e *Env) validate(ctx context.Context, r *op.Request) (any, error) {
	var b api.ValidateBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	opts := task.LoadOptions{Env: b.Env, LookupEnv: func(string) (string, bool) { return "", false }}
	for k, v := range b.Secrets {
		opts.Secrets = append(opts.Secrets, k+"="+v)
	}
	dag, err := task.LoadBytes(b.Name, []byte(b.YAML), opts)
	if err != nil {
		return nil, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	out := api.ValidateResult{Tasks: []api.ValidatedTask{}}
	for _, t := range dag.Tasks {
		rs := "-"
		if t.Resources != nil {
			rs = t.Resources.String()
		}
		out.Tasks = append(out.Tasks, api.ValidatedTask{Name: t.Name, Resources: rs, NumNodes: t.NumNodes})
	}
	return out, nil
}

func (e *Env) check(ctx context.Context, r *op.Request) (any, error) {
	var b api.CheckBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return e.runCheck(ctx, b.Infras, b.Verbose)
}

func (e *Env) listAccelerators(ctx context.Context, r *op.Request) (any, error) {
	var b api.GPUsBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	f := catalog.GPUFilter{Name: b.Name, Count: b.Count, AllRegions: b.AllRegions}
	if b.Infra != "" {
		inf, err := resources.ParseInfra(b.Infra)
		if err != nil {
			return nil, &op.Error{Type: "ValueError", Message: err.Error()}
		}
		if inf.Cloud != "" {
			if !catalog.IsCatalogCloud(inf.Cloud) {
				return api.GPUsResult{Table: "No accelerators found.\n", JSON: json.RawMessage("{}")}, nil
			}
			f.Clouds = []string{inf.Cloud}
		}
		f.Region = inf.Region
	}
	list, err := e.catalog().ListGPUs(ctx, f)
	if err != nil {
		return nil, err
	}
	// Prices may be NaN (not offered): render here, where the types are,
	// so only strict JSON and text travel.
	var tb, js bytes.Buffer
	if err := optimizer.WriteGPUTable(&tb, list, optimizer.GPUListOptions{Name: b.Name, All: b.All}); err != nil {
		return nil, err
	}
	if err := optimizer.WriteGPUJSON(&js, list); err != nil {
		return nil, err
	}
	return api.GPUsResult{Table: tb.String(), JSON: json.RawMessage(bytes.TrimSpace(js.Bytes()))}, nil
}

// planner returns the optimizer call the backend uses, over the enabled
// infras and the catalog; it also prints the plan to log.
func (e *Env) planner(ctx context.Context, body api.LaunchBody, r *op.Request) (backend.Planner, error) {
	enabled, err := e.enabledInfras(ctx)
	if err != nil {
		return nil, err
	}
	target := optimizer.Cost
	if body.OptimizeTime {
		target = optimizer.Time
	}
	return func(ctx context.Context, res *resources.Resources, numNodes int, blocked []optimizer.Blocked) (*optimizer.Plan, error) {
		opts, ordered := optimizer.FromResources(res)
		plan, err := optimizer.Optimize(ctx, optimizer.Input{
			Tasks:    []optimizer.Task{{Name: body.Task.Name, NumNodes: numNodes, Options: opts, Ordered: ordered}},
			Enabled:  enabled,
			Blocked:  blocked,
			Target:   target,
			Catalog:  e.catalog(),
			Capacity: e.Backend.Infras.Capacities(),
		})
		if err != nil {
			return nil, &op.Error{Type: "ResourcesUnavailableError", Message: err.Error()}
		}
		if err := optimizer.WriteDryRun(r.Log, plan, optimizer.FormatOptions{Verbose: body.Verbose}); err != nil {
			return nil, err
		}
		return plan, nil
	}, nil
}

func (e *Env) launch(ctx context.Context, r *op.Request) (any, error) {
	var b api.LaunchBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	plan, err := e.planner(ctx, b, r)
	if err != nil {
		return nil, err
	}
	if b.Dryrun {
		res, err := resources.Parse(b.Task.Resources)
		if err != nil {
			return nil, &op.Error{Type: "ValueError", Message: err.Error()}
		}
		if _, err := plan(ctx, res, max(b.Task.NumNodes, 1), nil); err != nil {
			return nil, err
		}
		fmt.Fprintln(r.Log, "Dryrun finished.")
		return api.LaunchResult{ClusterName: b.ClusterName}, nil
	}
	release, shown, err := e.resolveUploads(&b.Task, r.User, true)
	if err != nil {
		return nil, err
	}
	defer release()
	log := newRequestLog(r.Log, b.Task.Secrets, shown)
	defer closeLog(log)
	out, err := e.Backend.Launch(ctx, b, userOf(r), plan, log)
	return out, opErr(err)
}

func (e *Env) exec(ctx context.Context, r *op.Request) (any, error) {
	var b api.ExecBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	release, shown, err := e.resolveUploads(&b.Task, r.User, false)
	if err != nil {
		return nil, err
	}
	defer release()
	log := newRequestLog(r.Log, b.Task.Secrets, shown)
	defer closeLog(log)
	out, err := e.Backend.Exec(ctx, b, userOf(r), log)
	return out, opErr(err)
}

// opErr keeps the backend's typed errors as the request's error type.
func opErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *backend.ClusterError
	if errors.As(err, &ce) {
		return &op.Error{Type: ce.Type, Message: ce.Msg}
	}
	return err
}

// clusterNames resolves the selection of a ClustersBody.
func (e *Env) clusterNames(ctx context.Context, b api.ClustersBody, u backend.User) ([]string, error) {
	if !b.All {
		return b.ClusterNames, nil
	}
	f := state.ClusterFilter{}
	if !b.AllUsers {
		f.UserHash = u.Hash
	}
	cs, err := e.Store.ListClusters(ctx, f)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names, nil
}

// forEach runs f on every selected cluster and joins the errors.
func (e *Env) forEach(ctx context.Context, r *op.Request, f func(name string) error) (any, error) {
	var b api.ClustersBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	names, err := e.clusterNames(ctx, b, userOf(r))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		fmt.Fprintln(r.Log, "No clusters to act on.")
		return []string{}, nil
	}
	var errs []error
	for _, n := range names {
		if err := f(n); err != nil {
			errs = append(errs, opErr(err))
		}
	}
	if len(errs) == 1 {
		return names, errs[0]
	}
	return names, errors.Join(errs...)
}

func (e *Env) stop(ctx context.Context, r *op.Request) (any, error) {
	var b api.ClustersBody
	_ = r.Decode(&b)
	return e.forEach(ctx, r, func(n string) error { return e.Backend.Stop(ctx, n, userOf(r), b.AllUsers, r.Log) })
}

func (e *Env) start(ctx context.Context, r *op.Request) (any, error) {
	var b api.ClustersBody
	_ = r.Decode(&b)
	return e.forEach(ctx, r, func(n string) error { return e.Backend.Start(ctx, n, userOf(r), b.Force, r.Log) })
}

func (e *Env) down(ctx context.Context, r *op.Request) (any, error) {
	var b api.ClustersBody
	_ = r.Decode(&b)
	return e.forEach(ctx, r, func(n string) error { return e.Backend.Down(ctx, n, userOf(r), b.AllUsers, b.Purge, r.Log) })
}

func (e *Env) autostop(ctx context.Context, r *op.Request) (any, error) {
	var b api.AutostopBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	names, err := e.clusterNames(ctx, api.ClustersBody{ClusterNames: b.ClusterNames, All: b.All, AllUsers: b.AllUsers}, userOf(r))
	if err != nil {
		return nil, err
	}
	cfg := agentapi.AutostopConfig{IdleMinutes: b.IdleMinutes, Down: b.Down, WaitFor: b.WaitFor}
	if b.Cancel {
		cfg.IdleMinutes = -1
	}
	// What was set is the client's to say, per cluster, as SkyPilot's does.
	var errs []error
	for _, n := range names {
		if err := e.Backend.Autostop(ctx, n, userOf(r), cfg); err != nil {
			errs = append(errs, opErr(err))
		}
	}
	if len(errs) == 1 {
		return names, errs[0]
	}
	return names, errors.Join(errs...)
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func fmtNum(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

func (e *Env) record(ctx context.Context, c *state.Cluster) api.ClusterRecord {
	h, err := backend.HandleOf(c)
	if err != nil {
		h = &backend.Handle{Reason: err.Error()}
	}
	rec := api.ClusterRecord{Name: c.Name, LaunchedAt: c.LaunchedAt, LastUse: strp(c.LastUse), Status: string(c.Status),
		Autostop: c.Autostop, ToDown: c.ToDown, ClusterHash: c.ClusterHash, ClusterEverUp: c.ClusterEverUp,
		StatusUpdatedAt: c.StatusUpdatedAt, UserHash: c.UserHash, UserName: c.UserName, Workspace: c.Workspace,
		ConfigHash: strp(c.ConfigHash), LastCreationYAML: strp(c.LastCreationYAML), LastCreationCmd: strp(c.LastCreationCommand),
		IsManaged: c.IsManaged, Nodes: c.NumNodes, LaunchStatusReason: strp(h.Reason), ClusterNameOnCloud: strp(c.Name)}
	if rec.Workspace == "" {
		rec.Workspace = "default"
	}
	if evs, err := e.Store.ListClusterEvents(ctx, c.Name, 1); err == nil && len(evs) > 0 {
		rec.LastEvent = strp(evs[len(evs)-1].Reason)
	}
	if h.Info != nil {
		rec.Cloud = strp(h.Info.Cloud)
		rec.Region = strp(h.Info.Region)
		if len(h.Info.Nodes) > 0 {
			rec.HeadIP = h.Info.Nodes[0].InternalIP
		}
	}
	if h.CPUs > 0 {
		rec.CPUs = strp(fmtNum(h.CPUs))
	}
	if h.MemoryGB > 0 {
		rec.Memory = strp(fmtNum(h.MemoryGB))
	}
	var parts []string
	if len(h.GPUs) > 0 {
		var gs []string
		for n, v := range h.GPUs {
			gs = append(gs, n+":"+fmtNum(v))
		}
		sort.Strings(gs)
		rec.Accelerators = strp(strings.Join(gs, ","))
		parts = append(parts, "gpus="+strings.Join(gs, ","))
	} else if h.CPUs > 0 {
		parts = append(parts, "cpus="+fmtNum(h.CPUs), "mem="+fmtNum(h.MemoryGB))
	}
	if h.InstanceType != "" {
		parts = append(parts, h.InstanceType)
	}
	prefix := ""
	if h.UseSpot {
		prefix = "[spot]"
	}
	if len(parts) == 0 {
		rec.ResourcesStr = "<initializing>"
	} else {
		rec.ResourcesStr = fmt.Sprintf("%dx%s(%s)", c.NumNodes, prefix, strings.Join(parts, ", "))
	}
	rec.ResourcesStrFull = rec.ResourcesStr
	if c.Resources != nil {
		if rs, err := resources.Parse(rawMap(c.Resources)); err == nil {
			rec.Labels = rs.Labels
			rec.Priority = rs.Priority
		}
	}
	return rec
}

func (e *Env) status(ctx context.Context, r *op.Request) (any, error) {
	var b api.ClustersBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	u := userOf(r)
	f := state.ClusterFilter{}
	if !b.AllUsers {
		f.UserHash = u.Hash
	}
	cs, err := e.Store.ListClusters(ctx, f)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range b.ClusterNames {
		want[n] = true
	}
	picked := filterNames(cs, want)
	if b.Refresh {
		// In parallel and bounded: a cluster that does not answer shows
		// its last known status after refreshTimeout, and the others
		// are not kept waiting behind it.
		results := e.Backend.RefreshAll(ctx, picked, refreshWorkers, refreshTimeout)
		fresh := picked[:0:0]
		for i, res := range results {
			if res.Err != nil {
				fmt.Fprintf(r.Log, "Refreshing %s: %v\n", picked[i].Name, res.Err)
			}
			if res.Cluster != nil {
				fresh = append(fresh, res.Cluster)
			}
		}
		picked = fresh
	}
	reportMissing(r.Log, b.ClusterNames, picked)
	out := []api.ClusterRecord{}
	for _, c := range picked {
		out = append(out, e.record(ctx, c))
	}
	return out, nil
}

// reportMissing says which of the named clusters are not there, as
// SkyPilot's server does: clients that resolve names through status (stop,
// down, start, autostop) show this line and go on with the others.
func reportMissing(log io.Writer, names []string, found []*state.Cluster) {
	have := map[string]bool{}
	for _, c := range found {
		have[c.Name] = true
	}
	var missing []string
	for _, n := range names {
		if !have[n] {
			have[n] = true
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(log, "Cluster(s) not found: \x1b[1m%s\x1b[0m.\n", strings.Join(missing, ", "))
	}
}

func filterNames(cs []*state.Cluster, want map[string]bool) []*state.Cluster {
	var out []*state.Cluster
	for _, c := range cs {
		if len(want) == 0 || want[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

func (e *Env) queue(ctx context.Context, r *op.Request) (any, error) {
	var b api.ClustersBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	u := userOf(r)
	names := b.ClusterNames
	if len(names) == 0 {
		// --all-users widens the jobs shown to everyone's, and the clusters
		// listed to everyone's only for an admin: a regular user's -u is
		// every job on the clusters they own.
		f := state.ClusterFilter{UserHash: u.Hash}
		if b.AllUsers && u.Admin {
			f.UserHash = ""
		}
		cs, err := e.Store.ListClusters(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if c.Status == state.ClusterUp {
				names = append(names, c.Name)
			}
		}
	}
	out := map[string][]agentapi.Job{}
	var errs []error
	for _, n := range names {
		jobs, err := e.Backend.Queue(ctx, n, u, b.AllUsers, b.SkipFinished)
		if err != nil {
			errs = append(errs, opErr(err))
			continue
		}
		out[n] = jobs
	}
	if len(b.ClusterNames) > 0 && len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	return out, nil
}

func (e *Env) cancel(ctx context.Context, r *op.Request) (any, error) {
	var b api.CancelBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	if len(b.JobIDs) == 0 && !b.All {
		return nil, &op.Error{Type: "ValueError", Message: "name the jobs to cancel (JOB_IDS) or pass --all"}
	}
	out, err := e.Backend.Cancel(ctx, b.ClusterName, userOf(r), b.JobIDs, b.All, b.AllUsers)
	return out, opErr(err)
}

func (e *Env) logs(ctx context.Context, r *op.Request) (any, error) {
	var b api.LogsBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	id := 0
	if len(b.JobIDs) > 0 {
		id = b.JobIDs[0]
	}
	st, err := e.Backend.Logs(ctx, b.ClusterName, userOf(r), id, b.Follow, b.Tail, b.Worker, r.Log)
	if err != nil {
		return nil, opErr(err)
	}
	return api.JobStatusResult{JobID: id, Status: st}, nil
}

func (e *Env) jobStatus(ctx context.Context, r *op.Request) (any, error) {
	var b api.LogsBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	id := 0
	if len(b.JobIDs) > 0 {
		id = b.JobIDs[0]
	}
	id, st, err := e.Backend.JobStatus(ctx, b.ClusterName, userOf(r), id)
	if err != nil {
		return nil, opErr(err)
	}
	return api.JobStatusResult{JobID: id, Status: st}, nil
}

func (e *Env) hookLogs(ctx context.Context, r *op.Request) (any, error) {
	var b api.LogsBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	return nil, opErr(e.Backend.HookLog(ctx, b.ClusterName, userOf(r), r.Log))
}

// CostRecord is one row of `sky cost-report -o json`.
type CostRecord struct {
	Name           string           `json:"name"`
	LaunchedAt     int64            `json:"launched_at"`
	Duration       int64            `json:"duration"`
	NumNodes       int              `json:"num_nodes"`
	Resources      any              `json:"resources"`
	ClusterHash    string           `json:"cluster_hash"`
	UsageIntervals []state.Interval `json:"usage_intervals"`
	TotalCost      float64          `json:"total_cost"`
	CostPerHour    float64          `json:"cost_per_hour"`
	Status         string           `json:"status"`
	UserHash       string           `json:"user_hash"`
	UserName       string           `json:"user_name"`
	Workspace      string           `json:"workspace"`
}

func (e *Env) costReport(ctx context.Context, r *op.Request) (any, error) {
	var b api.CostReportBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	days := b.Days
	if days <= 0 {
		days = 30
	}
	now := time.Now()
	hs, err := e.Store.ListHistory(ctx, now.Add(-time.Duration(days)*24*time.Hour).Unix())
	if err != nil {
		return nil, err
	}
	out := []CostRecord{}
	for _, h := range hs {
		if r.User.ID != "" && h.UserHash != "" && h.UserHash != r.User.ID {
			continue
		}
		status := "TERMINATED"
		if c, err := e.Store.GetCluster(ctx, h.Name); err == nil && c.ClusterHash == h.ClusterHash {
			status = string(c.Status)
		}
		out = append(out, CostRecord{Name: h.Name, LaunchedAt: h.LaunchedAt, Duration: h.Duration(now), NumNodes: h.NumNodes,
			Resources: rawMap(h.Resources), ClusterHash: h.ClusterHash, UsageIntervals: h.UsageIntervals,
			TotalCost: h.TotalCost(now), CostPerHour: h.PricePerHour * float64(h.NumNodes), Status: status,
			UserHash: h.UserHash, UserName: h.UserName, Workspace: h.Workspace})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LaunchedAt > out[j].LaunchedAt })
	return out, nil
}
