package infra

import (
	"context"
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// VolumeHost is implemented by infrastructures that hold volumes of some
// types (`sky volumes apply`) and mount them on their clusters' nodes. A
// volume's Cloud is the kind that holds it; Region and Zone are its place
// there, as the infrastructure defines them.
type VolumeHost interface {
	// VolumeTypes are the volume types it holds ("host-dir").
	VolumeTypes() []string
	// ApplyVolume checks the volume's place and makes its storage (or,
	// with useExisting, finds it); it may fill v's Zone and Config.
	ApplyVolume(ctx context.Context, v *state.Volume, useExisting bool) error
	// DeleteVolume removes the volume's storage and data (not a
	// use_existing volume's, which was never SkyGo's).
	DeleteVolume(ctx context.Context, v *state.Volume) error
	// CheckVolume refuses, before anything is provisioned, a cluster of
	// numNodes that cannot mount v.
	CheckVolume(v *state.Volume, numNodes int) error
	// AttachVolume makes m.Path on the cluster's nodes show the volume's
	// data. It returns the zone where the data lives, which the caller
	// records as the volume's zone when it had none: later clusters
	// mounting it are placed there (provision.ClusterSpec.Zone).
	AttachVolume(ctx context.Context, v *state.Volume, m api.VolumeMount, info *provision.ClusterInfo, runners []provision.CommandRunner) (zone string, err error)
	// DetachVolume undoes AttachVolume on the nodes; the data stays.
	DetachVolume(ctx context.Context, v *state.Volume, m api.VolumeMount, info *provision.ClusterInfo, runners []provision.CommandRunner) error
}

// VolumeProber is implemented by volume hosts that can tell cheaply
// whether a volume's storage is still there (`sky volumes ls -r`).
type VolumeProber interface {
	ProbeVolume(ctx context.Context, v *state.Volume) error
}

// VolumePodLister is implemented by volume hosts whose volumes other
// workloads than SkyGo's clusters may mount (a claim used by any pod of
// its namespace): the names of the live pods that mount v. `sky volumes
// ls -r` shows them and `sky volumes delete` refuses while there are any.
type VolumePodLister interface {
	VolumePods(ctx context.Context, v *state.Volume) ([]string, error)
}

// EphemeralVolumeHost is implemented by volume hosts that make volumes
// with a cluster and remove them with it (a task volume given a size,
// not a name: Kubernetes PVCs). The provisioner makes the storage from
// provision.ClusterSpec.Volumes and its Terminate removes it.
type EphemeralVolumeHost interface {
	VolumeHost
	// EphemeralVolume is the record (not yet stored) of the volume the
	// task asks for at m.Path on cluster: its name, type, size, config
	// and name on the cloud, with IsEphemeral set.
	EphemeralVolume(cluster string, m api.VolumeMount) (*state.Volume, error)
}

// EphemeralVolumeHostFor is the infrastructure that makes ephemeral
// volumes of typ, or an error saying none in this build does.
func (s *Set) EphemeralVolumeHostFor(typ string) (EphemeralVolumeHost, error) {
	for _, k := range s.VolumeKinds(typ) {
		if eh, ok := s.byKind[k].(EphemeralVolumeHost); ok {
			return eh, nil
		}
	}
	return nil, fmt.Errorf("no infrastructure of this build makes ephemeral volumes of type %s; ephemeral volumes (size:) are Kubernetes PVCs (type k8s-pvc)", typ)
}

// VolumeHostFor is the infrastructure that holds volumes of typ on kind,
// or an error naming where that type can live in this build.
func (s *Set) VolumeHostFor(kind, typ string) (VolumeHost, error) {
	if in, ok := s.byKind[strings.ToLower(kind)]; ok {
		if vh, ok := in.(VolumeHost); ok && hasType(vh, typ) {
			return vh, nil
		}
	}
	where := s.VolumeKinds(typ)
	switch {
	case len(where) > 0:
		return nil, fmt.Errorf("volume type %s cannot live on %s; it can on: %s", typ, kind, strings.Join(where, ", "))
	}
	return nil, fmt.Errorf("volume type %s is not available in this build; use type host-dir (infra local or ssh/<pool>) or k8s-pvc / k8s-hostpath (infra k8s)", typ)
}

// VolumeKinds are the kinds that hold volumes of typ, sorted.
func (s *Set) VolumeKinds(typ string) []string {
	var out []string
	for _, k := range s.kinds {
		if vh, ok := s.byKind[k].(VolumeHost); ok && hasType(vh, typ) {
			out = append(out, k)
		}
	}
	return out
}

func hasType(vh VolumeHost, typ string) bool {
	for _, t := range vh.VolumeTypes() {
		if t == typ {
			return true
		}
	}
	return false
}

// LinkVolumeCommand is the shell command that makes mountPath (absolute,
// or ~/... on the node) a symbolic link to dir, the volume's data
// directory (made if missing). An empty directory at mountPath is
// replaced; anything else there is an error, never overwritten.
func LinkVolumeCommand(dir, mountPath string) string {
	return "d=" + provision.QuoteHomePath(dir) + "; p=" + provision.QuoteHomePath(mountPath) + `
mkdir -p "$d" || exit 1
mkdir -p "$(dirname "$p")" || exit 1
if [ -L "$p" ]; then
  [ "$(readlink "$p")" = "$d" ] && exit 0
  echo "$p is a link to $(readlink "$p"), not to the volume ($d); remove it or mount the volume elsewhere" >&2; exit 3
elif [ -d "$p" ] && [ -z "$(ls -A "$p")" ]; then
  rmdir "$p" || exit 1
elif [ -e "$p" ]; then
  echo "$p already exists on the node and is not empty; mount the volume at another path" >&2; exit 3
fi
ln -s "$d" "$p"`
}

// UnlinkVolumeCommand removes the link LinkVolumeCommand made, and only
// that: the data directory stays.
func UnlinkVolumeCommand(dir, mountPath string) string {
	return "d=" + provision.QuoteHomePath(dir) + "; p=" + provision.QuoteHomePath(mountPath) + `
if [ -L "$p" ] && [ "$(readlink "$p")" = "$d" ]; then rm -f "$p"; fi; true`
}

// RunVolumeCommand runs cmd on one node and turns a failure into an error
// naming the volume and the node.
func RunVolumeCommand(ctx context.Context, r provision.CommandRunner, volume, cmd string) error {
	res, err := r.Run(ctx, cmd, provision.RunOptions{})
	if err != nil {
		return fmt.Errorf("volume %s on node %s: %w", volume, r.NodeIP(), err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = fmt.Sprintf("exit code %d", res.ExitCode)
		}
		return fmt.Errorf("volume %s on node %s: %s", volume, r.NodeIP(), msg)
	}
	return nil
}

// VolumeSubDir is dir, or its sub_path inside it.
func VolumeSubDir(dir string, m api.VolumeMount) string {
	if m.SubPath == "" {
		return dir
	}
	return strings.TrimRight(dir, "/") + "/" + strings.Trim(m.SubPath, "/")
}
