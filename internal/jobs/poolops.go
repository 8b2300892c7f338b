package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/upload"
	"github.com/skygo/skygo/internal/ux"
)

// The pool operations (jobs.pool_apply, pool_status, pool_down,
// pool_logs): they record what the user asked; the pool controllers do it.

// PoolApply creates a pool, gives it a new version of its task (workers
// of older versions are replaced, rolling or blue-green), or resizes it.
func (e *Env) PoolApply(ctx context.Context, b api.PoolApplyBody, u api.User, workspace string, log io.Writer) (api.PoolApplyResult, error) {
	mode := b.Mode
	if mode == "" {
		mode = "rolling"
	}
	if mode != "rolling" && mode != "blue_green" {
		return api.PoolApplyResult{}, valueErr("--mode %q: want rolling or blue_green", mode)
	}
	if b.Workers != nil && *b.Workers < 0 {
		return api.PoolApplyResult{}, valueErr("--workers %d: want 0 or more", *b.Workers)
	}
	if b.Task == nil {
		return e.poolResize(ctx, b, u, log)
	}
	if b.Policy == nil {
		return api.PoolApplyResult{}, valueErr("the pool YAML has no pool: section; add one (e.g. pool: {workers: 2})")
	}
	name := b.Name
	if name == "" {
		var r [2]byte
		_, _ = rand.Read(r[:])
		name = "sky-pool-" + hex.EncodeToString(r[:])
	}
	if err := backend.ValidateClusterName(name); err != nil {
		return api.PoolApplyResult{}, valueErr("pool name %q: %v", name, err)
	}
	pol := *b.Policy
	if b.Workers != nil {
		w := *b.Workers
		pol = api.PoolPolicy{Workers: &w}
	}
	cur, err := e.Store.GetPool(ctx, name)
	switch {
	case errors.Is(err, state.ErrNotFound):
		cur = nil
	case err != nil:
		return api.PoolApplyResult{}, err
	case mayUsePool(u, cur) != nil:
		// The name is taken, which cannot be hidden; whose it is can.
		return api.PoolApplyResult{}, valueErr("the name %s is taken by another user's pool; give your pool another name (-p NAME)", name)
	case cur.Down != nil:
		return api.PoolApplyResult{}, valueErr("pool %s is being torn down; apply again once `sky jobs pool status %s` no longer lists it", name, name)
	}
	if err := e.feasible(ctx, *b.Task, workspace, b.EnvVars); err != nil {
		return api.PoolApplyResult{}, err
	}
	version := 1
	if cur != nil {
		version = cur.SpecVersion + 1
	}
	ts := *b.Task
	if err := upload.Keep(paths.Uploads(e.Home), u.ID, &ts, poolFilesDir(e.Home, name, version)); err != nil {
		if errors.Is(err, upload.ErrNoTree) {
			return api.PoolApplyResult{}, valueErr("%v", err)
		}
		return api.PoolApplyResult{}, err
	}
	sv := &state.PoolSpecVersion{Task: ts, Policy: pol, At: e.now()}
	if cur == nil {
		p := &state.Pool{RowMeta: state.RowMeta{Name: name, UserHash: u.ID, UserName: u.Name, Workspace: workspace}, SpecVersion: 1,
			Specs: map[int]*state.PoolSpecVersion{1: sv}, UpdateMode: mode}
		err := e.Store.CreatePool(ctx, p)
		if errors.Is(err, state.ErrExists) {
			return api.PoolApplyResult{}, valueErr("pool %s was created by another request meanwhile; apply again to update it", name)
		}
		if err != nil {
			return api.PoolApplyResult{}, err
		}
		e.poolNote(name, "Pool %s created by %s: version 1, %s.", name, u.Name, policyString(pol))
		fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("Pool '%s' is spinning up %s.", name, policyString(pol))))
		e.printPoolHints(log, name)
		e.pokePool(name)
		return api.PoolApplyResult{Name: name, Version: 1, Created: true}, nil
	}
	_, err = e.Store.UpdatePool(ctx, name, func(n *state.Pool) error {
		if n.SpecVersion != version-1 || n.Down != nil {
			return fmt.Errorf("pool %s changed meanwhile; apply again: %w", name, state.ErrConflict)
		}
		n.SpecVersion, n.UpdateMode = version, mode
		n.Specs[version] = sv
		n.LastDecisionAt = 0
		return nil
	})
	if err != nil {
		return api.PoolApplyResult{}, err
	}
	e.poolNote(name, "Pool %s updated by %s to version %d (%s update), %s.", name, u.Name, version, mode, policyString(pol))
	fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("Updating pool '%s' to version %d (%s update).", name, version, mode)))
	e.printPoolHints(log, name)
	e.pokePool(name)
	return api.PoolApplyResult{Name: name, Version: version}, nil
}

// poolResize is `pool apply -p NAME --workers N`: the newest version's
// policy becomes N workers, with no new version (no worker is replaced).
func (e *Env) poolResize(ctx context.Context, b api.PoolApplyBody, u api.User, log io.Writer) (api.PoolApplyResult, error) {
	if b.Workers == nil || b.Name == "" {
		return api.PoolApplyResult{}, valueErr("give a POOL_YAML, or -p POOL with --workers N")
	}
	n := *b.Workers
	p, err := e.Store.UpdatePool(ctx, b.Name, func(p *state.Pool) error {
		if err := mayUsePool(u, p); err != nil {
			return err
		}
		if p.Down != nil {
			return valueErr("pool %s is being torn down", b.Name)
		}
		sv := p.Specs[p.SpecVersion]
		if sv == nil {
			return valueErr("pool %s has no current version; apply its YAML again", b.Name)
		}
		sv.Policy = api.PoolPolicy{Workers: &n}
		p.LastDecisionAt = 0
		return nil
	})
	if errors.Is(err, state.ErrNotFound) {
		return api.PoolApplyResult{}, valueErr("pool %s does not exist: create it with `sky jobs pool apply -p %s POOL_YAML`", b.Name, b.Name)
	}
	if err != nil {
		return api.PoolApplyResult{}, err
	}
	e.poolNote(b.Name, "Pool %s resized by %s to %d worker(s).", b.Name, u.Name, n)
	fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("Pool '%s' is being resized to %d worker(s).", b.Name, n)))
	e.printPoolHints(log, b.Name)
	e.pokePool(b.Name)
	return api.PoolApplyResult{Name: b.Name, Version: p.SpecVersion}, nil
}

func (e *Env) printPoolHints(log io.Writer, name string) {
	fmt.Fprintln(log, "📋 Useful Commands")
	fmt.Fprintf(log, "├── To check the pool status:\tsky jobs pool status %s\n", name)
	fmt.Fprintf(log, "├── To submit jobs to the pool:\tsky jobs launch --pool %s <yaml_file>\n", name)
	fmt.Fprintf(log, "└── To terminate the pool:\tsky jobs pool down %s\n", name)
}

func policyString(p api.PoolPolicy) string {
	if p.Autoscaling() {
		return fmt.Sprintf("%d to %d workers (queue-length autoscaling, threshold %d)", p.Min(), p.Max(), max(p.QueueLengthThreshold, 1))
	}
	return fmt.Sprintf("%d worker(s)", p.Min())
}

// PoolStatus lists the pools u may use (all of them when b names none)
// with their workers; a named pool u may not use is missing.
func (e *Env) PoolStatus(ctx context.Context, b api.PoolStatusBody, u api.User) ([]api.PoolRecord, error) {
	ps, err := e.Store.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range b.Names {
		want[n] = true
	}
	out := []api.PoolRecord{}
	for _, p := range ps {
		if (len(want) > 0 && !want[p.Name]) || mayUsePool(u, p) != nil {
			continue
		}
		delete(want, p.Name)
		jobs, err := e.poolJobs(ctx, p.Name)
		if err != nil {
			return nil, err
		}
		busy, queued := busyWorkers(jobs)
		out = append(out, poolRecord(p, busy, queued))
	}
	for _, n := range b.Names {
		if want[n] {
			return out, valueErr("pool %s does not exist; `sky jobs pool status` lists the pools", n)
		}
	}
	return out, nil
}

func poolRecord(p *state.Pool, busy map[string][]int, queued int) api.PoolRecord {
	rec := api.PoolRecord{Name: p.Name, Status: poolStatus(p), Version: p.SpecVersion, UpdateMode: p.UpdateMode,
		CreatedAt: p.CreatedAt, UserName: p.UserName, Target: p.Target, PendingJobs: queued, Workers: []api.PoolWorkerRecord{}}
	if sv := p.Specs[p.SpecVersion]; sv != nil {
		rec.Policy = sv.Policy
		rec.RequestedResources = backend.RequestedResources(sv.Task)
	}
	if p.ReadyAt > 0 {
		rec.UptimeSince = ptr(p.ReadyAt)
	}
	for _, w := range p.Workers {
		if w.Status == api.WorkerReady {
			rec.ReadyWorkers++
		}
		wr := api.PoolWorkerRecord{ID: w.ID, Name: w.Cluster, Version: w.SpecVersion, Status: w.Status, Infra: w.Infra,
			Resources: w.Resources, Reason: w.Reason, UsedBy: busy[w.Cluster]}
		if wr.UsedBy == nil {
			wr.UsedBy = []int{}
		}
		if w.LaunchedAt > 0 {
			wr.LaunchedAt = ptr(w.LaunchedAt)
		}
		rec.Workers = append(rec.Workers, wr)
	}
	return rec
}

// PoolDown asks for pools to go (their jobs cancelled first, then their
// workers torn down) and waits until they are gone.
func (e *Env) PoolDown(ctx context.Context, b api.PoolDownBody, u api.User, log io.Writer) (api.PoolDownResult, error) {
	if b.All == (len(b.Names) > 0) {
		return api.PoolDownResult{}, valueErr("name the pools to tear down, or all of them (-a), not both")
	}
	names := b.Names
	if b.All {
		ps, err := e.Store.ListPools(ctx)
		if err != nil {
			return api.PoolDownResult{}, err
		}
		names = nil
		for _, p := range ps {
			if mayUsePool(u, p) == nil {
				names = append(names, p.Name)
			}
		}
		if len(names) == 0 {
			fmt.Fprintln(log, "No pool to tear down.")
			return api.PoolDownResult{Down: []string{}}, nil
		}
	}
	for _, n := range names {
		_, err := e.Store.UpdatePool(ctx, n, func(p *state.Pool) error {
			if err := mayUsePool(u, p); err != nil {
				return err
			}
			if p.Down != nil {
				if b.Purge && !p.Down.Purge {
					p.Down.Purge = true
					return nil
				}
				return state.ErrNoChange
			}
			p.Down = &state.PoolDown{At: e.now(), By: u.Name, Purge: b.Purge}
			return nil
		})
		if errors.Is(err, state.ErrNotFound) {
			return api.PoolDownResult{}, valueErr("pool %s does not exist; `sky jobs pool status` lists the pools", n)
		}
		if err != nil {
			return api.PoolDownResult{}, err
		}
		e.poolNote(n, "Pool %s: down requested by %s.", n, u.Name)
		e.pokePool(n)
	}
	res := api.PoolDownResult{Down: []string{}}
	for _, n := range names {
		fmt.Fprintln(log, ux.Status(fmt.Sprintf("Tearing down pool '%s': cancelling its jobs, then its workers...", n)))
		if err := controller.Poll(ctx, 300*time.Millisecond, func() (bool, error) {
			_, err := e.Store.GetPool(ctx, n)
			if errors.Is(err, state.ErrNotFound) {
				return true, nil
			}
			return false, err
		}); err != nil {
			return res, err
		}
		res.Down = append(res.Down, n)
		fmt.Fprintln(log, ux.Styled(ux.Green, fmt.Sprintf("Pool '%s' is torn down.", n)))
	}
	return res, nil
}

// PoolLogs writes a pool's controller log, or a worker's launch and
// setup log; with follow it goes on until the worker is up (or failed),
// or for the controller log until the pool is gone.
func (e *Env) PoolLogs(ctx context.Context, b api.PoolLogsBody, u api.User, w io.Writer) error {
	p, err := e.usablePool(ctx, u, b.Name)
	if errors.Is(err, state.ErrNotFound) {
		return valueErr("pool %s does not exist; `sky jobs pool status` lists the pools", b.Name)
	}
	if err != nil {
		return err
	}
	file := PoolControllerLogPath(e.Home, b.Name)
	if !b.Controller {
		if p.Worker(b.WorkerID) == nil {
			return valueErr("pool %s has no worker %d; `sky jobs pool status %s` lists its workers", b.Name, b.WorkerID, b.Name)
		}
		file = WorkerLogPath(e.Home, b.Name, b.WorkerID)
	}
	if err := ux.PrintTail(file, b.Tail, w); err != nil {
		return err
	}
	if !b.Follow {
		return nil
	}
	off := int64(0)
	if fi, err := os.Stat(file); err == nil {
		off = fi.Size()
	}
	for {
		off = ux.CopyFrom(file, off, w)
		p, err := e.Store.GetPool(ctx, b.Name)
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !b.Controller {
			wk := p.Worker(b.WorkerID)
			if wk == nil || (wk.Status != api.WorkerPending && wk.Status != api.WorkerProvisioning && wk.Status != api.WorkerStarting) {
				ux.CopyFrom(file, off, w)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// feasible asks the optimizer whether the pool's workers can be launched
// anywhere, so that a pool no infrastructure can hold is refused now
// rather than left with workers failing to provision.
func (e *Env) feasible(ctx context.Context, ts api.TaskSpec, workspace string, env map[string]string) error {
	body := api.LaunchBody{Task: ts, ClusterName: "pool-check", Workspace: workspace, EnvVars: env, PlanShown: true}
	plan, err := e.Plan(ctx, body, io.Discard)
	if err != nil {
		return err
	}
	_, err = plan(ctx, ts.Resources.Copy(), max(ts.NumNodes, 1), nil)
	return err
}

// PoolLogFiles names the pool's log files a sync-down copies (file name
// -> path on the server): the controller's and every worker's, or only
// the controller's, or only the given workers'.
func (e *Env) PoolLogFiles(ctx context.Context, b api.PoolSyncDownBody, u api.User) (map[string]string, error) {
	p, err := e.usablePool(ctx, u, b.Name)
	if errors.Is(err, state.ErrNotFound) {
		return nil, valueErr("pool %s does not exist; `sky jobs pool status` lists the pools", b.Name)
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if b.Controller || len(b.WorkerIDs) == 0 {
		out["controller.log"] = PoolControllerLogPath(e.Home, b.Name)
	}
	ids := b.WorkerIDs
	if len(ids) == 0 && !b.Controller {
		for _, w := range p.Workers {
			ids = append(ids, w.ID)
		}
	}
	for _, id := range ids {
		if p.Worker(id) == nil {
			return nil, valueErr("pool %s has no worker %d; `sky jobs pool status %s` lists its workers", b.Name, id, b.Name)
		}
		out[fmt.Sprintf("worker-%d.log", id)] = WorkerLogPath(e.Home, b.Name, id)
	}
	return out, nil
}
