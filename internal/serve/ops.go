package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/upload"
	"github.com/skygo/skygo/internal/ux"
)

// The serve operations: they record what the user asked; the service
// and replica controllers do it.

func isAdmin(u api.User) bool { return u.Role == state.RoleAdmin }

// mayTouch says whether user u owns service s or is an admin.
func mayTouch(s *state.Service, u api.User) bool {
	return isAdmin(u) || u.ID == "" || s.UserHash == "" || s.UserHash == u.ID
}

// checkSpec refuses a service spec the controllers could not carry out.
func checkSpec(ts *api.TaskSpec, sp *api.ServiceSpec) error {
	if sp.Port < 1 || sp.Port > 65535 {
		return valueErr("service port %d: Port must be between 1 and 65535; set service.ports or resources.ports", sp.Port)
	}
	switch sp.LoadBalancingPolicy {
	case "", api.PolicyRoundRobin, api.PolicyLeastLoad, api.PolicyInstanceAwareLeastLoad:
	default:
		return valueErr("load_balancing_policy %q: want round_robin, least_load or instance_aware_least_load", sp.LoadBalancingPolicy)
	}
	if !strings.HasPrefix(sp.Probe.Path, "/") {
		return valueErr("readiness_path must start with a slash (/), got %q", sp.Probe.Path)
	}
	if sp.MinReplicas() < 0 || sp.MaxReplicas() < sp.MinReplicas() {
		return valueErr("max_replicas must be greater than or equal to min_replicas")
	}
	if sp.TLS != nil {
		for _, f := range []string{sp.TLS.Keyfile, sp.TLS.Certfile} {
			if _, err := os.Stat(f); err != nil {
				return valueErr("service.tls: %s cannot be read on the API server (%v); give paths on the server's machine", f, err)
			}
		}
	}
	if ts.NumNodes == 0 {
		ts.NumNodes = 1
	}
	// The replicas' clusters open the service port.
	if !slices.Contains(resources.PortNumbers(ts.Resources.Ports), sp.Port) {
		ports := make([]any, 0, len(ts.Resources.Ports)+1)
		for _, p := range ts.Resources.Ports {
			ports = append(ports, p)
		}
		merged, err := resources.ParsePorts(append(ports, strconv.Itoa(sp.Port)))
		if err != nil {
			return valueErr("service task resources: %v", err)
		}
		r := ts.Resources.Copy()
		r.Ports = merged
		ts.Resources = resources.Spec{Resources: *r}
	}
	return nil
}

// Up creates a service and returns once its load balancer listens.
func (e *Env) Up(ctx context.Context, b api.ServeUpBody, u api.User, workspace string, log io.Writer) (api.ServeUpResult, error) {
	name := b.Name
	if name == "" {
		var r [2]byte
		_, _ = rand.Read(r[:])
		name = "sky-service-" + hex.EncodeToString(r[:])
	}
	if err := backend.ValidateClusterName(name); err != nil {
		return api.ServeUpResult{}, valueErr("service name %q: %v", name, err)
	}
	ts, sp := b.Task, b.Service
	if err := checkSpec(&ts, &sp); err != nil {
		return api.ServeUpResult{}, err
	}
	if _, err := e.Store.GetService(ctx, name); err == nil {
		return api.ServeUpResult{}, valueErr("service %s already exists; update it with `sky serve update %s SERVICE_YAML`, or pick another name with -n", name, name)
	}
	if err := e.feasible(ctx, ts, workspace, b.EnvVars); err != nil {
		return api.ServeUpResult{}, err
	}
	if err := e.keepFiles(&ts, name, 1, u); err != nil {
		return api.ServeUpResult{}, err
	}
	s := &state.Service{RowMeta: state.RowMeta{Name: name, UserHash: u.ID, UserName: u.Name, Workspace: workspace},
		Latest: 1, Versions: map[int]*state.ServiceVersion{1: {Task: ts, Service: sp, At: e.now()}},
		UpdateMode: api.UpdateRolling, Target: sp.MinReplicas(), LB: state.LoadBalancer{Host: e.lbHost()}}
	err := e.createService(ctx, s)
	if errors.Is(err, state.ErrExists) {
		return api.ServeUpResult{}, valueErr("service %s was created by another request meanwhile; pick another name with -n", name)
	}
	if err != nil {
		return api.ServeUpResult{}, err
	}
	e.note(name, "Service %s created by %s: version 1, %s.", name, u.Name, policyString(sp))
	fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("Launching service '%s': %s behind a load balancer...", name, policyString(sp))))
	e.pokeService(name)
	ep, err := e.waitEndpoint(ctx, name)
	if err != nil {
		return api.ServeUpResult{Name: name}, err
	}
	return api.ServeUpResult{Name: name, Endpoint: ep}, nil
}

// waitEndpoint waits (at most 15 s) for the service's load balancer to
// listen and returns its host:port.
func (e *Env) waitEndpoint(ctx context.Context, name string) (string, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := e.Store.GetService(ctx, name)
		if err != nil {
			return "", err
		}
		if s.LB.PID != 0 && s.LB.Port != 0 {
			return net.JoinHostPort(s.LB.Host, strconv.Itoa(s.LB.Port)), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the load balancer of service %s did not start within 15 s; see sky serve logs --controller %s", name, name)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Update gives a service a new version; replicas of older versions are
// replaced, rolling or blue-green.
func (e *Env) Update(ctx context.Context, b api.ServeUpdateBody, u api.User, workspace string, log io.Writer) (api.ServeUpdateResult, error) {
	mode := b.Mode
	if mode == "" {
		mode = api.UpdateRolling
	}
	if mode != api.UpdateRolling && mode != api.UpdateBlueGreen {
		return api.ServeUpdateResult{}, valueErr("--mode %q: want rolling or blue_green", mode)
	}
	cur, err := e.Store.GetService(ctx, b.Name)
	if errors.Is(err, state.ErrNotFound) {
		return api.ServeUpdateResult{}, notFoundOp(b.Name)
	}
	if err != nil {
		return api.ServeUpdateResult{}, err
	}
	if !mayTouch(cur, u) {
		return api.ServeUpdateResult{}, valueErr("service %s belongs to user %s; only they (or an admin) may update it", b.Name, cur.UserName)
	}
	if st := Status(cur); st == api.ServiceShuttingDown || st == api.ServiceControllerFailed || st == api.ServiceFailedCleanup {
		return api.ServeUpdateResult{}, valueErr("service %s is %s and cannot be updated", b.Name, st)
	}
	ts, sp := b.Task, b.Service
	if err := checkSpec(&ts, &sp); err != nil {
		return api.ServeUpdateResult{}, err
	}
	if old := cur.Versions[cur.Latest]; old != nil && old.Service.Port != sp.Port {
		return api.ServeUpdateResult{}, valueErr("the service port cannot change in an update (%d → %d); bring up a new service instead", old.Service.Port, sp.Port)
	}
	if err := e.feasible(ctx, ts, workspace, b.EnvVars); err != nil {
		return api.ServeUpdateResult{}, err
	}
	version := cur.Latest + 1
	if err := e.keepFiles(&ts, b.Name, version, u); err != nil {
		return api.ServeUpdateResult{}, err
	}
	_, err = e.Store.UpdateService(ctx, b.Name, func(n *state.Service) error {
		if n.Latest != version-1 || n.Down != nil {
			return fmt.Errorf("service %s changed meanwhile; update again: %w", b.Name, state.ErrConflict)
		}
		prev := n.Latest
		n.Latest, n.UpdateMode = version, mode
		n.Versions[version] = &state.ServiceVersion{Task: ts, Service: sp, At: e.now()}
		n.Active = 0
		if mode == api.UpdateBlueGreen {
			n.Active = prev
		}
		n.LastDecisionAt = 0
		// The new version's bounds apply to the current target at once.
		n.Target = min(max(n.Target, sp.MinReplicas()), sp.MaxReplicas())
		return nil
	})
	if err != nil {
		return api.ServeUpdateResult{}, err
	}
	e.note(b.Name, "Service %s updated by %s to version %d (%s update), %s.", b.Name, u.Name, version, mode, policyString(sp))
	fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("Updating service '%s' to version %d (%s update).", b.Name, version, mode)))
	e.pokeService(b.Name)
	return api.ServeUpdateResult{Name: b.Name, Version: version}, nil
}

// keepFiles gives a version its own copy of the client's upload.
func (e *Env) keepFiles(ts *api.TaskSpec, name string, version int, u api.User) error {
	err := upload.Keep(paths.Uploads(e.Home), u.ID, ts, filesDir(e.Home, name, version))
	if errors.Is(err, upload.ErrNoTree) {
		return valueErr("%v", err)
	}
	return err
}

// feasible asks the optimizer whether the replicas can be launched
// anywhere, so that a service no infrastructure can hold is refused now
// rather than left with replicas failing to provision.
func (e *Env) feasible(ctx context.Context, ts api.TaskSpec, workspace string, env map[string]string) error {
	body := api.LaunchBody{Task: ts, ClusterName: "serve-check", Workspace: workspace, EnvVars: env, PlanShown: true}
	plan, err := e.Plan(ctx, body, io.Discard)
	if err != nil {
		return err
	}
	r := ts.Resources.Copy()
	_, err = plan(ctx, r, max(ts.NumNodes, 1), nil)
	return err
}

func policyString(sp api.ServiceSpec) string { return sp.PolicyString() }

// Status lists the services the user may see (their own; every one for
// an admin), or those of them b names. Another user's service named is
// not found, as one that does not exist: its record, replicas and
// endpoint are its owner's.
func (e *Env) Status(ctx context.Context, b api.ServeStatusBody, u api.User) ([]api.ServiceRecord, error) {
	all, err := e.Store.ListServices(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range b.Names {
		want[n] = true
	}
	out := []api.ServiceRecord{}
	for _, s := range all {
		if (len(want) > 0 && !want[s.Name]) || !mayTouch(s, u) {
			continue
		}
		delete(want, s.Name)
		out = append(out, record(s))
	}
	for _, n := range b.Names {
		if want[n] {
			return out, notFoundOp(n)
		}
	}
	return out, nil
}

func notFoundOp(name string) error {
	return valueErr("Service %s does not exist; `sky serve status` lists the services", name)
}

func record(s *state.Service) api.ServiceRecord {
	rec := api.ServiceRecord{Name: s.Name, Status: Status(s), Version: s.Latest, CreatedAt: s.CreatedAt,
		UserName: s.UserName, UserHash: s.UserHash, LoadBalancerPort: s.LB.Port, UpdateMode: s.UpdateMode,
		Target: s.Target, QPS: s.QPS, Reason: s.Failure, Replicas: []api.ReplicaRecord{}, ActiveVersions: []int{}}
	if v := s.Versions[s.Latest]; v != nil {
		rec.Policy = policyString(v.Service)
		rec.RequestedResources = backend.RequestedResources(v.Task)
		rec.LoadBalancingPolicy = v.Service.LoadBalancingPolicy
		if rec.LoadBalancingPolicy == "" {
			rec.LoadBalancingPolicy = api.PolicyLeastLoad
		}
		rec.TLSEncrypted = v.Service.TLS != nil
		rec.Target += overprovision(v)
	}
	if s.LB.Port != 0 {
		rec.Endpoint = net.JoinHostPort(s.LB.Host, strconv.Itoa(s.LB.Port))
	}
	if s.Uptime > 0 {
		rec.Uptime = &s.Uptime
	}
	active := map[int]bool{}
	for _, r := range readySet(s) {
		active[r.Version] = true
	}
	for v := range active {
		rec.ActiveVersions = append(rec.ActiveVersions, v)
	}
	slices.Sort(rec.ActiveVersions)
	if len(rec.ActiveVersions) == 0 {
		rec.ActiveVersions = []int{s.Latest}
	}
	for _, r := range s.Replicas {
		rr := api.ReplicaRecord{ID: r.ID, Name: r.Cluster, Version: r.Version, Status: r.Status, Endpoint: r.URL,
			Infra: r.Infra, Resources: r.Resources, IsSpot: r.Spot, Reason: r.Reason}
		if r.LaunchedAt > 0 {
			at := r.LaunchedAt
			rr.LaunchedAt = &at
		}
		rec.Replicas = append(rec.Replicas, rr)
	}
	if rec.Reason == "" && rec.Status == api.ServiceFailed {
		for _, r := range s.Replicas {
			if api.ReplicaFailedStatus(r.Status) && r.Reason != "" {
				rec.Reason = fmt.Sprintf("replica %d is %s: %s", r.ID, r.Status, r.Reason)
			}
		}
	}
	return rec
}

// Down asks for services to go and waits until they are gone.
func (e *Env) Down(ctx context.Context, b api.ServeDownBody, u api.User, log io.Writer) (api.ServeDownResult, error) {
	if b.All == (len(b.Names) > 0) {
		return api.ServeDownResult{}, valueErr("name the services to tear down, or all of them (-a), not both")
	}
	names := b.Names
	if b.All {
		all, err := e.Store.ListServices(ctx)
		if err != nil {
			return api.ServeDownResult{}, err
		}
		names = nil
		for _, s := range all {
			if mayTouch(s, u) {
				names = append(names, s.Name)
			}
		}
		if len(names) == 0 {
			fmt.Fprintln(log, "No service to tear down.")
			return api.ServeDownResult{Down: []string{}}, nil
		}
	}
	for _, n := range names {
		_, err := e.Store.UpdateService(ctx, n, func(s *state.Service) error {
			if !mayTouch(s, u) {
				return valueErr("service %s belongs to user %s; only they (or an admin) may tear it down", n, s.UserName)
			}
			if s.Down != nil {
				if b.Purge && !s.Down.Purge {
					s.Down.Purge = true
					return nil
				}
				return state.ErrNoChange
			}
			s.Down = &state.ServiceDown{At: e.now(), Purge: b.Purge}
			return nil
		})
		if errors.Is(err, state.ErrNotFound) {
			return api.ServeDownResult{}, notFoundOp(n)
		}
		if err != nil {
			return api.ServeDownResult{}, err
		}
		e.note(n, "Service %s: down requested by %s.", n, u.Name)
		e.pokeService(n)
	}
	res := api.ServeDownResult{Down: []string{}}
	for _, n := range names {
		fmt.Fprintln(log, ux.Status(fmt.Sprintf("Tearing down service '%s': its replicas, then its load balancer...", n)))
		if err := controller.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
			_, err := e.Store.GetService(ctx, n)
			if errors.Is(err, state.ErrNotFound) {
				return true, nil
			}
			return false, err
		}); err != nil {
			return res, err
		}
		res.Down = append(res.Down, n)
		fmt.Fprintln(log, ux.Styled(ux.Green, fmt.Sprintf("Service '%s' is torn down.", n)))
	}
	return res, nil
}

// TerminateReplica tears one replica down (`sky serve down NAME
// --replica-id N`); the autoscaler launches another if the service still
// wants it. With purge a failed replica's record goes too.
func (e *Env) TerminateReplica(ctx context.Context, b api.ServeTerminateReplicaBody, u api.User, log io.Writer) error {
	var msg string
	_, err := e.Store.UpdateService(ctx, b.Name, func(s *state.Service) error {
		if !mayTouch(s, u) {
			return valueErr("service %s belongs to user %s; only they (or an admin) may change it", b.Name, s.UserName)
		}
		r := s.Replica(b.ReplicaID)
		if r == nil {
			return valueErr("service %s has no replica %d; `sky serve status %s` lists its replicas", b.Name, b.ReplicaID, b.Name)
		}
		switch {
		case api.ReplicaFailedStatus(r.Status) && r.CleanedUp:
			if !b.Purge {
				return valueErr("replica %d of service %s is %s and already torn down; add --purge to remove its record", r.ID, b.Name, r.Status)
			}
			s.Replicas = slices.DeleteFunc(s.Replicas, func(x *state.Replica) bool { return x.ID == r.ID })
			msg = fmt.Sprintf("Replica %d of service '%s' is removed.", r.ID, b.Name)
		case r.Status == api.ReplicaShuttingDown:
			msg = fmt.Sprintf("Replica %d of service '%s' is already shutting down.", r.ID, b.Name)
			return state.ErrNoChange
		default:
			r.Status, r.RetiredAt, r.Reason = api.ReplicaShuttingDown, e.now(), "terminated by "+u.Name
			msg = fmt.Sprintf("Replica %d of service '%s' is shutting down.", r.ID, b.Name)
		}
		return nil
	})
	if errors.Is(err, state.ErrNotFound) {
		return notFoundOp(b.Name)
	}
	if err != nil {
		return err
	}
	e.note(b.Name, "%s", msg)
	fmt.Fprintln(log, msg)
	e.pokeService(b.Name)
	e.pokeReplica(b.Name, b.ReplicaID)
	return nil
}

// Logs writes a service's controller or load balancer log, or a
// replica's launch log followed by its job's output; with follow it goes
// on until the replica (or, for the others, the service) is gone.
func (e *Env) Logs(ctx context.Context, b api.ServeLogsBody, u api.User, w io.Writer) error {
	s, err := e.Store.GetService(ctx, b.Name)
	if errors.Is(err, state.ErrNotFound) {
		return notFoundOp(b.Name)
	}
	if err != nil {
		return err
	}
	if !mayTouch(s, u) {
		return notFoundOp(b.Name)
	}
	if b.Controller || b.LoadBalancer {
		file := ControllerLogPath(e.Home, b.Name)
		if b.LoadBalancer {
			file = LBLogPath(e.Home, b.Name)
		}
		return e.followFile(ctx, b.Name, file, b.Tail, b.Follow, w)
	}
	r := s.Replica(b.ReplicaID)
	if r == nil {
		return valueErr("service %s has no replica %d; `sky serve status %s` lists its replicas", b.Name, b.ReplicaID, b.Name)
	}
	if err := ux.PrintTail(ReplicaLogPath(e.Home, b.Name, r.ID), b.Tail, w); err != nil {
		return err
	}
	// Until its job runs, the replica's log is its launch log.
	for r.JobID == 0 && b.Follow && (r.Status == api.ReplicaPending || r.Status == api.ReplicaProvisioning) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if s, err = e.Store.GetService(ctx, b.Name); err != nil {
			return nil
		}
		if r = s.Replica(b.ReplicaID); r == nil {
			return nil
		}
	}
	if r.JobID == 0 || r.CleanedUp || r.Status == api.ReplicaPreempted {
		return nil
	}
	fmt.Fprintf(w, "--- output of job %d on %s ---\n", r.JobID, r.Cluster)
	err = e.Backend.CopyJobLog(ctx, r.Cluster, owner(s), r.JobID, b.Tail, b.Follow, e.redacted(s, r, w))
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(w, "(the replica's job log is not available: %v)\n", firstLine(err.Error()))
	}
	return nil
}

func (e *Env) followFile(ctx context.Context, name, file string, tail int, follow bool, w io.Writer) error {
	if err := ux.PrintTail(file, tail, w); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	off := int64(0)
	if fi, err := os.Stat(file); err == nil {
		off = fi.Size()
	}
	for {
		off = ux.CopyFrom(file, off, w)
		if _, err := e.Store.GetService(ctx, name); errors.Is(err, state.ErrNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// SyncDown writes the service's logs into dir — controller, load
// balancer and every replica's, or only those asked for — and returns
// the file names. A replica's file is what `sky serve logs` shows of
// it: its launch log, then its job's output so far.
func (e *Env) SyncDown(ctx context.Context, b api.ServeSyncDownBody, u api.User, dir string) ([]string, error) {
	s, err := e.Store.GetService(ctx, b.Name)
	if errors.Is(err, state.ErrNotFound) || (err == nil && !mayTouch(s, u)) {
		return nil, notFoundOp(b.Name)
	}
	if err != nil {
		return nil, err
	}
	all := !b.Controller && !b.LoadBalancer && len(b.ReplicaIDs) == 0
	ids := b.ReplicaIDs
	if all {
		for _, r := range s.Replicas {
			ids = append(ids, r.ID)
		}
	}
	for _, id := range ids {
		if s.Replica(id) == nil {
			return nil, valueErr("service %s has no replica %d; `sky serve status %s` lists its replicas", b.Name, id, b.Name)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var files []string
	write := func(name string, fill func(w io.Writer) error) error {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		ferr := fill(f)
		if err := f.Close(); ferr == nil {
			ferr = err
		}
		files = append(files, name)
		return ferr
	}
	copyFile := func(src string) func(io.Writer) error {
		return func(w io.Writer) error { return ux.PrintTail(src, 0, w) }
	}
	if all || b.Controller {
		if err := write("controller.log", copyFile(ControllerLogPath(e.Home, b.Name))); err != nil {
			return nil, err
		}
	}
	if all || b.LoadBalancer {
		if err := write("load_balancer.log", copyFile(LBLogPath(e.Home, b.Name))); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		err := write(fmt.Sprintf("replica_%d.log", id), func(w io.Writer) error {
			return e.Logs(ctx, api.ServeLogsBody{Name: b.Name, ReplicaID: id}, u, w)
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(files)
	return files, nil
}
