package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/state"
)

// A task's volumes (api.TaskSpec.Volumes) are resolved before anything is
// provisioned: each must exist and be of a type the infrastructure that
// holds it can mount on a cluster of that size, and they must agree on
// one place, which is then forced onto the task's resources (SkyPilot's
// VolumeTopologyConflict otherwise). Once the nodes are up and their
// agents started, each volume is attached (infra.VolumeHost) and the
// volume's record says which clusters use it; a teardown detaches them.
// The data never goes with the cluster.

// boundVolume is one task volume with its record and its host. The
// record of an ephemeral volume is stored once its cluster is up.
type boundVolume struct {
	mount api.VolumeMount
	vol   *state.Volume
	host  infra.VolumeHost
}

// ephemeralVolume binds a task volume made with the cluster: its
// infrastructure names it and makes its record.
func (b *Backend) ephemeralVolume(cluster string, m api.VolumeMount, numNodes int) (boundVolume, error) {
	typ := m.Ephemeral.Type
	if typ == "" {
		typ = infrakind.EphemeralVolumeType()
	}
	host, err := b.Infras.EphemeralVolumeHostFor(typ)
	if err != nil {
		return boundVolume{}, &ClusterError{Type: "NotSupportedError", Msg: fmt.Sprintf("volumes %s: %v", m.Path, err)}
	}
	v, err := host.EphemeralVolume(cluster, m)
	if err != nil {
		return boundVolume{}, &ClusterError{Type: "ValueError", Msg: fmt.Sprintf("volumes %s: %v", m.Path, err)}
	}
	if err := host.CheckVolume(v, numNodes); err != nil {
		return boundVolume{}, &ClusterError{Type: "ValueError", Msg: err.Error()}
	}
	m.Name = v.Name
	return boundVolume{mount: m, vol: v, host: host}, nil
}

func ephemeralNameTaken(cluster, name string) error {
	return &ClusterError{Type: "ValueError", Msg: fmt.Sprintf("the ephemeral volume of cluster %s would be named %s, the name of a volume made with `sky volumes apply`; launch under another cluster name", cluster, name)}
}

// provisionVolumes are the bound volumes as the provisioner gets them.
func provisionVolumes(vols []boundVolume) []provision.Volume {
	var out []provision.Volume
	for _, bv := range vols {
		pv := provision.Volume{Name: bv.vol.Name, Type: bv.vol.Type, NameOnCloud: bv.vol.NameOnCloud,
			Path: bv.mount.Path, SubPath: bv.mount.SubPath, Ephemeral: bv.vol.IsEphemeral, SizeGi: bv.vol.SizeGi}
		_ = json.Unmarshal(bv.vol.Config, &pv.Config)
		out = append(out, pv)
	}
	return out
}

// volumePlace is where a task's volumes live: an infra ID (kind and its
// first part, the region) and a zone that the head must be in ("" when
// anywhere of the region will do).
type volumePlace struct {
	id     infra.ID
	zone   string
	volume string // the volume that set it, for messages
}

func topologyConflict(format string, args ...any) error {
	return &ClusterError{Type: "VolumeTopologyConflict", Msg: fmt.Sprintf(format, args...)}
}

// resolveVolumes reads and checks the task's volumes. place is nil when
// the task mounts none.
func (b *Backend) resolveVolumes(ctx context.Context, cluster string, t *api.TaskSpec, u User) ([]boundVolume, *volumePlace, error) {
	var out []boundVolume
	var place *volumePlace
	for _, m := range t.Volumes {
		if m.SubPath != "" && slices.Contains(strings.Split(m.SubPath, "/"), "..") {
			return nil, nil, &ClusterError{Type: "ValueError", Msg: fmt.Sprintf("volumes %s: sub_path %q must stay inside the volume (no ..)", m.Path, m.SubPath)}
		}
		if m.Ephemeral != nil {
			bv, err := b.ephemeralVolume(cluster, m, t.NumNodes)
			if err != nil {
				return nil, nil, err
			}
			if cur, err := b.Store.GetVolume(ctx, bv.vol.Name); err == nil && !cur.IsEphemeral {
				return nil, nil, ephemeralNameTaken(cluster, bv.vol.Name)
			}
			// Made with the cluster, so anywhere its infrastructure
			// reaches will do.
			if place, err = mergePlace(place, &volumePlace{id: infra.ID{Kind: bv.vol.Cloud}, volume: bv.vol.Name}); err != nil {
				return nil, nil, err
			}
			out = append(out, bv)
			continue
		}
		v, err := b.Store.GetVolume(ctx, m.Name)
		if errors.Is(err, state.ErrNotFound) {
			return nil, nil, &ClusterError{Type: "ValueError", Msg: fmt.Sprintf("Volume %s not found. Create it with `sky volumes apply`, or fix volumes %s in the task.", m.Name, m.Path)}
		}
		if err != nil {
			return nil, nil, err
		}
		if !MayUseVolume(v, u) {
			return nil, nil, VolumeOwnerError(v, "mount")
		}
		if v.Status == state.VolumeNotReady {
			return nil, nil, &ClusterError{Type: "ValueError", Msg: fmt.Sprintf("Volume %s is NOT_READY (%s); see `sky volumes ls -r`.", v.Name, v.ErrorMessage)}
		}
		host, err := b.Infras.VolumeHostFor(v.Cloud, v.Type)
		if err != nil {
			return nil, nil, &ClusterError{Type: "NotSupportedError", Msg: fmt.Sprintf("volumes %s: volume %s: %v", m.Path, v.Name, err)}
		}
		if err := host.CheckVolume(v, t.NumNodes); err != nil {
			return nil, nil, &ClusterError{Type: "ValueError", Msg: err.Error()}
		}
		p := &volumePlace{id: infra.ID{Kind: v.Cloud}, zone: v.Zone, volume: v.Name}
		if v.Region != "" {
			p.id.Parts = []string{v.Region}
		}
		if place, err = mergePlace(place, p); err != nil {
			return nil, nil, err
		}
		out = append(out, boundVolume{mount: m, vol: v, host: host})
	}
	return out, place, nil
}

// mergePlace is the one place that suits both the volumes of place and
// volume p, or SkyPilot's VolumeTopologyConflict. A place of a kind alone
// (an ephemeral volume's: anywhere of that infrastructure) takes the
// other's region and zone.
func mergePlace(place, p *volumePlace) (*volumePlace, error) {
	conflict := func() error {
		return topologyConflict("Volumes %s (%s) and %s (%s) live in different places; a cluster can mount only volumes of one place.",
			place.volume, placeString(place), p.volume, placeString(p))
	}
	switch {
	case place == nil:
		return p, nil
	case place.id.Kind != p.id.Kind:
		return nil, conflict()
	case len(p.id.Parts) == 0:
		return place, nil
	case len(place.id.Parts) == 0:
		return p, nil
	case place.id.String() != p.id.String() || (place.zone != "" && p.zone != "" && place.zone != p.zone):
		return nil, conflict()
	case place.zone == "":
		place.zone = p.zone
	}
	return place, nil
}

func placeString(p *volumePlace) string {
	s := p.id.String()
	if p.zone != "" {
		s += " (" + p.zone + ")"
	}
	return s
}

// forcePlace pins the task's resources (and every alternative of them)
// to the volumes' place, or says how they conflict.
func forcePlace(res *resources.Resources, p *volumePlace) error {
	want, err := resources.ParseInfra(p.id.String())
	if err != nil {
		return err
	}
	pin := func(r *resources.Resources) error {
		have := r.Infra
		if (have.Cloud != "" && !strings.EqualFold(have.Cloud, want.Cloud)) ||
			(have.Region != "" && want.Region != "" && !strings.EqualFold(have.Region, want.Region)) {
			return topologyConflict("The task asks for infra %s, but volume %s lives on %s. Drop --infra, or use a volume there.",
				have.String(), p.volume, placeString(p))
		}
		r.Infra.Cloud = want.Cloud
		if want.Region != "" {
			r.Infra.Region = want.Region
		}
		return nil
	}
	if err := pin(res); err != nil {
		return err
	}
	for _, alts := range [][]*resources.Resources{res.AnyOf, res.Ordered} {
		for _, r := range alts {
			if err := pin(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkClusterPlace refuses volumes that an existing cluster is not where
// they live.
func checkClusterPlace(c *state.Cluster, h *Handle, p *volumePlace) error {
	have, err := infra.ParseID(h.Infra)
	if err != nil {
		return err
	}
	// A prefix of the cluster's ID: a region's volume suits its zones, and
	// a region that is a context (infrakind.Context) may itself hold '/'.
	if !strings.HasPrefix(have.String()+"/", p.id.String()+"/") {
		return topologyConflict("Volume %s lives on %s, but cluster %q is on %s. Launch a new cluster to mount it (`sky launch -c NEW ...`).",
			p.volume, placeString(p), c.Name, h.Infra)
	}
	return nil
}

// attachVolumes mounts the bound volumes on the cluster's nodes and
// records the cluster as their user. The handle remembers the mounts, so
// a teardown can undo them.
func (b *Backend) attachVolumes(ctx context.Context, c *state.Cluster, h *Handle, vols []boundVolume, command string, log io.Writer) error {
	if len(vols) == 0 {
		return nil
	}
	runners, err := b.runners(h)
	if err != nil {
		return err
	}
	var mounts []api.VolumeMount
	for _, bv := range vols {
		if bv.vol.IsEphemeral {
			if err := b.recordEphemeral(ctx, bv.vol, c, h); err != nil {
				return err
			}
		}
		zone, err := bv.host.AttachVolume(ctx, bv.vol, bv.mount, h.Info, runners)
		if err != nil {
			return &ClusterError{Type: "VolumeAttachError", Msg: fmt.Sprintf("Failed to mount volume %s at %s: %v", bv.vol.Name, bv.mount.Path, err)}
		}
		now := float64(time.Now().UnixNano()) / 1e9
		_, err = b.Store.UpdateVolume(context.WithoutCancel(ctx), bv.vol.Name, func(v *state.Volume) error {
			if v.Status == state.VolumeNotReady {
				return fmt.Errorf("volume %s became NOT_READY (%s) while it was mounted", v.Name, v.ErrorMessage)
			}
			if v.Zone == "" {
				v.Zone = zone
			}
			v.Attach(c.Name, now)
			if command != "" {
				v.LastUse = command
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("recording volume %s as used by %s: %w", bv.vol.Name, c.Name, err)
		}
		fmt.Fprintf(log, "Volume %s mounted at %s.\n", bv.vol.Name, bv.mount.Path)
		m := bv.mount
		m.Ephemeral = nil // the record says the rest; the handle compares mounts
		mounts = append(mounts, m)
	}
	return b.update(ctx, c, h, func(_ *state.Cluster, h *Handle) (string, error) {
		for _, m := range mounts {
			if !slices.Contains(h.Volumes, m) {
				h.Volumes = append(h.Volumes, m)
			}
		}
		return "", nil
	})
}

// recordEphemeral stores the record of an ephemeral volume its cluster's
// provisioner has just made, in the place the cluster is and owned by
// the cluster's user; a relaunch finds it there already.
func (b *Backend) recordEphemeral(ctx context.Context, v *state.Volume, c *state.Cluster, h *Handle) error {
	if cur, err := b.Store.GetVolume(ctx, v.Name); err == nil {
		if !cur.IsEphemeral {
			return ephemeralNameTaken(c.Name, v.Name) // made since the launch checked
		}
		return nil
	} else if !errors.Is(err, state.ErrNotFound) {
		return err
	}
	rec := *v
	rec.Region = h.Info.Region
	rec.UserHash, rec.UserName, rec.Workspace = c.UserHash, c.UserName, c.Workspace
	rec.Status = state.VolumeReady
	rec.LaunchedAt = float64(time.Now().UnixNano()) / 1e9
	err := b.Store.CreateVolume(context.WithoutCancel(ctx), &rec)
	if err != nil && !errors.Is(err, state.ErrExists) {
		return fmt.Errorf("recording ephemeral volume %s: %w", v.Name, err)
	}
	return nil
}

// unlinkVolumes removes the mounts of a cluster about to be torn down
// from its nodes (best effort: the nodes may be gone already). The data
// stays where it is.
func (b *Backend) unlinkVolumes(ctx context.Context, h *Handle, log io.Writer) {
	if h == nil || h.Info == nil || len(h.Volumes) == 0 {
		return
	}
	runners, err := b.runners(h)
	if err != nil {
		return
	}
	for _, m := range h.Volumes {
		v, err := b.Store.GetVolume(ctx, m.Name)
		if err != nil {
			continue
		}
		host, err := b.Infras.VolumeHostFor(v.Cloud, v.Type)
		if err != nil {
			continue
		}
		if err := host.DetachVolume(ctx, v, m, h.Info, runners); err != nil {
			fmt.Fprintf(log, "Warning: unmounting volume %s: %v\n", v.Name, err)
		}
	}
}

// releaseVolumes drops a cluster that is gone from the users of every
// volume (IN_USE becomes READY with no user left).
func (b *Backend) releaseVolumes(ctx context.Context, cluster string) {
	vols, err := b.Store.ListVolumes(ctx)
	if err != nil {
		return
	}
	for _, v := range vols {
		if !v.UsedBy(cluster) {
			continue
		}
		if v.IsEphemeral {
			// Its storage went with the cluster (the provisioner's
			// Terminate), so the record goes too.
			_, _ = b.Store.DeleteVolume(context.WithoutCancel(ctx), v.Name, func(cur *state.Volume) error {
				if !cur.UsedBy(cluster) {
					return state.ErrNoChange // a cluster of that name made it again
				}
				return nil
			})
			continue
		}
		_, _ = b.Store.UpdateVolume(context.WithoutCancel(ctx), v.Name, func(v *state.Volume) error {
			if !v.UsedBy(cluster) {
				return state.ErrNoChange
			}
			v.Detach(cluster)
			return nil
		})
	}
}

// PinToVolumes forces the place of the task's volumes onto res, as a
// launch does, for the plans that `sky launch --dryrun` and optimize
// show; a volume a launch would refuse is the same error here.
func (b *Backend) PinToVolumes(ctx context.Context, t *api.TaskSpec, res *resources.Resources, u User) error {
	_, place, err := b.resolveVolumes(ctx, "", t, u)
	if err != nil || place == nil {
		return err
	}
	return forcePlace(res, place)
}
