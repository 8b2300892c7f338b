package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/task"
)

func (e *Env) validate(ctx context.Context, r *op.Request, b api.ValidateBody) (api.ValidateResult, error) {
	opts := task.LoadOptions{Env: b.Env, LookupEnv: func(string) (string, bool) { return "", false }}
	for k, v := range b.Secrets {
		opts.Secrets = append(opts.Secrets, k+"="+v)
	}
	if len(b.ConfigSources) > 0 {
		if b.YAML != "" || b.DAGYAML != "" || b.VolumeYAML != "" {
			return api.ValidateResult{}, &op.Error{Type: "ValueError", Message: "the body has config_sources with a task or volume: send them alone"}
		}
		if err := config.CheckSources(b.ConfigSources); err != nil {
			return api.ValidateResult{}, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
		}
		return api.ValidateResult{Tasks: []api.ValidatedTask{}}, nil
	}
	if b.VolumeYAML != "" {
		if b.YAML != "" || b.DAGYAML != "" {
			return api.ValidateResult{}, &op.Error{Type: "ValueError", Message: "the body has volume_yaml with yaml or dag_yaml: send one of them"}
		}
		if _, err := task.LoadVolumeSpecBytes(b.Name, []byte(b.VolumeYAML)); err != nil {
			return api.ValidateResult{}, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
		}
		return api.ValidateResult{Tasks: []api.ValidatedTask{}}, nil
	}
	name, text := b.Name, b.YAML
	if b.DAGYAML != "" {
		if b.YAML != "" {
			return api.ValidateResult{}, &op.Error{Type: "ValueError", Message: "the body has both yaml and dag_yaml: send one of them"}
		}
		name, text = dagYAMLName, b.DAGYAML
	}
	dag, err := task.LoadBytes(name, []byte(text), opts)
	if err != nil {
		return api.ValidateResult{}, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	out := api.ValidateResult{Tasks: []api.ValidatedTask{}}
	for _, t := range dag.Tasks {
		if err := task.ValidateName(t); err != nil {
			return api.ValidateResult{}, &op.Error{Type: "ValueError", Message: err.Error()}
		}
		// The SDK's paths are the client's: they must at least be
		// absolute, or the launch would refuse them.
		if b.DAGYAML != "" {
			if err := task.ValidateSubmitted(t); err != nil {
				return api.ValidateResult{}, &op.Error{Type: "ValueError", Message: err.Error()}
			}
		}
		rs := "-"
		if t.Resources != nil {
			rs = t.Resources.String()
		}
		out.Tasks = append(out.Tasks, api.ValidatedTask{Name: t.Name, Resources: rs, NumNodes: t.NumNodes})
	}
	return out, nil
}

func (e *Env) check(ctx context.Context, r *op.Request, b api.CheckBody) ([]check.Result, error) {
	cfg, err := e.requestConfig(r)
	if err != nil {
		return nil, err
	}
	return e.runCheckWith(ctx, cfg, b.Infras, b.Verbose)
}

func (e *Env) listAccelerators(ctx context.Context, r *op.Request, b api.GPUsBody) (api.GPUsResult, error) {
	f := catalog.GPUFilter{Name: b.Name, Count: b.Count, AllRegions: b.AllRegions}
	if b.Infra != "" {
		inf, err := resources.ParseInfra(b.Infra)
		if err != nil {
			return api.GPUsResult{}, &op.Error{Type: "ValueError", Message: err.Error()}
		}
		if inf.Cloud != "" {
			if in, err := e.Backend.Infras.Get(infra.ID{Kind: strings.ToLower(inf.Cloud)}); err == nil {
				if gl, ok := in.(infra.GPULister); ok {
					return liveGPUs(ctx, gl, inf.Cloud, inf.Region, b)
				}
			}
			if !catalog.IsCatalogCloud(inf.Cloud) {
				return api.GPUsResult{Table: "No accelerators found.\n", JSON: json.RawMessage("{}")}, nil
			}
			f.Clouds = []string{inf.Cloud}
		}
		f.Region = inf.Region
	}
	list, err := e.catalog(b.EnvVars).ListGPUs(ctx, f)
	if err != nil {
		return api.GPUsResult{}, err
	}
	// Prices may be NaN (not offered): render here, where the types are,
	// so only strict JSON and text travel.
	var tb, js bytes.Buffer
	if err := optimizer.WriteGPUTable(&tb, list, optimizer.GPUListOptions{Name: b.Name, All: b.All, Verbose: b.Verbose}); err != nil {
		return api.GPUsResult{}, err
	}
	if err := optimizer.WriteGPUJSON(&js, list); err != nil {
		return api.GPUsResult{}, err
	}
	return api.GPUsResult{Table: tb.String(), JSON: json.RawMessage(bytes.TrimSpace(js.Bytes()))}, nil
}

// planner returns the optimizer call the backend uses, over the enabled
// infras and the catalog; it also prints the plan to log.
func (e *Env) planner(ctx context.Context, body api.LaunchBody, log io.Writer) (backend.Planner, error) {
	enabled, err := e.enabledInfras(ctx)
	if err != nil {
		return nil, err
	}
	target := optimizer.Cost
	if body.OptimizeTime {
		target = optimizer.Time
	}
	quiet := body.PlanShown
	return func(ctx context.Context, res *resources.Resources, numNodes int, blocked []optimizer.Blocked) (*optimizer.Plan, error) {
		opts, ordered := optimizer.FromResources(res)
		plan, err := optimizer.Optimize(ctx, optimizer.Input{
			Tasks:         []optimizer.Task{{Name: body.Task.Name, NumNodes: numNodes, Options: opts, Ordered: ordered}},
			Enabled:       enabled,
			Blocked:       blocked,
			Target:        target,
			Catalog:       e.catalog(body.EnvVars),
			Capacity:      e.Backend.Infras.Capacities(),
			Provisionable: e.Backend.Infras.Provisions,
			DryRun:        body.Dryrun,
			PriceDisabled: true,
		})
		if err != nil {
			return nil, noResources(log, enabled, err)
		}
		if quiet {
			quiet = false // a failover's new plan is shown
			return plan, nil
		}
		if err := optimizer.WriteDryRun(log, plan, optimizer.FormatOptions{Verbose: body.Verbose}); err != nil {
			return nil, err
		}
		return plan, nil
	}, nil
}

// noResources turns an optimizer failure into the request's error. When
// nothing enabled fits, the offers of the clouds that are not enabled are
// printed first, priced, so the user sees what enabling one would give.
// With no infra enabled but the automatic local one, and no cloud named by
// the task, the error is SkyPilot's for no cloud access.
func noResources(log io.Writer, enabled []string, err error) error {
	var nre *optimizer.NoResourcesError
	if errors.As(err, &nre) {
		if werr := optimizer.WriteNotEnabled(log, nre.Task, nre.NotEnabled); werr != nil {
			return werr
		}
	}
	if errors.Is(err, optimizer.ErrNoInfra) {
		return &op.Error{Type: "NoCloudAccessError", Message: noCloudAccess}
	}
	if nre == nil {
		return &op.Error{Type: "ResourcesUnavailableError", Message: err.Error()}
	}
	named := slices.ContainsFunc(nre.Task.Options, func(o optimizer.Request) bool { return o.Cloud != "" && o.Cloud != "*" })
	if named || slices.ContainsFunc(enabled, func(k string) bool { return !infrakind.OnThisMachine(k) }) {
		return &op.Error{Type: "ResourcesUnavailableError", Message: err.Error()}
	}
	msg := noCloudAccess
	for _, x := range nre.Excluded {
		if infrakind.OnThisMachine(x.Infra) {
			msg += " (the local infra is enabled, but " + x.Reason + ")"
			break
		}
	}
	return &op.Error{Type: "NoCloudAccessError", Message: msg}
}

// noCloudAccess is SkyPilot's message when no cloud is enabled.
const noCloudAccess = "Cloud access is not set up. Run: `sky check`"

func (e *Env) launch(ctx context.Context, r *op.Request, b api.LaunchBody) (api.LaunchResult, error) {
	if err := submittedLaunch(&b); err != nil {
		return api.LaunchResult{}, err
	}
	cfg, err := e.requestConfig(r)
	if err != nil {
		return api.LaunchResult{}, err
	}
	b.Workspace = cfg.ActiveWorkspace()
	if b.Dryrun {
		if res, ok := e.Backend.DryRunExisting(ctx, b.ClusterName, userOf(r)); ok {
			fmt.Fprintln(r.Log, "Dryrun complete. Would have run:")
			fmt.Fprintln(r.Log, describeTask(b.Task))
			return *res, nil
		}
	}
	plan, err := e.planner(ctx, b, r.Log)
	if err != nil {
		return api.LaunchResult{}, err
	}
	if b.Dryrun {
		res := b.Task.Resources.Copy()
		if err := e.Backend.PinToVolumes(ctx, &b.Task, res, userOf(r)); err != nil {
			return api.LaunchResult{}, opErr(err)
		}
		if _, err := plan(ctx, res, max(b.Task.NumNodes, 1), nil); err != nil {
			return api.LaunchResult{}, err
		}
		fmt.Fprintln(r.Log, "Dryrun finished.")
		return api.LaunchResult{ClusterName: b.ClusterName}, nil
	}
	release, shown, err := e.resolveUploads(&b.Task, r.User, true)
	if err != nil {
		return api.LaunchResult{}, err
	}
	defer release()
	log := newRequestLog(r.Log, b.Task.Secrets, shown)
	defer closeLog(log)
	return value(e.Backend.Launch(ctx, b, userOf(r), plan, log))
}

// describeTask is the task as SkyPilot names it after "Would have run:":
// Task<name=N>(run='...'), the run cut at 20 characters, then its node
// count when above one and its resources.
func describeTask(t api.TaskSpec) string {
	run := "run=<empty>"
	if t.Run != "" {
		cmd := strings.ReplaceAll(t.Run, "\n", `\n`)
		if len(cmd) > 20 {
			cmd = cmd[:20] + "..."
		}
		run = "run='" + cmd + "'"
	}
	name := ""
	if t.Name != "" {
		name = "<name=" + t.Name + ">"
	}
	s := "Task" + name + "(" + run + ")"
	if t.NumNodes > 1 {
		s += fmt.Sprintf("\n  nodes: %d", t.NumNodes)
	}
	res := "default instances"
	if s := t.Resources.String(); s != "*" {
		res = s
	}
	return s + "\n  resources: " + res
}

// optimize prints the optimizer's table for a launch body without
// launching: the client shows it before asking to provision.
func (e *Env) optimize(ctx context.Context, r *op.Request, ob api.OptimizeBody) (string, error) {
	b := ob.LaunchBody
	if err := submittedLaunch(&b); err != nil {
		return "", err
	}
	specs := []api.TaskSpec{b.Task}
	if ob.DAGYAML != "" {
		if ob.TaskYAML != "" || !reflect.ValueOf(ob.Task).IsZero() {
			return "", &op.Error{Type: "ValueError", Message: "the body has dag_yaml and a task: send one of them"}
		}
		// Planned as `sky jobs launch` shows a DAG before asking: each
		// task in turn.
		jb := api.JobsLaunchBody{DAGYAML: ob.DAGYAML}
		if err := submittedJobs(&jb); err != nil {
			return "", err
		}
		specs = jb.Tasks
	}
	b.PlanShown = false
	var docs []string
	for _, spec := range specs {
		b.Task = spec
		plan, err := e.planner(ctx, b, r.Log)
		if err != nil {
			return "", err
		}
		res := b.Task.Resources.Copy()
		if err := e.Backend.PinToVolumes(ctx, &b.Task, res, userOf(r)); err != nil {
			return "", opErr(err)
		}
		p, err := plan(ctx, res, max(b.Task.NumNodes, 1), nil)
		if err != nil {
			return "", err
		}
		doc, err := optimizedTask(spec, p)
		if err != nil {
			return "", err
		}
		docs = append(docs, doc)
	}
	return strings.Join(docs, "---\n"), nil
}

// optimizedTask is a task's YAML (secrets redacted) with its resources
// replaced by what the optimizer chose: sky.optimize's "optimized DAG".
func optimizedTask(spec api.TaskSpec, p *optimizer.Plan) (string, error) {
	doc := map[string]any{}
	if err := yaml.Unmarshal([]byte(spec.YAML), &doc); err != nil || doc == nil {
		doc = map[string]any{}
	}
	if len(p.Tasks) == 0 {
		return "", fmt.Errorf("the optimizer returned no plan")
	}
	c := p.Tasks[0].Chosen
	chosen := map[string]any{"infra": resources.Infra{Cloud: c.Cloud, Region: c.Region, Zone: c.Zone}.String()}
	if c.InstanceType != "" {
		chosen["instance_type"] = c.InstanceType
	}
	if c.AccName != "" {
		chosen["accelerators"] = map[string]any{c.AccName: c.AccCount}
	}
	if c.UseSpot {
		chosen["use_spot"] = true
	}
	if old, ok := doc["resources"].(map[string]any); ok {
		// What the optimizer does not choose stays as asked.
		for _, k := range []string{"ports", "disk_size", "disk_tier", "image_id", "labels", "autostop", "job_recovery"} {
			if v, ok := old[k]; ok {
				chosen[k] = v
			}
		}
	}
	doc["resources"] = chosen
	out, err := yaml.Marshal(doc)
	return string(out), err
}

func (e *Env) exec(ctx context.Context, r *op.Request, b api.ExecBody) (api.LaunchResult, error) {
	if err := submittedTask(&b.Task, b.TaskYAML, b.UploadID); err != nil {
		return api.LaunchResult{}, err
	}
	b.TaskYAML, b.UploadID = "", ""
	if _, err := e.requestConfig(r); err != nil {
		return api.LaunchResult{}, err
	}
	release, shown, err := e.resolveUploads(&b.Task, r.User, false)
	if err != nil {
		return api.LaunchResult{}, err
	}
	defer release()
	log := newRequestLog(r.Log, b.Task.Secrets, shown)
	defer closeLog(log)
	return value(e.Backend.Exec(ctx, b, userOf(r), log))
}

// value is a backend result the request returns, with its typed errors
// kept (opErr).
func value[T any](res *T, err error) (T, error) {
	var v T
	if res != nil {
		v = *res
	}
	return v, opErr(err)
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
		// -a means the clusters the user launched: those of managed
		// jobs are their controller's, which tears them down itself
		// (`sky jobs cancel` ends a job and its cluster).
		if c.IsManaged {
			continue
		}
		names = append(names, c.Name)
	}
	return names, nil
}

// mayActOnOthers says whether the request may stop, start, tear down or
// set autostop on another user's cluster: an admin's may. -u/--all-users
// only selects which clusters a command names; it grants nothing, so a
// user's `sky down -u` is refused on every cluster not theirs.
func mayActOnOthers(r *op.Request) bool { return userOf(r).Admin }

// forEach runs f on every selected cluster and joins the errors.
func (e *Env) forEach(ctx context.Context, r *op.Request, b api.ClustersBody, f func(name string) error) ([]string, error) {
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

func (e *Env) stop(ctx context.Context, r *op.Request, b api.ClustersBody) ([]string, error) {
	return e.forEach(ctx, r, b, func(n string) error {
		if err := e.drainJobs(ctx, n, userOf(r), b, r.Log); err != nil {
			return err
		}
		return e.Backend.Stop(ctx, n, userOf(r), mayActOnOthers(r), r.Log)
	})
}

func (e *Env) start(ctx context.Context, r *op.Request, b api.ClustersBody) ([]string, error) {
	return e.forEach(ctx, r, b, func(n string) error { return e.Backend.Start(ctx, n, userOf(r), b.Force, b.Retry, r.Log) })
}

func (e *Env) down(ctx context.Context, r *op.Request, b api.ClustersBody) ([]string, error) {
	return e.forEach(ctx, r, b, func(n string) error {
		if err := e.drainJobs(ctx, n, userOf(r), b, r.Log); err != nil && !b.Purge {
			return err
		}
		return e.Backend.Down(ctx, n, userOf(r), mayActOnOthers(r), b.Purge, r.Log)
	})
}

// drainJobs is --graceful: cancel the cluster's unfinished jobs and wait
// for them to end (at most GracefulTimeout seconds) before the nodes go.
// SkyPilot also waits for MOUNT_CACHED uploads there; this build has no
// such mounts, so the jobs are all there is to wait for.
func (e *Env) drainJobs(ctx context.Context, name string, u backend.User, b api.ClustersBody, log io.Writer) error {
	if !b.Graceful {
		return nil
	}
	c, err := e.Store.GetCluster(ctx, name)
	if err != nil || c.Status != state.ClusterUp {
		return nil // nothing runs on a missing or stopped cluster; the stop/down says why
	}
	if _, err := e.Backend.Cancel(ctx, name, u, nil, true, true); err != nil {
		return opErr(err)
	}
	var deadline <-chan time.Time
	if b.GracefulTimeout != nil {
		deadline = time.After(time.Duration(*b.GracefulTimeout) * time.Second)
	}
	for {
		jobs, err := e.Backend.Queue(ctx, name, u, true, true)
		if err != nil {
			return opErr(err)
		}
		if len(jobs) == 0 {
			fmt.Fprintf(log, "All jobs on %s have ended.\n", name)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			fmt.Fprintf(log, "Graceful timeout: %d job(s) on %s still ending; going on.\n", len(jobs), name)
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (e *Env) autostop(ctx context.Context, r *op.Request, b api.AutostopBody) ([]string, error) {
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

// nodeSummary is what a cluster's nodes are, for the per-node cells and
// the RESOURCES string of status and cost-report.
type nodeSummary struct {
	CPUs, MemoryGB float64
	GPUs           map[string]float64
	InstanceType   string
	Spot           bool
}

func (n nodeSummary) gpuList() []string {
	var gs []string
	for name, v := range n.GPUs {
		gs = append(gs, name+":"+fmtNum(v))
	}
	sort.Strings(gs)
	return gs
}

// cells are the cpus, memory and accelerators fields (nil when unknown).
func (n nodeSummary) cells() (cpus, mem, accs *string) {
	if n.CPUs > 0 {
		cpus = strp(fmtNum(n.CPUs))
	}
	if n.MemoryGB > 0 {
		mem = strp(fmtNum(n.MemoryGB))
	}
	if gs := n.gpuList(); len(gs) > 0 {
		accs = strp(strings.Join(gs, ","))
	}
	return cpus, mem, accs
}

// resourcesStr is `<nodes>x[spot](gpus=..., <instance>)` or, without
// accelerators, `<nodes>x(cpus=N, mem=M, ...)` (cli-output.md).
func (n nodeSummary) resourcesStr(nodes int) string {
	var parts []string
	if gs := n.gpuList(); len(gs) > 0 {
		parts = append(parts, "gpus="+strings.Join(gs, ","))
	} else if n.CPUs > 0 {
		parts = append(parts, "cpus="+fmtNum(n.CPUs), "mem="+fmtNum(n.MemoryGB))
	}
	if n.InstanceType != "" {
		parts = append(parts, n.InstanceType)
	}
	if len(parts) == 0 {
		return "<initializing>"
	}
	prefix := ""
	if n.Spot {
		prefix = "[spot]"
	}
	return fmt.Sprintf("%dx%s(%s)", nodes, prefix, strings.Join(parts, ", "))
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
	sum := nodeSummary{CPUs: h.CPUs, MemoryGB: h.MemoryGB, GPUs: h.GPUs, InstanceType: h.InstanceType, Spot: h.UseSpot}
	rec.CPUs, rec.Memory, rec.Accelerators = sum.cells()
	rec.ResourcesStr = sum.resourcesStr(c.NumNodes)
	rec.ResourcesStrFull = rec.ResourcesStr
	if c.Resources != nil {
		if rs, err := resources.DecodeJSON(c.Resources); err == nil {
			rec.Labels = rs.Labels
			rec.Priority = rs.Priority
			rec.PriorityClass = strp(rs.PriorityClass)
		}
	}
	return rec
}

func (e *Env) status(ctx context.Context, r *op.Request, b api.ClustersBody) ([]api.ClusterRecord, error) {
	u := userOf(r)
	f := state.ClusterFilter{}
	if !b.AllUsers {
		f.UserHash = u.Hash
	}
	cs, err := e.Store.ListClusters(ctx, f)
	if err != nil {
		return nil, err
	}
	access, err := e.workspaceAccess(r)
	if err != nil {
		return nil, err
	}
	visible := cs[:0]
	for _, c := range cs {
		if access(c.Workspace) {
			visible = append(visible, c)
		}
	}
	cs = visible
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

func (e *Env) queue(ctx context.Context, r *op.Request, b api.ClustersBody) (map[string][]agentapi.Job, error) {
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

func (e *Env) cancel(ctx context.Context, r *op.Request, b api.CancelBody) (agentapi.CancelResult, error) {
	if len(b.JobIDs) == 0 && !b.All {
		return agentapi.CancelResult{}, &op.Error{Type: "ValueError", Message: "name the jobs to cancel (JOB_IDS) or pass --all"}
	}
	out, err := e.Backend.Cancel(ctx, b.ClusterName, userOf(r), b.JobIDs, b.All, b.AllUsers)
	return out, opErr(err)
}

func (e *Env) logs(ctx context.Context, r *op.Request, b api.LogsBody) (api.JobStatusResult, error) {
	id := 0
	if len(b.JobIDs) > 0 {
		id = b.JobIDs[0]
	}
	st, err := e.Backend.Logs(ctx, b.ClusterName, userOf(r), id, b.Follow, b.Tail, b.Worker, r.Log)
	if err != nil {
		return api.JobStatusResult{}, opErr(err)
	}
	return api.JobStatusResult{JobID: id, Status: st}, nil
}

func (e *Env) jobStatus(ctx context.Context, r *op.Request, b api.LogsBody) (api.JobStatusResult, error) {
	id := 0
	if len(b.JobIDs) > 0 {
		id = b.JobIDs[0]
	}
	id, st, err := e.Backend.JobStatus(ctx, b.ClusterName, userOf(r), id)
	if err != nil {
		return api.JobStatusResult{}, opErr(err)
	}
	return api.JobStatusResult{JobID: id, Status: st}, nil
}

func (e *Env) downloadLogs(ctx context.Context, r *op.Request, b api.LogsBody) (api.LogsDownload, error) {
	jobs, err := e.Backend.DownloadLogs(ctx, b.ClusterName, userOf(r), b.JobIDs, r.Files)
	if err != nil {
		return api.LogsDownload{}, opErr(err)
	}
	return api.LogsDownload{RequestID: r.ID, Jobs: jobs}, nil
}

func (e *Env) hookLogs(ctx context.Context, r *op.Request, b api.LogsBody) (op.Null, error) {
	if b.Hook != "" && !slices.Contains(agentapi.HookEvents, b.Hook) {
		return op.Null{}, &op.Error{Type: "ValueError", Message: fmt.Sprintf("unknown hook event %q: choose one of %s", b.Hook, strings.Join(agentapi.HookEvents, ", "))}
	}
	return op.Null{}, opErr(e.Backend.HookLog(ctx, b.ClusterName, userOf(r), b.Hook, r.Log))
}

func (e *Env) costReport(ctx context.Context, r *op.Request, b api.CostReportBody) ([]api.CostRecord, error) {
	days := 30 // a client that sends no window gets SkyPilot's default
	if b.Days != nil {
		days = *b.Days
	}
	now := time.Now()
	var since int64 // --days 0: every cluster ever launched
	if days > 0 {
		since = now.Add(-time.Duration(days) * 24 * time.Hour).Unix()
	}
	hs, err := e.Store.ListHistory(ctx, since)
	if err != nil {
		return nil, err
	}
	out := []api.CostRecord{}
	for _, h := range hs {
		if r.User.ID != "" && h.UserHash != "" && h.UserHash != r.User.ID {
			continue
		}
		out = append(out, e.costRecord(ctx, h, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LaunchedAt > out[j].LaunchedAt })
	return out, nil
}

// endpoints maps each exposed port of a cluster (resources.ports) to the
// address that serves it: the head node's address and the port. On the
// local infrastructure that is the node's own 127.0.0.x address, where a
// job listening on the port answers.
func (e *Env) endpoints(ctx context.Context, r *op.Request, b api.EndpointsBody) (map[string]string, error) {
	u := userOf(r)
	c, err := e.Store.GetCluster(ctx, b.Cluster)
	if errors.Is(err, state.ErrNotFound) || (err == nil && !u.Admin && u.Hash != "" && c.UserHash != u.Hash) {
		return nil, &op.Error{Type: "ClusterDoesNotExist", Message: fmt.Sprintf("Cluster %s does not exist.", b.Cluster)}
	}
	if err != nil {
		return nil, err
	}
	if c.Status != state.ClusterUp {
		return nil, &op.Error{Type: "ClusterNotUpError", Message: fmt.Sprintf("Cluster %s is %s; its endpoints are served only while it is UP.", c.Name, c.Status)}
	}
	h, err := backend.HandleOf(c)
	if err != nil || h.Info == nil || len(h.Info.Nodes) == 0 {
		return nil, &op.Error{Type: "ClusterNotUpError", Message: fmt.Sprintf("Cluster %s has no head node address yet.", c.Name)}
	}
	var ports []string
	if rs, err := resources.DecodeJSON(c.Resources); err == nil {
		ports = rs.Ports
	}
	nums := resources.PortNumbers(ports)
	if len(nums) == 0 {
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("Cluster %s exposes no ports. Launch it with --ports (or resources.ports in the YAML).", c.Name)}
	}
	head := h.Info.Nodes[0].ExternalIP
	if head == "" {
		head = h.Info.Nodes[0].InternalIP
	}
	out := map[string]string{}
	for _, n := range nums {
		if b.Port == 0 || b.Port == n {
			out[fmt.Sprint(n)] = fmt.Sprintf("%s:%d", head, n)
		}
	}
	if len(out) == 0 {
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("Port %d is not exposed on cluster %s; exposed ports: %s.", b.Port, c.Name, strings.Join(ports, ", "))}
	}
	return out, nil
}

// costRecord is one incarnation's row: a live cluster describes itself as
// `sky status` does; a torn-down one by what its history says was
// launched.
func (e *Env) costRecord(ctx context.Context, h *state.History, now time.Time) api.CostRecord {
	rec := api.CostRecord{Name: h.Name, LaunchedAt: h.LaunchedAt, Duration: h.Duration(now), NumNodes: h.NumNodes,
		Resources: rawMap(h.Resources), ClusterHash: h.ClusterHash, UsageIntervals: h.UsageIntervals,
		TotalCost: h.TotalCost(now), CostPerHour: h.PricePerHour * float64(h.NumNodes), Status: "TERMINATED",
		UserHash: h.UserHash, UserName: h.UserName, Workspace: h.Workspace}
	if rec.Resources == nil {
		rec.Resources = map[string]any{}
	}
	if c, err := e.Store.GetCluster(ctx, h.Name); err == nil && c.ClusterHash == h.ClusterHash {
		cr := e.record(ctx, c)
		rec.Status = cr.Status
		rec.Cloud, rec.Region, rec.CPUs, rec.Memory, rec.Accelerators = cr.Cloud, cr.Region, cr.CPUs, cr.Memory, cr.Accelerators
		rec.ResourcesStr, rec.ResourcesStrFull = cr.ResourcesStr, cr.ResourcesStrFull
		rec.LastEvent, rec.NodeNames, rec.Priority, rec.PriorityClass = cr.LastEvent, cr.NodeNames, cr.Priority, cr.PriorityClass
		return rec
	}
	res, err := resources.DecodeJSON(h.Resources)
	if err != nil {
		rec.ResourcesStr = "-"
		rec.ResourcesStrFull = "-"
		return rec
	}
	sum := nodeSummary{InstanceType: res.InstanceType, Spot: res.UseSpot != nil && *res.UseSpot}
	if res.CPUs != nil && !res.CPUs.AtLeast && !res.CPUs.PerCPU {
		sum.CPUs = res.CPUs.Value
	}
	if res.Memory != nil && !res.Memory.AtLeast && !res.Memory.PerCPU {
		sum.MemoryGB = res.Memory.Value
	}
	if len(res.Accelerators.List) == 1 {
		a := res.Accelerators.List[0]
		sum.GPUs = map[string]float64{a.Name: a.Count}
	}
	if res.Infra.Cloud != "" {
		rec.Cloud = strp(optimizer.DisplayName(res.Infra.Cloud))
	}
	rec.Region = strp(res.Infra.Region)
	rec.CPUs, rec.Memory, rec.Accelerators = sum.cells()
	rec.ResourcesStr = sum.resourcesStr(h.NumNodes)
	rec.ResourcesStrFull = rec.ResourcesStr
	rec.Priority = res.Priority
	rec.PriorityClass = strp(res.PriorityClass)
	if evs, err := e.Store.ListClusterEvents(ctx, h.Name, 50); err == nil {
		for _, ev := range evs {
			if ev.ClusterHash == h.ClusterHash {
				rec.LastEvent = strp(ev.Reason)
				break
			}
		}
	}
	return rec
}

// clusterJobSpec is sky.cluster_job_spec: the task YAML (secrets
// redacted) and entrypoint a cluster job was submitted with, or null.
func (e *Env) clusterJobSpec(ctx context.Context, r *op.Request, b api.ClusterJobSpecBody) (*api.ClusterJobSpec, error) {
	if b.ClusterName == "" || b.JobID <= 0 {
		return nil, &op.Error{Type: "ValueError", Message: "cluster_job_spec needs a cluster_name and a job_id (a positive integer)"}
	}
	spec, err := e.Backend.JobSpec(ctx, b.ClusterName, userOf(r), b.JobID)
	if err != nil {
		return nil, opErr(err)
	}
	return spec, nil
}

// workspaces is sky.workspaces: each workspace the server defines (its
// workspaces: section, "default" always among them) with its settings.
func (e *Env) workspaces(ctx context.Context, r *op.Request, _ op.NoBody) (map[string]any, error) {
	cfg, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return nil, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	defined, _ := cfg.Get("workspaces")
	m, _ := defined.(map[string]any)
	access, err := e.workspaceAccess(r)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, name := range cfg.WorkspaceNames() {
		if !access(name) {
			continue // a private workspace is not seen by those it excludes
		}
		ws, _ := m[name].(map[string]any)
		if ws == nil {
			ws = map[string]any{}
		}
		out[name] = ws
	}
	return out, nil
}

// listAcceleratorCounts is sky.list_accelerator_counts: the counts each
// accelerator of list_accelerators' answer comes in (SkyPilot's
// list_accelerator_counts, for SDKs that ask for them alone).
func (e *Env) listAcceleratorCounts(ctx context.Context, r *op.Request, b api.GPUsBody) (map[string][]float64, error) {
	res, err := e.listAccelerators(ctx, r, b)
	if err != nil {
		return nil, err
	}
	return acceleratorCounts(res.JSON)
}

// acceleratorCounts reads list_accelerators' JSON (accelerator name ->
// offerings) into each accelerator's distinct counts, ascending; an
// offering without a count adds none.
func acceleratorCounts(js json.RawMessage) (map[string][]float64, error) {
	var offers map[string][]struct {
		Count float64 `json:"accelerator_count"`
	}
	if len(js) > 0 {
		if err := json.Unmarshal(js, &offers); err != nil {
			return nil, fmt.Errorf("reading the accelerator listing: %w", err)
		}
	}
	out := make(map[string][]float64, len(offers))
	for name, os := range offers {
		counts := []float64{}
		for _, o := range os {
			if o.Count > 0 && !slices.Contains(counts, o.Count) {
				counts = append(counts, o.Count)
			}
		}
		slices.Sort(counts)
		out[name] = counts
	}
	return out, nil
}

// liveGPUs is `sky gpus list --infra <kind>` of an infrastructure that
// knows its GPUs live: a table of GPU types with the per-node quantities
// and how many are free, then one row per place (its region and zone
// columns), then, with -v, per node. JSON: GPU name -> offerings, each
// place an entry with its counts.
func liveGPUs(ctx context.Context, gl infra.GPULister, kind, region string, b api.GPUsBody) (api.GPUsResult, error) {
	rows, err := gl.GPUs(ctx, region)
	if err != nil {
		return api.GPUsResult{}, &op.Error{Type: "ValueError", Message: err.Error()}
	}
	match := func(g string) bool { return b.Name == "" || strings.EqualFold(g, b.Name) }
	display := optimizer.DisplayName(kind)
	type tot struct {
		free, total int
		qty         map[int]bool
	}
	byGPU := map[string]*tot{}
	var places, nodes []infra.GPUUsage
	for _, r := range rows {
		if !match(r.GPU) || (b.Count > 0 && float64(maxInt(r.Requestable)) < b.Count) {
			continue
		}
		if r.Node != "" {
			nodes = append(nodes, r)
			t := byGPU[r.GPU]
			if t == nil {
				t = &tot{qty: map[int]bool{}}
				byGPU[r.GPU] = t
			}
			t.free += r.Free
			t.total += r.Total
			for q := 1; q <= maxInt(r.Requestable); q *= 2 {
				t.qty[q] = true
			}
			t.qty[maxInt(r.Requestable)] = true
			continue
		}
		places = append(places, r)
	}
	if len(places) == 0 {
		msg := "No GPUs found in " + display + "."
		if b.Name != "" {
			msg = fmt.Sprintf("No %s GPUs found in %s.", b.Name, display)
		}
		return api.GPUsResult{Table: msg + "\n", JSON: json.RawMessage("{}")}, nil
	}
	var tb strings.Builder
	tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s GPUs\n", display)
	fmt.Fprintln(tw, "GPU\tREQUESTABLE_QTY_PER_NODE\tUTILIZATION")
	gpus := make([]string, 0, len(byGPU))
	for g := range byGPU {
		gpus = append(gpus, g)
	}
	sort.Strings(gpus)
	for _, g := range gpus {
		t := byGPU[g]
		var qs []int
		for q := range t.qty {
			qs = append(qs, q)
		}
		sort.Ints(qs)
		parts := make([]string, len(qs))
		for i, q := range qs {
			parts[i] = strconv.Itoa(q)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d of %d free\n", g, strings.Join(parts, ", "), t.free, t.total)
	}
	fmt.Fprintln(tw)
	if len(nodes) > 0 && nodes[0].Status != "" {
		// Nodes with a status (a cluster's scheduler reports them):
		// SkyPilot's per-node real-time availability table, always shown.
		fmt.Fprintf(tw, "%s per-node GPU availability\n", display)
		fmt.Fprintln(tw, "CONTEXT\tNODE\tvCPU\tMemory (GB)\tGPU\tGPU UTILIZATION\tNODE STATUS")
		for _, n := range nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d of %d free\t%s\n", n.Region, n.Node, strconv.FormatFloat(n.CPUs, 'f', -1, 64),
				strconv.FormatFloat(math.Round(n.MemoryGB*10)/10, 'f', -1, 64), n.GPU, n.Free, n.Total, n.Status)
		}
	} else {
		fmt.Fprintln(tw, "CLUSTER\tPARTITION\tGPU\tUTILIZATION")
		for _, p := range places {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d of %d free\n", p.Region, p.Zone, p.GPU, p.Free, p.Total)
		}
	}
	if b.Verbose && (len(nodes) == 0 || nodes[0].Status == "") {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "CLUSTER\tNODE\tGPU\tGPU UTILIZATION")
		for _, n := range nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d of %d free\n", n.Region, n.Node, n.GPU, n.Free, n.Total)
		}
	}
	tw.Flush()
	type offer struct {
		Cloud        string   `json:"cloud"`
		InstanceType *string  `json:"instance_type"`
		Name         string   `json:"accelerator_name"`
		Count        int      `json:"accelerator_count"`
		CPUs         *float64 `json:"cpu_count"`
		DeviceMem    *float64 `json:"device_memory"`
		Memory       *float64 `json:"memory"`
		Price        float64  `json:"price"`
		SpotPrice    *float64 `json:"spot_price"`
		Region       string   `json:"region"`
		Zone         string   `json:"zone,omitempty"`
		Free         int      `json:"available"`
		Total        int      `json:"total"`
	}
	out := map[string][]offer{}
	for _, p := range places {
		out[p.GPU] = append(out[p.GPU], offer{Cloud: display, Name: p.GPU, Count: maxInt(p.Requestable), Region: p.Region, Zone: p.Zone, Free: p.Free, Total: p.Total})
	}
	js, err := json.Marshal(out)
	if err != nil {
		return api.GPUsResult{}, err
	}
	return api.GPUsResult{Table: tb.String(), JSON: js}, nil
}

func maxInt(s []int) int {
	m := 0
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
