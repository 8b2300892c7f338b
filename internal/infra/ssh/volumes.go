package ssh

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// A host-dir volume on an SSH node pool is a directory on one host of
// the pool, ~/.sky/volumes/<name_on_cloud> of the pool's user there. The
// volume's Region is the pool and its Zone the host (as named in the
// pool). The host is fixed at apply time when the infra names it
// (ssh/<pool>/<host>), else by the first cluster that mounts the volume
// (its head); from then on, clusters mounting the volume get that host as
// their head (ClusterSpec.Zone), so the data follows the cluster across
// `sky down` and relaunch.

// HostDir is SkyGo's host-directory volume type (task.HostDirType).
const HostDir = "host-dir"

var _ infra.VolumeHost = (*Infra)(nil)

func hostVolumeDir(nameOnCloud string) string { return "~/.sky/volumes/" + nameOnCloud }

// VolumeTypes implements infra.VolumeHost.
func (in *Infra) VolumeTypes() []string { return []string{HostDir} }

// hostRunner is a runner on one named host of pool.
func (in *Infra) hostRunner(pool, host string) (*Runner, error) {
	p, err := in.provisioner(infra.ID{Kind: Kind, Parts: []string{pool}})
	if err != nil {
		return nil, err
	}
	for _, h := range p.Pool.Hosts {
		if h.Name == host {
			ep, err := p.Resolver.Resolve(p.Pool, h)
			if err != nil {
				return nil, err
			}
			return NewRunner(in.Dialer(), ep, "", "", ""), nil
		}
	}
	return nil, fmt.Errorf("SSH node pool %s has no host %q (hosts: %s)", pool, host, hostNames(p.Pool))
}

func hostNames(p *Pool) string {
	s := ""
	for i, h := range p.Hosts {
		if i > 0 {
			s += ", "
		}
		s += h.Name
	}
	return s
}

// ApplyVolume implements infra.VolumeHost: the pool must exist; a named
// host must be one of its hosts, and gets the directory now.
func (in *Infra) ApplyVolume(ctx context.Context, v *state.Volume, useExisting bool) error {
	if v.Region == "" {
		return fmt.Errorf("name the SSH node pool: --infra ssh/<pool> (or ssh/<pool>/<host>)")
	}
	if _, err := in.provisioner(infra.ID{Kind: Kind, Parts: []string{v.Region}}); err != nil {
		return err
	}
	dir := hostVolumeDir(v.NameOnCloud)
	cfg := map[string]any{}
	_ = json.Unmarshal(v.Config, &cfg)
	cfg["host_path"] = dir
	v.Config, _ = json.Marshal(cfg)
	if v.Zone == "" {
		if useExisting {
			return fmt.Errorf("an existing volume directory is on one host: name it with --infra ssh/%s/<host>", v.Region)
		}
		return nil
	}
	r, err := in.hostRunner(v.Region, v.Zone)
	if err != nil {
		return err
	}
	cmd := "mkdir -p " + provision.QuoteHomePath(dir)
	if useExisting {
		cmd = "test -d " + provision.QuoteHomePath(dir) + " || { echo 'no existing volume directory " + dir + " on host " + v.Zone + "; drop --use-existing to create the volume' >&2; exit 1; }"
	}
	return infra.RunVolumeCommand(ctx, r, v.Name, cmd)
}

// DeleteVolume implements infra.VolumeHost: the directory goes from the
// volume's host (a volume never attached and with no host has none).
func (in *Infra) DeleteVolume(ctx context.Context, v *state.Volume) error {
	if v.Zone == "" {
		return nil
	}
	r, err := in.hostRunner(v.Region, v.Zone)
	if err != nil {
		return err
	}
	return infra.RunVolumeCommand(ctx, r, v.Name, "rm -rf "+provision.QuoteHomePath(hostVolumeDir(v.NameOnCloud)))
}

// CheckVolume implements infra.VolumeHost: the data is on one host, so
// only a one-node cluster (its head on that host) can mount it.
func (in *Infra) CheckVolume(v *state.Volume, numNodes int) error {
	if numNodes > 1 {
		return fmt.Errorf("volume %s is a directory on one host of SSH node pool %s, so a %d-node cluster cannot mount it on every node; use num_nodes: 1, or a volume per node", v.Name, v.Region, numNodes)
	}
	return nil
}

// AttachVolume implements infra.VolumeHost: the head is the host that
// holds the data (the provisioner placed it there), and its mount path
// becomes a link to the directory.
func (in *Infra) AttachVolume(ctx context.Context, v *state.Volume, m api.VolumeMount, info *provision.ClusterInfo, runners []provision.CommandRunner) (string, error) {
	if len(info.Nodes) == 0 || len(runners) == 0 {
		return "", fmt.Errorf("cluster %s has no nodes to mount volume %s on", info.Name, v.Name)
	}
	head := info.Nodes[0].ID
	if v.Zone != "" && head != v.Zone {
		return "", fmt.Errorf("volume %s lives on host %s of SSH node pool %s, but cluster %s's head is host %s; launch a new cluster to mount it", v.Name, v.Zone, v.Region, info.Name, head)
	}
	dir := infra.VolumeSubDir(hostVolumeDir(v.NameOnCloud), m)
	if err := infra.RunVolumeCommand(ctx, runners[0], v.Name, infra.LinkVolumeCommand(dir, m.Path)); err != nil {
		return "", err
	}
	return head, nil
}

// DetachVolume implements infra.VolumeHost.
func (in *Infra) DetachVolume(ctx context.Context, v *state.Volume, m api.VolumeMount, _ *provision.ClusterInfo, runners []provision.CommandRunner) error {
	if len(runners) == 0 {
		return nil
	}
	dir := infra.VolumeSubDir(hostVolumeDir(v.NameOnCloud), m)
	return infra.RunVolumeCommand(ctx, runners[0], v.Name, infra.UnlinkVolumeCommand(dir, m.Path))
}
