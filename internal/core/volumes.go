package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/task"
)

// `sky volumes apply / ls / delete`. The records are the volumes table;
// what a volume is on its infrastructure (a directory on a host) is the
// infrastructure's (infra.VolumeHost); attaching happens at launch
// (backend/volumes.go).

func (e *Env) volumeOps() []op.Op {
	return []op.Op{
		op.Handle(apiop.VolumesApply, e.volumesApply),
		op.Handle(apiop.VolumesLs, e.volumesLs),
		op.Handle(apiop.VolumesDelete, e.volumesDelete),
	}
}

func valueError(format string, args ...any) error {
	return &op.Error{Type: "ValueError", Message: fmt.Sprintf(format, args...)}
}

// volumeSpecOf validates an apply body as the CLI did the YAML: the
// server trusts no client's checks.
func volumeSpecOf(b api.VolumeApplyBody) (*task.VolumeSpec, error) {
	m := map[string]any{"name": b.Name, "type": b.Type}
	if b.Infra != "" {
		m["infra"] = b.Infra
	}
	if b.Size != "" {
		m["size"] = b.Size
	}
	if b.UseExisting {
		m["use_existing"] = true
	}
	if len(b.Labels) > 0 {
		m["labels"] = b.Labels
	}
	if len(b.Config) > 0 {
		m["config"] = b.Config
	}
	raw, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	spec, err := task.LoadVolumeSpecBytes("volume "+b.Name, raw)
	if err != nil {
		return nil, valueError("%v", err)
	}
	return spec, nil
}

// volumeNameOnCloud is SkyPilot's name on the cloud of a new volume:
// the name made safe (lower-case letters, digits, dashes; long names cut
// with a hash of the whole), then the user hash and 6 random hex digits,
// so two users' "data" volumes never collide.
func volumeNameOnCloud(name, userHash string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 24 {
		sum := sha256.Sum256([]byte(name))
		s = strings.TrimRight(s[:19], "-") + "-" + hex.EncodeToString(sum[:])[:4]
	}
	if s == "" {
		s = "vol"
	}
	user := userHash
	if len(user) > 8 {
		user = user[:8]
	}
	rnd := make([]byte, 3)
	_, _ = rand.Read(rnd)
	if user == "" {
		return s + "-" + hex.EncodeToString(rnd)
	}
	return s + "-" + strings.ToLower(user) + "-" + hex.EncodeToString(rnd)
}

func (e *Env) volumesApply(ctx context.Context, r *op.Request, b api.VolumeApplyBody) (op.Null, error) {
	spec, err := volumeSpecOf(b)
	if err != nil {
		return op.Null{}, err
	}
	infras := e.Backend.Infras
	place := spec.Infra
	if place == "" {
		// The first kind of this build that holds the type.
		if kinds := infras.VolumeKinds(spec.Type); len(kinds) > 0 {
			place = kinds[0]
		}
	}
	kind, rest, _ := strings.Cut(strings.Trim(place, "/"), "/")
	whole := false
	if k, ok := infrakind.Lookup(kind); ok && k.Place == infrakind.Context {
		// A context may hold '/' (EKS ARNs): the rest is one name.
		kind, whole = k.Name, true
	}
	host, err := infras.VolumeHostFor(kind, spec.Type)
	if err != nil {
		return op.Null{}, &op.Error{Type: "NotSupportedError", Message: err.Error()}
	}
	if spec.Type == task.HostDirType && spec.SizeGi > 0 {
		// A host directory takes what the host's disk has; a size would
		// be a promise nothing keeps.
		return op.Null{}, valueError("a host-dir volume has no size of its own (it uses the host's disk): drop size / --size")
	}
	unlock, err := e.Store.LockVolume(ctx, spec.Name)
	if err != nil {
		return op.Null{}, err
	}
	defer unlock()
	if cur, err := e.Store.GetVolume(ctx, spec.Name); err == nil {
		// Names are one namespace for all users: another user's volume
		// of this name is not the caller's to "already have".
		if !backend.MayUseVolume(cur, userOf(r)) {
			return op.Null{}, valueError("Volume %s already exists and belongs to another user; choose another name.", spec.Name)
		}
		fmt.Fprintf(r.Log, "Volume %s already exists.\n", spec.Name)
		return op.Null{}, nil
	} else if !errors.Is(err, state.ErrNotFound) {
		return op.Null{}, err
	}
	id, err := infra.ParseID(strings.ToLower(kind) + "/" + rest)
	if whole {
		id, err = infra.ID{Kind: kind}, nil
		if rest != "" {
			id.Parts = []string{rest}
		}
	}
	if err != nil {
		return op.Null{}, valueError("infra %q: %v", place, err)
	}
	u := r.User
	cfg, err := e.requestConfig(r)
	if err != nil {
		return op.Null{}, err
	}
	v := &state.Volume{Name: spec.Name, Type: spec.Type, Cloud: id.Kind, Region: id.Part(0), Zone: id.Part(1),
		SizeGi: spec.SizeGi, UserHash: u.ID, UserName: u.Name, Workspace: cfg.ActiveWorkspace(), Status: state.VolumeReady,
		CreationYAML: b.YAML}
	if len(id.Parts) > 2 {
		return op.Null{}, valueError("infra %q has too many parts; write %s[/<region>[/<zone>]]", place, id.Kind)
	}
	if spec.ConfigRaw != nil {
		v.Config, _ = json.Marshal(spec.ConfigRaw)
	}
	if spec.UseExisting {
		v.NameOnCloud = spec.Name
		v.Config = withKey(v.Config, "use_existing", true)
	} else {
		v.NameOnCloud = volumeNameOnCloud(spec.Name, u.ID)
	}
	if len(spec.Labels) > 0 {
		v.Config = withKey(v.Config, "labels", spec.Labels)
	}
	fmt.Fprintf(r.Log, "Creating volume %s (%s on %s)...\n", v.Name, v.Type, id.String())
	if err := host.ApplyVolume(ctx, v, spec.UseExisting); err != nil {
		return op.Null{}, valueError("volume %s: %v", v.Name, err)
	}
	if err := e.Store.CreateVolume(ctx, v); errors.Is(err, state.ErrExists) {
		return op.Null{}, valueError("volume %s: %s on %s is already registered under another volume name", v.Name, v.NameOnCloud, id.String())
	} else if err != nil {
		return op.Null{}, err
	}
	fmt.Fprintf(r.Log, "Created volume %s.\n", v.Name)
	return op.Null{}, nil
}

func withKey(raw json.RawMessage, k string, v any) json.RawMessage {
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	m[k] = v
	out, _ := json.Marshal(m)
	return out
}

func (e *Env) volumesLs(ctx context.Context, r *op.Request, b api.VolumeLsBody) ([]api.VolumeRecord, error) {
	vols, err := e.visibleVolumes(ctx, r)
	if err != nil {
		return nil, err
	}
	if len(b.Names) > 0 {
		want := map[string]bool{}
		for _, n := range b.Names {
			want[n] = true
		}
		kept := vols[:0]
		for _, v := range vols {
			if want[v.Name] {
				kept = append(kept, v)
			}
		}
		vols = kept
	}
	if b.Refresh {
		for i, v := range vols {
			if nv, err := e.refreshVolume(ctx, v); err == nil {
				vols[i] = nv
			}
		}
	}
	out := make([]api.VolumeRecord, 0, len(vols))
	for _, v := range vols {
		rec := volumeRecord(v)
		if b.Refresh {
			if pods, err := e.volumePods(ctx, v); err == nil && len(pods) > 0 {
				rec.UsedByPods = pods
				if rec.Status == string(state.VolumeReady) {
					rec.Status = string(state.VolumeInUse)
				}
			}
		}
		out = append(out, rec)
	}
	return out, nil
}

// visibleVolumes are the volumes the request's user may see: their own,
// or everyone's for an admin, less those of workspaces the user may not
// use.
func (e *Env) visibleVolumes(ctx context.Context, r *op.Request) ([]*state.Volume, error) {
	vols, err := e.Store.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	access, err := e.workspaceAccess(r)
	if err != nil {
		return nil, err
	}
	u := userOf(r)
	kept := vols[:0]
	for _, v := range vols {
		if backend.MayUseVolume(v, u) && access(v.Workspace) {
			kept = append(kept, v)
		}
	}
	return kept, nil
}

// volumePods are the pods that mount v, where its infrastructure can say.
func (e *Env) volumePods(ctx context.Context, v *state.Volume) ([]string, error) {
	host, err := e.Backend.Infras.VolumeHostFor(v.Cloud, v.Type)
	if err != nil {
		return nil, err
	}
	if l, ok := host.(infra.VolumePodLister); ok {
		return l.VolumePods(ctx, v)
	}
	return nil, nil
}

// refreshVolume makes a volume's record agree with the world: users that
// are no longer clusters are dropped (a cluster removed while the server
// was down), and an infrastructure that can look says whether the
// storage is still there.
func (e *Env) refreshVolume(ctx context.Context, v *state.Volume) (*state.Volume, error) {
	gone := map[string]bool{}
	for _, c := range v.UsedByClusters {
		if _, err := e.Store.GetCluster(ctx, c); errors.Is(err, state.ErrNotFound) {
			gone[c] = true
		}
	}
	var probeErr error
	probed := false
	if host, err := e.Backend.Infras.VolumeHostFor(v.Cloud, v.Type); err == nil {
		if p, ok := host.(infra.VolumeProber); ok {
			probed, probeErr = true, p.ProbeVolume(ctx, v)
		}
	}
	return e.Store.UpdateVolume(ctx, v.Name, func(v *state.Volume) error {
		changed := false
		for c := range gone {
			if v.UsedBy(c) {
				v.Detach(c)
				changed = true
			}
		}
		switch {
		case probed && probeErr != nil && (v.Status != state.VolumeNotReady || v.ErrorMessage != probeErr.Error()):
			v.Status, v.ErrorMessage, changed = state.VolumeNotReady, probeErr.Error(), true
		case probed && probeErr == nil && v.Status == state.VolumeNotReady:
			v.Status, v.ErrorMessage, changed = state.VolumeReady, "", true
			if len(v.UsedByClusters) > 0 {
				v.Status = state.VolumeInUse
			}
		}
		if !changed {
			return state.ErrNoChange
		}
		return nil
	})
}

// volumeRecord is a row as `sky volumes ls -o json` and the SDK see it.
func volumeRecord(v *state.Volume) api.VolumeRecord {
	rec := api.VolumeRecord{Name: v.Name, Type: v.Type, LaunchedAt: v.LaunchedAt, Cloud: v.Cloud, Region: v.Region,
		Zone: v.Zone, NameOnCloud: v.NameOnCloud, UserHash: v.UserHash, UserName: v.UserName, Workspace: v.Workspace,
		LastAttachedAt: v.LastAttachedAt, LastUse: v.LastUse, Status: string(v.Status), UsedByPods: []string{},
		UsedByClusters: v.UsedByClusters, IsEphemeral: v.IsEphemeral, ErrorMessage: v.ErrorMessage}
	if rec.UsedByClusters == nil {
		rec.UsedByClusters = []string{}
	}
	if v.SizeGi > 0 {
		rec.Size = strconv.FormatFloat(v.SizeGi, 'f', -1, 64)
	}
	_ = json.Unmarshal(v.Config, &rec.Config)
	if rec.Config == nil {
		rec.Config = map[string]any{}
	}
	if hp, ok := rec.Config["host_path"].(string); ok {
		rec.HostPath = hp
	}
	id := infra.ID{Kind: v.Cloud}
	if v.Region != "" || v.Zone != "" {
		id.Parts = []string{v.Region, v.Zone}
	}
	rec.Infra = id.String()
	return rec
}

func (e *Env) volumesDelete(ctx context.Context, r *op.Request, b api.VolumeDeleteBody) ([]string, error) {
	names := b.Names
	if b.All {
		// -a is every volume the caller may delete: a user's own, an
		// admin's all.
		vols, err := e.visibleVolumes(ctx, r)
		if err != nil {
			return nil, err
		}
		names = nil
		for _, v := range vols {
			names = append(names, v.Name)
		}
		if len(names) == 0 {
			fmt.Fprintln(r.Log, "No volumes to delete.")
			return []string{}, nil
		}
	}
	if len(names) == 0 {
		return nil, valueError("Either --all or a name must be specified.")
	}
	var deleted []string
	var errs []error
	for _, n := range names {
		if err := e.deleteVolume(ctx, n, b.Purge, r); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, n)
	}
	if len(errs) > 0 {
		if len(errs) == 1 {
			return deleted, errs[0]
		}
		return deleted, valueError("%v", errors.Join(errs...))
	}
	return deleted, nil
}

func (e *Env) deleteVolume(ctx context.Context, name string, purge bool, r *op.Request) error {
	unlock, err := e.Store.LockVolume(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	v, err := e.Store.GetVolume(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return valueError("Volume %s not found.", name)
	} else if err != nil {
		return err
	}
	if !backend.MayUseVolume(v, userOf(r)) {
		return opErr(backend.VolumeOwnerError(v, "delete"))
	}
	// Users the record names but that are gone no longer hold it.
	if nv, err := e.refreshVolume(ctx, v); err == nil {
		v = nv
	}
	if len(v.UsedByClusters) > 0 && !purge {
		return valueError("Volume %s is used by cluster(s) %s.", name, strings.Join(v.UsedByClusters, ", "))
	}
	if !purge {
		// Workloads of others: their pods would lose the claim once they end.
		if pods, err := e.volumePods(ctx, v); err == nil && len(pods) > 0 {
			return valueError("Volume %s is used by pod(s) %s.", name, strings.Join(pods, ", "))
		}
	}
	// NOT_READY first, conditionally on nobody using it: a launch
	// resolving the volume from now on refuses it, so no cluster mounts
	// what is being removed.
	v, err = e.Store.UpdateVolume(ctx, name, func(cur *state.Volume) error {
		if len(cur.UsedByClusters) > 0 && !purge {
			return valueError("Volume %s is used by cluster(s) %s.", name, strings.Join(cur.UsedByClusters, ", "))
		}
		cur.Status, cur.ErrorMessage = state.VolumeNotReady, "being deleted"
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(r.Log, "Deleting volume %s...\n", name)
	var useExisting bool
	var cfg map[string]any
	if json.Unmarshal(v.Config, &cfg) == nil {
		useExisting, _ = cfg["use_existing"].(bool)
	}
	if !useExisting {
		host, err := e.Backend.Infras.VolumeHostFor(v.Cloud, v.Type)
		if err == nil {
			err = host.DeleteVolume(ctx, v)
		}
		if err != nil && !purge {
			return valueError("deleting volume %s: %v (use --purge to forget the volume anyway)", name, err)
		}
		if err != nil {
			fmt.Fprintf(r.Log, "Warning: deleting volume %s on %s failed (%v); its record is removed (--purge).\n", name, v.Cloud, err)
		}
	}
	_, err = e.Store.DeleteVolume(ctx, name, nil)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	fmt.Fprintf(r.Log, "Volume %s deleted.\n", name)
	return nil
}
