package backend

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

// User is who asked for an operation.
type User struct {
	Name string
	Hash string
	// Admin may read every user's clusters (their queues and logs) and
	// stop, start, tear down or set autostop on them; launching onto or
	// running a task on another user's cluster stays its owner's.
	Admin bool
	// Controller is the managed-jobs controller acting for a job it
	// admitted on a cluster the job's user does not own (a pool's worker,
	// the pool owner's): the job's queue, submit and cancel there are not
	// checked against the cluster's owner, and Name and Hash still say
	// whose job it is.
	Controller bool
}

// Planner asks the optimizer for a plan; the core supplies it because it
// knows the enabled infras and the catalog.
type Planner func(ctx context.Context, r *resources.Resources, numNodes int, blocked []optimizer.Blocked) (*optimizer.Plan, error)

// Launch provisions (or reuses) a cluster, syncs, and submits the task's
// setup and run as one job (SkyPilot's detached setup: the setup runs
// inside the job, on every launch). Progress goes to log as SkyPilot's
// launch lines (cli-output.md §sky launch), with the stages in progress
// as ux status lines.
//
// Until it lets go of the cluster's lock, a `sky down` of the cluster on
// this server interrupts it (interruptLaunch): its context is cancelled,
// and the teardown waiting for the lock removes what it made.
func (b *Backend) Launch(ctx context.Context, body api.LaunchBody, user User, plan Planner, log io.Writer) (*api.LaunchResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res, err := b.launch(ctx, cancel, body, user, plan, log)
	return res, interruptedError(ctx, body.ClusterName, err)
}

func (b *Backend) launch(ctx context.Context, interrupt context.CancelCauseFunc, body api.LaunchBody, user User, plan Planner, log io.Writer) (*api.LaunchResult, error) {
	name := body.ClusterName
	if err := ValidateClusterName(name); err != nil {
		return nil, err
	}
	t := body.Task
	if t.NumNodes < 1 {
		t.NumNodes = 1
	}
	res := t.Resources.Copy()
	release, err := b.lock(ctx, name)
	if err != nil {
		return nil, err
	}
	forget := b.startLaunch(name, user.Hash, interrupt)
	// The lock covers changing the cluster, not watching it: once the job
	// is submitted, a down or stop must not wait for the job to end (nor
	// interrupt it: the launch is over).
	unlock := sync.OnceFunc(func() { forget(); release() })
	defer unlock()

	c, h, err := b.loadCluster(ctx, name, user.Hash, false)
	var nf *ClusterError
	switch {
	case errors.As(err, &nf) && nf.Type == "ClusterDoesNotExist":
		c, h = nil, nil
	case err != nil:
		return nil, err
	}

	if c != nil && h.Terminating {
		return nil, &ClusterError{Type: "ClusterNotUpError", Msg: fmt.Sprintf("Cluster %q is being torn down (%s); wait for `sky status` to stop listing it, or run `sky down %s`, then launch again.", name, h.Reason, name)}
	}
	fresh := c == nil || h.Info == nil
	setupHash := hashSetup(&t)
	// --fast skips provisioning and setup only where they would change
	// nothing: an UP cluster launched last with the same setup.
	fast := body.Fast && !fresh && c.Status == state.ClusterUp && h.SetupHash == setupHash
	if !fresh {
		if ws, have := cmp.Or(body.Workspace, "default"), cmp.Or(c.Workspace, "default"); ws != have {
			return nil, &ClusterError{Type: "InvalidSkyPilotConfigError", Msg: fmt.Sprintf(
				"Cluster %q is in workspace %q, but the active workspace is %q. Use -w %s, or another cluster name.", name, have, ws, have)}
		}
		if err := checkFits(c, h, res, t.NumNodes); err != nil {
			return nil, err
		}
	}
	// Volumes are checked before anything is provisioned: a task that
	// cannot have its volume must not run without it.
	vols, place, err := b.resolveVolumes(ctx, name, &t, user)
	if err != nil {
		return nil, err
	}
	if place != nil {
		if fresh {
			err = forcePlace(res, place)
		} else {
			err = checkClusterPlace(c, h, place)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case fresh:
		c, h, err = b.provisionWithFailover(ctx, name, t, res, user, plan, body, place, provisionVolumes(vols), log)
		if err != nil {
			return nil, err
		}
	case fast:
	default:
		// SkyPilot provisions an existing cluster again (a no-op when it
		// is up) and says so with the same lines.
		fmt.Fprintln(log, launchingOn(h.Info.Cloud, h.Info.Region, h.Info.Zone))
		if c.Status == state.ClusterStopped {
			if err := b.restartNodes(ctx, c, h, log); err != nil {
				fmt.Fprintln(log, ux.Failed("Failed to provision resources."))
				return nil, err
			}
		}
		fmt.Fprintln(log, instancesUp(len(h.Info.Nodes)))
	}

	runners, err := b.runners(h)
	if err != nil {
		return nil, err
	}
	if fresh || c.Status != state.ClusterUp {
		if err := b.startAgents(ctx, c, h, runners, log); err != nil {
			b.setReason(ctx, c, h, "starting agents failed: "+err.Error())
			return nil, err
		}
	}
	if !fast {
		fmt.Fprintln(log, ux.Finishing("Cluster launched: "+name+"."))
	}
	// Rewritten on every launch: cheap, and it repairs a deleted file.
	b.writeSSHConfig(h, log)
	if err := b.attachVolumes(ctx, c, h, vols, body.Command, log); err != nil {
		return nil, err
	}
	plans, err := b.constructStorage(ctx, &t, h.Info.Cloud, h.Info.Region, body.Command, log)
	if err != nil {
		return nil, err
	}
	if err := b.syncFiles(ctx, runners, &t, true, log); err != nil {
		return nil, err
	}
	if err := b.attachStorage(ctx, c, h, runners, plans, body.Down, log); err != nil {
		return nil, err
	}
	setup := t.Setup
	switch {
	case body.NoSetup:
		fmt.Fprintln(log, "Setup commands skipped.")
		setup = ""
	case fast:
		setup = ""
	case setup != "":
		fmt.Fprintln(log, ux.Finishing("Setup detached."))
	}
	err = b.update(ctx, c, h, func(c *state.Cluster, h *Handle) (string, error) {
		h.SetupHash, h.Reason = setupHash, ""
		c.LastUse, c.LastCreationYAML, c.LastCreationCommand = body.Command, t.YAML, body.Command
		return "", nil
	})
	if err != nil {
		return nil, err
	}
	if err := b.applyLaunchAutostop(ctx, c, h, runners[0], body, res); err != nil {
		return nil, err
	}
	result := &api.LaunchResult{ClusterName: name, SSH: b.sshAccess(h)}
	if t.Run == "" && setup == "" {
		fmt.Fprintln(log, "Run commands not specified or empty.")
		return result, nil
	}
	rec := jobRecord{clusterHash: c.ClusterHash, entrypoint: body.Command}
	return result, b.submitAndFollow(ctx, runners[0], &t, setup, res, user, body.Detach, result, unlock, &launchRef{c, h, body.Managed}, rec, log)
}

// writeSSHConfig writes the cluster's `ssh <cluster>` entries, for the
// infrastructures that have them; a failure is a warning, since the
// cluster works without.
func (b *Backend) writeSSHConfig(h *Handle, log io.Writer) {
	if in, _, err := b.plugin(h); err == nil {
		if a, ok := in.(infra.SSHAccess); ok {
			if err := a.WriteSSHConfig(h.Info); err != nil {
				fmt.Fprintf(log, "Warning: `ssh %s` will not work: %v\n", h.Info.Name, err)
			}
		}
	}
}

// sshAccess says whether `ssh <cluster>` reaches the cluster's head.
// DryRunExisting is what a dry run of a launch onto name knows when name
// is the user's UP cluster: SkyPilot provisions nothing then, so it
// neither plans nor asks. ok is false for any other cluster (or none).
func (b *Backend) DryRunExisting(ctx context.Context, name string, u User) (res *api.LaunchResult, ok bool) {
	c, h, err := b.loadCluster(ctx, name, u.Hash, false)
	if err != nil || c.Status != state.ClusterUp {
		return nil, false
	}
	return &api.LaunchResult{ClusterName: name, SSH: b.sshAccess(h), Existing: true}, true
}

func (b *Backend) sshAccess(h *Handle) bool {
	in, _, err := b.plugin(h)
	if err != nil {
		return false
	}
	_, ok := in.(infra.SSHAccess)
	return ok
}

// launchingOn is SkyPilot's line that opens provisioning: "Launching on
// AWS us-east-1 (us-east-1a).", or only the cloud where the region says
// nothing more (the local machine; an SSH pool's region is its name).
func launchingOn(cloud, region, zone string) string {
	region = strings.TrimPrefix(region, strings.ToLower(cloud)+"-")
	if region == "" || strings.EqualFold(region, cloud) {
		return ux.Starting("Launching on " + cloud + ".")
	}
	msg := "Launching on " + cloud + " " + region + ux.Reset
	if zone != "" {
		msg += " (" + zone + ")"
	}
	return ux.Starting(msg + ".")
}

// instancesUp is the line right after launchingOn once the nodes are up.
func instancesUp(n int) string {
	if n == 1 {
		return ux.Last + "Instance is up."
	}
	return ux.Last + "Instances are up."
}

// stage shows a stage in progress as the client's live line on a
// terminal (nothing in a pipe) until the returned func ends it.
func stage(log io.Writer, format string, args ...any) (end func()) {
	fmt.Fprintln(log, ux.Status(fmt.Sprintf(format, args...)))
	return func() { fmt.Fprintln(log, ux.Status("")) }
}

// restartNodes brings a stopped cluster's nodes back for a launch; the
// launch then starts their agents. (`sky start` has its own lines, in
// startLocked.)
func (b *Backend) restartNodes(ctx context.Context, c *state.Cluster, h *Handle, log io.Writer) error {
	p, err := b.provisioner(h)
	if err != nil {
		return err
	}
	defer stage(log, "Starting cluster %s...", c.Name)()
	info, err := p.Start(ctx, c.Name)
	if err != nil {
		return err
	}
	h.Info = info
	return nil
}

// Exec submits a task to an existing UP cluster: sync workdir, no setup.
func (b *Backend) Exec(ctx context.Context, body api.ExecBody, user User, log io.Writer) (*api.LaunchResult, error) {
	t := body.Task
	if t.NumNodes < 1 {
		t.NumNodes = 1
	}
	res := t.Resources.Copy()
	// A down holds the cluster's lock while it takes the nodes away. Under
	// it, an exec either submits before the down starts (and the down ends
	// the job) or finds the cluster gone; it never meets a half-removed
	// node, whose errors (a missing agent socket) would point elsewhere.
	release, err := b.lock(ctx, body.ClusterName)
	if err != nil {
		return nil, err
	}
	unlock := sync.OnceFunc(release)
	defer unlock()
	c, h, err := b.loadCluster(ctx, body.ClusterName, user.Hash, user.Controller)
	if err != nil {
		return nil, err
	}
	if c.Status != state.ClusterUp {
		return nil, &ClusterError{Type: "ClusterNotUpError", Msg: fmt.Sprintf("Cluster %q is %s; `sky exec` needs an UP cluster. Run `sky start %s` or `sky launch -c %s ...`.", c.Name, c.Status, c.Name, c.Name)}
	}
	if err := checkFits(c, h, res, t.NumNodes); err != nil {
		return nil, err
	}
	vols, place, err := b.resolveVolumes(ctx, body.ClusterName, &t, user)
	if err != nil {
		return nil, err
	}
	if place != nil {
		if err := checkClusterPlace(c, h, place); err != nil {
			return nil, err
		}
	}
	runners, err := b.runners(h)
	if err != nil {
		return nil, err
	}
	if err := b.attachVolumes(ctx, c, h, vols, body.Command, log); err != nil {
		return nil, err
	}
	if err := b.syncFiles(ctx, runners, &t, false, log); err != nil {
		return nil, err
	}
	err = b.update(ctx, c, h, func(c *state.Cluster, _ *Handle) (string, error) {
		c.LastUse = body.Command
		return "", nil
	})
	if err != nil {
		return nil, err
	}
	result := &api.LaunchResult{ClusterName: c.Name}
	var ref *launchRef
	if body.Managed != nil {
		ref = &launchRef{managed: body.Managed}
	}
	rec := jobRecord{clusterHash: c.ClusterHash, entrypoint: body.Command}
	return result, b.submitAndFollow(ctx, runners[0], &t, "", res, user, body.Detach, result, unlock, ref, rec, log)
}

// checkFits refuses a task that the existing cluster cannot run.
func checkFits(c *state.Cluster, h *Handle, r *resources.Resources, numNodes int) error {
	if err := checkPlace(c, h, r); err != nil {
		return err
	}
	if numNodes > c.NumNodes {
		return &ClusterError{Type: "ResourcesMismatchError", Msg: fmt.Sprintf(
			"Task requested %d nodes but cluster %q has %d. Launch a new cluster (`sky launch -c NEW ...`) or use --resize on a local cluster.", numNodes, c.Name, c.NumNodes)}
	}
	if name := r.AcceleratorName(); name != "" {
		have := 0.0
		for n, v := range h.GPUs {
			if strings.EqualFold(n, name) {
				have = v
			}
		}
		if have < r.AcceleratorCount() {
			return &ClusterError{Type: "ResourcesMismatchError", Msg: fmt.Sprintf(
				"Task requested %s:%g but cluster %q has %s. Use a cluster with those accelerators.", name, r.AcceleratorCount(), c.Name, gpuString(h.GPUs))}
		}
	}
	if r.CPUs != nil && !r.CPUs.AtLeast && r.CPUs.Value > h.CPUs && h.CPUs > 0 {
		return &ClusterError{Type: "ResourcesMismatchError", Msg: fmt.Sprintf(
			"Task requested %g CPUs per node but cluster %q nodes have %g.", r.CPUs.Value, c.Name, h.CPUs)}
	}
	return nil
}

// checkPlace refuses resource flags that name another place or machine
// than the cluster's (`sky exec --infra aws` on a local cluster): the task
// would otherwise run where it did not ask to.
func checkPlace(c *state.Cluster, h *Handle, r *resources.Resources) error {
	have, err := resources.ParseInfra(h.Infra)
	if err != nil {
		return nil // an infra this build no longer knows; nothing to compare
	}
	mismatch := func(what, want, got string) error {
		return &ClusterError{Type: "ResourcesMismatchError", Msg: fmt.Sprintf(
			"Task requested %s %s but cluster %q is on %s. Drop the flag, or launch a new cluster there (`sky launch -c NEW ...`).", what, want, c.Name, got)}
	}
	want := r.Infra
	if want.Cloud != "" && !strings.EqualFold(want.Cloud, have.Cloud) {
		return mismatch("infra", want.Cloud, h.Infra)
	}
	if want.Region != "" && !strings.EqualFold(want.Region, have.Region) && (h.Info == nil || !strings.EqualFold(want.Region, h.Info.Region)) {
		return mismatch("region", want.Region, h.Infra)
	}
	if want.Zone != "" && (h.Info == nil || !strings.EqualFold(want.Zone, h.Info.Zone)) {
		return mismatch("zone", want.Zone, h.Infra)
	}
	if r.InstanceType != "" && !strings.EqualFold(r.InstanceType, h.InstanceType) {
		got := h.InstanceType
		if got == "" {
			got = "no instance type"
		}
		return mismatch("instance type", r.InstanceType, h.Infra+" ("+got+")")
	}
	if r.UseSpot != nil && *r.UseSpot && !h.UseSpot {
		return mismatch("spot instances", "(--use-spot)", h.Infra+" (on-demand)")
	}
	// What the cluster was created with; these are fixed from then on.
	cr, err := resources.DecodeJSON(c.Resources)
	if err != nil {
		cr = &resources.Resources{}
	}
	created := func(what, want, got string) error {
		return &ClusterError{Type: "ResourcesMismatchError", Msg: fmt.Sprintf(
			"Task requested %s %s but cluster %q was created with %s (it is set when a cluster is created). Drop the flag, or launch a new cluster with it (`sky launch -c NEW ...`).", what, want, c.Name, orNone(got))}
	}
	switch {
	case r.DiskSize > 0 && r.DiskSize != cr.DiskSize:
		return created("disk_size", fmt.Sprint(r.DiskSize), map[bool]string{true: fmt.Sprint(cr.DiskSize), false: ""}[cr.DiskSize > 0])
	case r.DiskTier != "" && !strings.EqualFold(r.DiskTier, cr.DiskTier):
		return created("disk_tier", r.DiskTier, cr.DiskTier)
	case r.NetworkTier == "best" && cr.NetworkTier != "best":
		return created("network_tier", r.NetworkTier, cr.NetworkTier)
	case r.LocalDisk != nil && (cr.LocalDisk == nil || r.LocalDisk.String() != cr.LocalDisk.String()):
		got := ""
		if cr.LocalDisk != nil {
			got = cr.LocalDisk.String()
		}
		return created("local_disk", r.LocalDisk.String(), got)
	case r.ImageID != nil && (cr.ImageID == nil || !reflect.DeepEqual(*r.ImageID, *cr.ImageID)):
		return created("image_id", imageString(r.ImageID), imageString(cr.ImageID))
	case r.Memory != nil && !r.Memory.AtLeast && !r.Memory.PerCPU && h.MemoryGB > 0 && r.Memory.Value > h.MemoryGB:
		return created("memory", fmt.Sprintf("%gGB", r.Memory.Value), fmt.Sprintf("%gGB per node", h.MemoryGB))
	}
	if len(r.Ports) > 0 {
		have := cr.Ports
		open := map[int]bool{}
		for _, p := range resources.PortNumbers(have) {
			open[p] = true
		}
		for _, p := range resources.PortNumbers(r.Ports) {
			if !open[p] {
				return &ClusterError{Type: "ResourcesMismatchError", Msg: fmt.Sprintf(
					"Task requested port %d but cluster %q exposes only %s (ports are set when a cluster is created). Launch a new cluster with --ports.", p, c.Name, orNone(strings.Join(have, ", ")))}
			}
		}
	}
	return nil
}

func imageString(im *resources.ImageID) string {
	switch {
	case im == nil:
		return ""
	case im.DockerImage() != "":
		return resources.DockerPrefix + im.DockerImage()
	case im.Any() != "":
		return im.Any()
	}
	return "per-region images"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func gpuString(g map[string]float64) string {
	if len(g) == 0 {
		return "no accelerators"
	}
	var parts []string
	for n, v := range g {
		parts = append(parts, fmt.Sprintf("%s:%g", n, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// provisionWithFailover asks the planner for a candidate, provisions it,
// and on a capacity error blocks it and asks again.
// A volume's zone (pin) is where the head must be: the zone the optimizer
// cannot choose, since only the volume's infrastructure knows it.
func (b *Backend) provisionWithFailover(ctx context.Context, name string, t api.TaskSpec, res *resources.Resources, user User, plan Planner, body api.LaunchBody, pin *volumePlace, vols []provision.Volume, log io.Writer) (*state.Cluster, *Handle, error) {
	var blocked []optimizer.Blocked
	var failures []string
	capacityFailures, round := 0, 1
	for attempt := 1; ; attempt++ {
		p, err := plan(ctx, res, t.NumNodes, blocked)
		startOver, final := false, error(nil)
		if err != nil {
			startOver, final = afterPlanError(err, body.Retry, failures, capacityFailures)
		}
		if startOver {
			// -r: every candidate was out of capacity; start over after a
			// pause, until something frees up or the request is cancelled.
			delay := b.retryDelay(round)
			fmt.Fprintln(log, ux.Retrying(fmt.Sprintf("No candidate had capacity (round %d). Retrying in %s (--retry-until-up; cancel the request to stop).", round, delay)))
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(delay):
			}
			blocked, failures, capacityFailures = nil, nil, 0
			round++
			continue
		}
		if err != nil {
			if len(failures) > 0 {
				fmt.Fprintln(log, ux.Failed("Failed to provision resources."))
			}
			return nil, nil, final
		}
		cand := p.Tasks[0].Chosen
		id := b.Infras.FromCandidate(cand.Cloud, cand.Region, cand.Zone)
		where := id.String()
		plug, err := b.Infras.Get(id)
		var prov provision.Provisioner
		if err == nil && b.MayProvision != nil {
			err = b.MayProvision(ctx, user, id.Kind)
		}
		if err == nil {
			prov, err = plug.Provisioner(id)
		}
		if err != nil {
			failures = append(failures, err.Error())
			blocked = append(blocked, afterUnusable(cand).block)
			fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("Cannot use %s: %v", where, err)))
			fmt.Fprintln(log, ux.Retrying("Trying other potential resources."))
			continue
		}
		_, byCapacity := plug.(infra.Capacity)
		spec := provision.ClusterSpec{Name: name, NumNodes: t.NumNodes, Region: cand.Region, Zone: cand.Zone,
			Resources: nodeResources(res, cand, byCapacity), Config: t.Config, Log: log,
			Ports: res.Ports, Labels: res.Labels, UseSpot: cand.UseSpot, DiskSizeGB: res.DiskSizeGB(), DiskTier: res.DiskTier,
			Volumes: vols}
		if body.Managed != nil {
			spec.Progress = body.Managed.Progress
		}
		if opts := p.Tasks[0].Task.Options; cand.Option < len(opts) {
			z := opts[cand.Option].Zone
			spec.ZoneRequested = z != "" && z != "*"
		}
		if pin != nil && pin.zone != "" {
			spec.Zone, spec.ZoneRequested = pin.zone, true
		}
		if res.ImageID != nil {
			if d := res.ImageID.DockerImage(); d != "" {
				spec.ImageID = resources.DockerPrefix + d
			} else {
				spec.ImageID = res.ImageID.Any()
			}
		}
		c := &state.Cluster{Name: name, ClusterHash: newHash(name), UserHash: user.Hash, UserName: user.Name,
			Workspace: cmp.Or(body.Workspace, "default"), Status: state.ClusterInit, NumNodes: t.NumNodes, LaunchedAt: time.Now().Unix(),
			Autostop: -1, LastUse: body.Command, LastCreationYAML: t.YAML, LastCreationCommand: body.Command,
			IsManaged: body.Managed != nil}
		if raw, err := json.Marshal(res.ToMap()); err == nil {
			c.Resources = raw
		}
		h := &Handle{Infra: where, PricePerHour: cand.HourlyPrice, InstanceType: cand.InstanceType,
			UseSpot: cand.UseSpot, Reason: fmt.Sprintf("provisioning on %s (attempt %d)", where, attempt)}
		b.saveHandle(c, h)
		if err := b.recordLaunch(ctx, c, "launch: provisioning on "+where); err != nil {
			return nil, nil, err
		}
		cloud := optimizer.DisplayName(cand.Cloud)
		fmt.Fprintln(log, launchingOn(cloud, cand.Region, cand.Zone))
		end := stage(log, "Provisioning %s on %s (%d node%s)...", name, cloud, t.NumNodes, plural(t.NumNodes))
		info, err := prov.Provision(ctx, spec)
		end()
		if err != nil {
			if step := afterProvisionError(err, cand, byCapacity); step.next {
				failures = append(failures, err.Error())
				blocked = append(blocked, step.block)
				if step.capacity {
					capacityFailures++
					var capErr *provision.CapacityError
					errors.As(err, &capErr)
					fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("No capacity on %s: %s.", where, capacityReason(capErr))))
				} else {
					fmt.Fprintln(log, ux.Styled(ux.Yellow, fmt.Sprintf("Cannot use %s: %v.", optimizer.DisplayName(cand.Cloud), err)))
				}
				fmt.Fprintln(log, ux.Retrying("Trying other potential resources."))
				_, _ = b.Store.RemoveCluster(context.WithoutCancel(ctx), name, "failover: "+err.Error(), nil)
				continue
			}
			b.setReason(ctx, c, h, "provisioning failed: "+err.Error())
			fmt.Fprintln(log, ux.Failed("Failed to provision resources."))
			return nil, nil, err
		}
		fmt.Fprintln(log, instancesUp(len(info.Nodes)))
		err = b.update(ctx, c, h, func(_ *state.Cluster, h *Handle) (string, error) {
			h.Info = info
			if len(info.Nodes) > 0 {
				n := info.Nodes[0]
				h.CPUs, h.MemoryGB, h.GPUs = n.CPUs, n.MemoryGB, n.GPUs
			}
			h.Reason = reasonStartingAgents
			return "", nil
		})
		if err != nil {
			return nil, nil, err
		}
		_ = b.Store.AddHistory(ctx, &state.History{ClusterHash: c.ClusterHash, Name: name, UserHash: user.Hash,
			UserName: user.Name, Resources: launchedResources(res, &cand, h, c.Resources), NumNodes: t.NumNodes, PricePerHour: cand.HourlyPrice,
			LaunchedAt: c.LaunchedAt, UsageIntervals: []state.Interval{{Start: time.Now().Unix()}}})
		return c, h, nil
	}
}

// capacityReason is a capacity error without its "no capacity on X"
// prefix, for a line that names the place itself.
func capacityReason(e *provision.CapacityError) string {
	switch {
	case e.Msg != "" && e.Err != nil:
		return e.Msg + ": " + e.Err.Error()
	case e.Msg != "":
		return e.Msg
	case e.Err != nil:
		return e.Err.Error()
	}
	return "no capacity"
}

// launchedResources is what a launch got, as a resources mapping: the
// request narrowed to the chosen candidate and the nodes' real size, so
// cost-report can describe the cluster after it is gone. requested is
// kept when the mapping cannot be built.
func launchedResources(req *resources.Resources, cand *optimizer.Candidate, h *Handle, requested json.RawMessage) json.RawMessage {
	if req == nil || cand == nil {
		return requested
	}
	l := req.Copy()
	l.AnyOf, l.Ordered = nil, nil
	l.Infra = resources.Infra{Cloud: cand.Cloud, Region: cand.Region, Zone: cand.Zone}
	if !infrakind.HasRegions(cand.Cloud) {
		l.Infra.Region = ""
	}
	l.InstanceType = cand.InstanceType
	spot := cand.UseSpot
	l.UseSpot = &spot
	if h.CPUs > 0 {
		l.CPUs = &resources.Quantity{Value: h.CPUs}
	}
	if h.MemoryGB > 0 {
		l.Memory = &resources.Quantity{Value: math.Round(h.MemoryGB*100) / 100}
	}
	if cand.AccName != "" {
		l.Accelerators = resources.Accelerators{List: []resources.Accelerator{{Name: cand.AccName, Count: cand.AccCount}}}
	}
	b, err := json.Marshal(l.ToMap())
	if err != nil {
		return requested
	}
	return b
}

// retryDelay is the pause before round+1 of --retry-until-up: doubling
// from RetryDelay (default 5 s) up to one minute.
func (b *Backend) retryDelay(round int) time.Duration {
	d := b.RetryDelay
	if d <= 0 {
		d = 5 * time.Second
	}
	for i := 1; i < round && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// nodeResources turns the request and the chosen candidate into what each
// node must offer. On an infrastructure priced by capacity (byCapacity)
// there is no instance type: the request is what each node gets (local
// sandboxes) or must fit (whole hosts of a pool); "N+" asks for at least
// N, so N it is.
func nodeResources(r *resources.Resources, c optimizer.Candidate, byCapacity bool) provision.Resources {
	out := provision.Resources{InstanceType: c.InstanceType}
	if byCapacity {
		if r.CPUs != nil {
			out.CPUs = r.CPUs.Value
		}
		if r.Memory != nil && !r.Memory.PerCPU {
			out.MemoryGB = r.Memory.Value
		}
	} else {
		out.CPUs, out.MemoryGB = c.VCPUs, c.MemoryGiB
		if math.IsNaN(out.MemoryGB) {
			out.MemoryGB = 0
		}
	}
	if c.AccName != "" {
		out.GPUs = map[string]float64{c.AccName: c.AccCount}
	}
	return out
}

func newHash(name string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", name, time.Now().UnixNano())))
	return hex.EncodeToString(sum[:])[:16]
}

// hashSetup is what --fast compares to skip setup on a re-launch: the
// setup script, its environment and the workdir.
func hashSetup(t *api.TaskSpec) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", t.Setup, t.Workdir, t.WorkdirGit, t.WorkdirRef)
	keys := make([]string, 0, len(t.Envs))
	for k := range t.Envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\x00", k, t.Envs[k])
	}
	if t.Workdir != "" {
		_ = filepath.Walk(t.Workdir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				fmt.Fprintf(h, "%s %d %d\x00", p, fi.Size(), fi.ModTime().UnixNano())
			}
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// recordLaunch writes the INIT record of a launch: a new row, or a fresh
// start over the row of a launch that never got nodes. A launch of the
// same name that another server started in between wins.
func (b *Backend) recordLaunch(ctx context.Context, c *state.Cluster, reason string) error {
	err := b.Store.CreateCluster(ctx, c, reason)
	if !errors.Is(err, state.ErrExists) {
		return err
	}
	fresh := *c
	return b.update(ctx, c, nil, func(row *state.Cluster, h *Handle) (string, error) {
		if h.Info != nil {
			return "", &ClusterError{Type: "ClusterExistsError", Msg: fmt.Sprintf("Cluster %q was launched by another request meanwhile; run the command again to reuse it.", c.Name)}
		}
		version := row.Version
		*row = fresh
		row.Version = version
		return reason, nil
	})
}

// setReason records why a cluster is where it is (a launch step that
// failed) as its handle's reason and an event.
func (b *Backend) setReason(ctx context.Context, c *state.Cluster, h *Handle, reason string) {
	_ = b.update(ctx, c, h, func(_ *state.Cluster, h *Handle) (string, error) {
		h.Reason = reason
		return reason, nil
	})
}

// onAutostopCommand is what the head agent runs when autostop fires: a
// call back into this API server. The agent sets SKYGO_AUTOSTOP_ACTION to
// "stop" or "down", which are exactly the sky subcommands to run.
func (b *Backend) onAutostopCommand(name string) string {
	parts := []string{"env"}
	for _, kv := range b.CallbackEnv {
		parts = append(parts, provision.Quote(kv))
	}
	parts = append(parts, provision.Quote("HOME="+b.Home), provision.Quote(cmp.Or(b.CLI, b.Sky)))
	return strings.Join(parts, " ") + ` "$SKYGO_AUTOSTOP_ACTION" -y ` + provision.Quote(name)
}

// reasonStartingAgents is the INIT reason from the nodes being up to
// their agents answering; a server crash in between leaves it, which
// Refresh repairs (finishAgentStart).
const reasonStartingAgents = "starting agents"

// startAgents starts the agent on every node (idempotent) and marks the
// cluster UP.
func (b *Backend) startAgents(ctx context.Context, c *state.Cluster, h *Handle, runners []provision.CommandRunner, log io.Writer) error {
	var nodes []agentapi.Node
	onAutostop := b.onAutostopCommand(c.Name)
	plug, _, err := b.plugin(h)
	if err != nil {
		return err
	}
	if bs, ok := plug.(infra.Bootstrapper); ok {
		if nodes, err = bs.Bootstrap(ctx, h.Info, runners, log); err != nil {
			return err
		}
	}
	if _, ok := plug.(infra.NoCallback); ok {
		// The callback runs `sky stop|down` against this API server from
		// the head node, which only works when the head is this machine;
		// the server's autostop controller acts for these clusters.
		onAutostop = ""
	}
	defer stage(log, "Starting node agents...")()
	cfgs := b.agentConfigs(h, onAutostop, nodes)
	err = parallel(len(runners), func(i int) error {
		return b.agentCall(ctx, runners[i], cfgs[i], nil, "start")
	})
	if err != nil {
		return err
	}
	info := h.Info
	return b.update(ctx, c, h, func(c *state.Cluster, h *Handle) (string, error) {
		c.Status = state.ClusterUp
		h.Info, h.Reason, h.AgentDown = info, "", false
		return "cluster is up", nil
	})
}

// parallel runs f(0..n-1) concurrently and returns the first error.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = f(i)
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// syncFiles copies the workdir to ~/sky_workdir on every node and, with
// mounts, the file_mounts, with SkyPilot's lines.
func (b *Backend) syncFiles(ctx context.Context, runners []provision.CommandRunner, t *api.TaskSpec, mounts bool, log io.Writer) error {
	hasWorkdir := t.WorkdirGit != "" || t.Workdir != ""
	if !hasWorkdir && (!mounts || len(t.FileMounts) == 0) {
		return nil
	}
	fmt.Fprintln(log, ux.Starting("Syncing files."))
	if hasWorkdir {
		if err := b.syncWorkdir(ctx, runners, t, log); err != nil {
			return err
		}
		fmt.Fprintln(log, ux.Finishing("Synced workdir."))
	}
	if mounts && len(t.FileMounts) > 0 {
		if err := b.syncFileMounts(ctx, runners, t, log); err != nil {
			return err
		}
		fmt.Fprintln(log, ux.Finishing("Synced file_mounts."))
	}
	return nil
}

// toNodes is "(to 2 nodes)" of the sync lines.
func toNodes(n int) string { return fmt.Sprintf("(to %d node%s)", n, plural(n)) }

// syncWorkdir copies the workdir to ~/sky_workdir on every node.
func (b *Backend) syncWorkdir(ctx context.Context, runners []provision.CommandRunner, t *api.TaskSpec, log io.Writer) error {
	switch {
	case t.WorkdirGit != "":
		src := t.WorkdirGit
		if t.WorkdirRef != "" {
			src += "@" + t.WorkdirRef
		}
		fmt.Fprintf(log, "  Syncing workdir %s: %s -> ~/sky_workdir\n", toNodes(len(runners)), src)
		defer stage(log, "Cloning %s into ~/sky_workdir on %d node%s...", t.WorkdirGit, len(runners), plural(len(runners)))()
		cmd := "rm -rf ~/sky_workdir && git clone --quiet " + provision.Quote(t.WorkdirGit) + " ~/sky_workdir"
		if t.WorkdirRef != "" {
			cmd += " && cd ~/sky_workdir && git checkout --quiet " + provision.Quote(t.WorkdirRef)
		}
		err := parallel(len(runners), func(i int) error {
			res, err := runners[i].Run(ctx, cmd, provision.RunOptions{})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("git clone of %s failed on %s: %s", t.WorkdirGit, runners[i].NodeIP(), strings.TrimSpace(string(res.Stderr)))
			}
			return err
		})
		if err != nil {
			return err
		}
		// The job records the commit the ref resolved to (SkyPilot's
		// git_commit), read where it was checked out.
		res, err := runners[0].Run(ctx, "git -C ~/sky_workdir rev-parse HEAD", provision.RunOptions{})
		if err == nil && res.ExitCode == 0 {
			t.GitCommit = strings.TrimSpace(string(res.Stdout))
		}
		return nil
	case t.Workdir != "":
		fi, err := os.Stat(t.Workdir)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("workdir %s is not a directory the API server can read; give an existing local directory", t.Workdir)
		}
		// The workdir is the client's upload (core resolves it), already
		// filtered by .skyignore/.gitignore (internal/upload): it is
		// synced as it is.
		fmt.Fprintf(log, "  Syncing workdir %s: %s -> ~/sky_workdir\n", toNodes(len(runners)), t.Workdir)
		defer stage(log, "Syncing workdir %s to ~/sky_workdir on %d node%s...", t.Workdir, len(runners), plural(len(runners)))()
		return parallel(len(runners), func(i int) error {
			return runners[i].Rsync(ctx, t.Workdir, "~/sky_workdir", provision.RsyncOptions{})
		})
	}
	return nil
}

// syncFileMounts copies local file_mounts sources (the client's uploads,
// filtered as the workdir is) to every node.
func (b *Backend) syncFileMounts(ctx context.Context, runners []provision.CommandRunner, t *api.TaskSpec, log io.Writer) error {
	dsts := make([]string, 0, len(t.FileMounts))
	for d := range t.FileMounts {
		dsts = append(dsts, d)
	}
	sort.Strings(dsts)
	for _, dst := range dsts {
		src := t.FileMounts[dst]
		fi, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("file_mounts %s: source %s: %w", dst, src, err)
		}
		fmt.Fprintf(log, "  Syncing %s: %s -> %s\n", toNodes(len(runners)), src, dst)
		end := stage(log, "Syncing %s to %s on %d node%s...", src, dst, len(runners), plural(len(runners)))
		err = parallel(len(runners), func(i int) error {
			if fi.IsDir() {
				return runners[i].Rsync(ctx, src, dst, provision.RsyncOptions{})
			}
			return runners[i].Upload(ctx, src, dst)
		})
		end()
		if err != nil {
			return err
		}
	}
	return nil
}

// applyLaunchAutostop sets autostop from -i / --down, else from the
// task's resources.autostop (with its wait_for and hook).
func (b *Backend) applyLaunchAutostop(ctx context.Context, c *state.Cluster, h *Handle, head provision.CommandRunner, body api.LaunchBody, r *resources.Resources) error {
	cfg := agentapi.AutostopConfig{IdleMinutes: -1, Down: body.Down}
	if body.IdleMinutes != nil {
		cfg.IdleMinutes = *body.IdleMinutes
	} else if r.Autostop != nil {
		a := r.Autostop
		if !a.Enabled {
			return b.setAutostop(ctx, c, h, head, agentapi.AutostopConfig{IdleMinutes: -1})
		}
		// SkyPilot rounds a YAML idle time of 0 up to one minute.
		cfg = agentapi.AutostopConfig{IdleMinutes: max(a.IdleMinutes, 1), Down: a.Down || body.Down,
			WaitFor: a.WaitFor, Hook: a.Hook, HookTimeout: a.HookTimeout}
	}
	if body.Down && cfg.IdleMinutes < 0 {
		cfg.IdleMinutes = 0
	}
	if body.WaitFor != "" {
		cfg.WaitFor = body.WaitFor
	}
	if cfg.IdleMinutes < 0 {
		return nil
	}
	return b.setAutostop(ctx, c, h, head, cfg)
}

// submitAndFollow submits setup (may be empty) and the run command as one
// job to the head agent and, unless detached, streams the job as SkyPilot
// shows it until it ends. result gets the job's id and final status;
// submitted (if not nil) is called once the job is on the cluster, before
// following it. A launch passes its cluster as launch, so that a
// relaunch after a server crash finds its job (see launchJob); exec
// passes nil.
// jobRecord is what the server keeps of a submitted job besides the
// node's job table: the spec it was submitted with (sky.cluster_job_spec).
type jobRecord struct {
	clusterHash string
	entrypoint  string
}

func (b *Backend) submitAndFollow(ctx context.Context, head provision.CommandRunner, t *api.TaskSpec, setup string, r *resources.Resources, user User, detach bool, result *api.LaunchResult, submitted func(), launch *launchRef, rec jobRecord, log io.Writer) error {
	spec := agentapi.JobSpec{Name: t.Name, Setup: setup, Run: t.Run, Envs: t.Envs, Secrets: t.Secrets, NumNodes: t.NumNodes,
		User: user.Name, UserHash: user.Hash}
	if t.GitCommit != "" {
		spec.Metadata = map[string]any{agentapi.MetaGitCommit: t.GitCommit}
	}
	if launch != nil && launch.managed != nil {
		if spec.Metadata == nil {
			spec.Metadata = map[string]any{}
		}
		spec.Metadata[api.MetaManagedTag] = launch.managed.Tag
		spec.TaskID = launch.managed.TaskID
		if launch.c == nil {
			// An exec of the managed-jobs controller: a submit repeated
			// after a cut-off lands once.
			spec.SubmitKey = "managed/" + launch.managed.Tag
		}
	}
	if r.CPUs != nil && !r.CPUs.PerCPU {
		v := r.CPUs.Value
		spec.CPUs = &v
	}
	if name := r.AcceleratorName(); name != "" {
		spec.GPUs = map[string]float64{name: r.AcceleratorCount()}
	}
	var out agentapi.SubmitResult
	adopted := 0
	if launch != nil && launch.c != nil {
		var ended func()
		var err error
		if adopted, ended, err = b.launchJob(ctx, head, launch, &spec, log); err != nil {
			return err
		}
		defer ended()
	}
	if adopted > 0 {
		out.JobID = adopted
	} else if err := b.agentCall(ctx, head, spec, &out, "submit"); err != nil {
		return err
	}
	if submitted != nil {
		submitted()
	}
	result.JobID = out.JobID
	if rec.clusterHash != "" {
		// A record lost here costs sky.cluster_job_spec its answer, not
		// the job: say so in the log and go on.
		err := b.Store.PutClusterJobSpec(ctx, state.ClusterJobSpec{ClusterHash: rec.clusterHash, ClusterName: result.ClusterName,
			JobID: out.JobID, TaskYAML: t.YAML, Entrypoint: rec.entrypoint})
		if err != nil {
			fmt.Fprintf(log, "Warning: could not record job %d's spec: %v\n", out.JobID, err)
		}
	}
	if adopted > 0 {
		fmt.Fprintf(log, "Job %d of an earlier launch of this task, cut off by an API server restart, is still on the cluster: following it instead of submitting another.\n", adopted)
	}
	// Scripts read the job's id from this line, adopted or not.
	fmt.Fprintln(log, ux.Starting(fmt.Sprintf("Job submitted, ID: %d", out.JobID)))
	if detach {
		return nil
	}
	status, err := b.followJob(ctx, head, out.JobID, log)
	result.Status = status
	if err == nil && agentapi.Status(status) != agentapi.StatusSucceeded {
		return b.tornDown(ctx, result.ClusterName, out.JobID)
	}
	return err
}

// tornDown explains a job stream that ended without success: if a down
// took the cluster away meanwhile, saying so beats a silent exit 101 (or a
// FAILED the down itself caused). It waits for the cluster's lock so a
// down still in progress has finished.
func (b *Backend) tornDown(ctx context.Context, name string, jobID int) error {
	release, err := b.lock(ctx, name)
	if err != nil {
		return nil
	}
	defer release()
	if _, err := b.Store.GetCluster(ctx, name); errors.Is(err, state.ErrNotFound) {
		return &ClusterError{Type: "ClusterDoesNotExist", Msg: fmt.Sprintf(
			"Cluster %q was torn down while job %d was running; the job ended with it.", name, jobID)}
	}
	return nil
}

// Metadata keys of a launch's job: which launch (cluster incarnation
// and task), its submit key, and which server process submitted it.
const (
	metaLaunch = "skygo_launch"
	metaSubmit = "skygo_submit"
	metaServer = "skygo_server"
)

// launchRef is the cluster a launch submits to, as the launch loaded it.
type launchRef struct {
	c       *state.Cluster
	h       *Handle
	managed *api.ManagedLaunch
}

// launchJob makes a launch's submit safe against a server crash at any
// moment. Before submitting, the launch records its job's submit key on
// the cluster (Handle.InflightLaunch) and clears it once its job is
// handed off (detached) or followed to its end, so a key still there
// names the job of a launch that a crash cut off. That job is in the
// head's job table, which outlives the server: a relaunch of the same
// task adopts it and returns its id, instead of running a second setup
// beside it; a relaunch of a changed task cancels it, and waits for its
// processes to be gone, unless its setup has already finished. A job
// whose submitting server is this one is left alone: a live launch
// follows it. Otherwise spec gets its tags and a submit key that a
// submit the crash left in flight shares, so that one lands once. ended
// clears the record; the caller runs it when the launch lets go of the
// job.
func (b *Backend) launchJob(ctx context.Context, head provision.CommandRunner, l *launchRef, spec *agentapi.JobSpec, log io.Writer) (adopted int, ended func(), err error) {
	// A secret's value stays out of the key (the key is stored in clear
	// in the job table): a relaunch that changes only a secret's value
	// adopts the job with the old one.
	hashed := *spec
	hashed.Secrets = map[string]string{}
	for k := range spec.Secrets {
		hashed.Secrets[k] = ""
	}
	raw, err := json.Marshal(hashed)
	if err != nil {
		return 0, nil, err
	}
	sum := sha256.Sum256(raw)
	key := l.c.ClusterHash + "/" + hex.EncodeToString(sum[:8])
	var jobs []agentapi.Job
	if err := b.agentCall(ctx, head, nil, &jobs, "queue"); err != nil {
		return 0, nil, err
	}
	gen := 0
	for _, j := range jobs {
		if k, _ := j.Metadata[metaLaunch].(string); k == key {
			gen++
		}
	}
	submitKey := fmt.Sprintf("%s#%d", key, gen)
	if prev := l.h.InflightLaunch; prev != "" {
		for _, j := range jobs {
			sk, _ := j.Metadata[metaSubmit].(string)
			srv, _ := j.Metadata[metaServer].(string)
			if sk != prev || j.Status.Terminal() || srv == b.instanceID() {
				continue
			}
			if k, _ := j.Metadata[metaLaunch].(string); k == key {
				adopted, submitKey = j.JobID, prev
			} else if j.Status != agentapi.StatusRunning {
				fmt.Fprintf(log, "Cancelling job %d: its launch was cut off by an API server restart before its setup finished.\n", j.JobID)
				if err := b.cancelAndWait(ctx, head, []int{j.JobID}); err != nil {
					return 0, nil, err
				}
			}
		}
	}
	if adopted == 0 {
		if spec.Metadata == nil {
			spec.Metadata = map[string]any{}
		}
		spec.Metadata[metaLaunch], spec.Metadata[metaSubmit], spec.Metadata[metaServer] = key, submitKey, b.instanceID()
		spec.SubmitKey = submitKey
	}
	err = b.update(ctx, l.c, l.h, func(_ *state.Cluster, h *Handle) (string, error) {
		h.InflightLaunch = submitKey
		return "", nil
	})
	if err != nil {
		return 0, nil, err
	}
	ended = func() {
		_ = b.update(context.WithoutCancel(ctx), l.c, l.h, func(_ *state.Cluster, h *Handle) (string, error) {
			if h.InflightLaunch != submitKey {
				return "", state.ErrNoChange // a later launch's by now
			}
			h.InflightLaunch = ""
			return "", nil
		})
	}
	return adopted, ended, nil
}

// staleJobWait bounds the wait for cancelled jobs' processes to be gone.
const staleJobWait = 30 * time.Second

// cancelAndWait cancels jobs and waits until each is final, which the
// agent records only once the job's process groups are gone.
func (b *Backend) cancelAndWait(ctx context.Context, head provision.CommandRunner, ids []int) error {
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = fmt.Sprint(id)
	}
	var res agentapi.CancelResult
	if err := b.agentCall(ctx, head, nil, &res, "cancel", args...); err != nil {
		return err
	}
	deadline := time.Now().Add(staleJobWait)
	for _, id := range ids {
		for {
			st, err := b.jobStatus(ctx, head, id)
			if err != nil {
				return err
			}
			if st == "" || agentapi.Status(st).Terminal() {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("job %d of an interrupted launch is still %s %s after it was cancelled; cancel it (`sky cancel`) and launch again", id, st, staleJobWait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// followJob streams a job's log to w until it ends and returns its status.
func (b *Backend) followJob(ctx context.Context, head provision.CommandRunner, jobID int, w io.Writer) (string, error) {
	cmd, err := b.agentCommand(head, "logs", "--job", fmt.Sprint(jobID), "--follow")
	if err != nil {
		return "", err
	}
	if _, err := head.Stream(ctx, cmd, w, w); err != nil {
		return "", err
	}
	st, err := b.jobStatus(ctx, head, jobID)
	if err != nil {
		return "", err
	}
	return st, nil
}

func (b *Backend) jobStatus(ctx context.Context, head provision.CommandRunner, jobID int) (string, error) {
	var rep agentapi.StatusReport
	if err := b.agentCall(ctx, head, nil, &rep, "status", fmt.Sprint(jobID)); err != nil {
		return "", err
	}
	for _, j := range rep.Jobs {
		if j.JobID == jobID {
			return string(j.Status), nil
		}
	}
	return "", nil
}
