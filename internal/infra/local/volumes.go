package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// HostDir is SkyGo's host-directory volume type (task.HostDirType).
const HostDir = "host-dir"

var (
	_ infra.VolumeHost   = (*Infra)(nil)
	_ infra.VolumeProber = (*Infra)(nil)
)

// VolumeDir is where a local host-dir volume keeps its data: under the
// server user's ~/.sky/volumes, outside every node directory, so that it
// outlives the clusters that mount it.
func VolumeDir(home, nameOnCloud string) string {
	return filepath.Join(home, ".sky", "volumes", nameOnCloud)
}

// VolumeTypes implements infra.VolumeHost.
func (in *Infra) VolumeTypes() []string { return []string{HostDir} }

// ApplyVolume implements infra.VolumeHost: the data directory is made
// now (or, with useExisting, must already be there).
func (in *Infra) ApplyVolume(_ context.Context, v *state.Volume, useExisting bool) error {
	if v.Region != "" || v.Zone != "" {
		return errors.New("the local infrastructure has no regions or zones; use --infra local")
	}
	dir := VolumeDir(in.env.Home, v.NameOnCloud)
	if useExisting {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("no existing volume directory %s: drop --use-existing to create the volume", dir)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the volume directory: %w", err)
	}
	cfg := map[string]any{}
	_ = json.Unmarshal(v.Config, &cfg)
	cfg["host_path"] = dir
	v.Config, _ = json.Marshal(cfg)
	return nil
}

// DeleteVolume implements infra.VolumeHost.
func (in *Infra) DeleteVolume(_ context.Context, v *state.Volume) error {
	if err := os.RemoveAll(VolumeDir(in.env.Home, v.NameOnCloud)); err != nil {
		return fmt.Errorf("removing the volume's data: %w", err)
	}
	return nil
}

// ProbeVolume implements infra.VolumeProber.
func (in *Infra) ProbeVolume(_ context.Context, v *state.Volume) error {
	dir := VolumeDir(in.env.Home, v.NameOnCloud)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("directory gone: %s", dir)
	} else if err != nil {
		return err
	}
	return nil
}

// CheckVolume implements infra.VolumeHost: every local node is on this
// machine, so any number of them can share the directory.
func (in *Infra) CheckVolume(*state.Volume, int) error { return nil }

// AttachVolume implements infra.VolumeHost: the mount path on every node
// becomes a link to the data directory. A node's ~ is its node
// directory; an absolute mount path is that path on this machine.
func (in *Infra) AttachVolume(ctx context.Context, v *state.Volume, m api.VolumeMount, info *provision.ClusterInfo, runners []provision.CommandRunner) (string, error) {
	root := VolumeDir(in.env.Home, v.NameOnCloud)
	// The jobs' sandbox hides ~/.sky, where the data is, except what
	// this list binds back in (proc.SandboxVolumesFile).
	if err := in.editVolumeBinds(info.Name, func(dirs []string) []string {
		if !slices.Contains(dirs, root) {
			dirs = append(dirs, root)
		}
		return dirs
	}); err != nil {
		return "", fmt.Errorf("letting the cluster's jobs see the volume: %w", err)
	}
	dir := infra.VolumeSubDir(root, m)
	for _, r := range runners {
		if err := infra.RunVolumeCommand(ctx, r, v.Name, infra.LinkVolumeCommand(dir, m.Path)); err != nil {
			return "", err
		}
	}
	return "", nil
}

// editVolumeBinds rewrites the cluster's list of volume directories
// (written whole, then renamed: a job starting meanwhile reads the old
// list or the new one).
func (in *Infra) editVolumeBinds(cluster string, edit func([]string) []string) error {
	file := proc.SandboxVolumesFile(in.P.ClusterDir(cluster))
	var dirs []string
	if b, err := os.ReadFile(file); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				dirs = append(dirs, l)
			}
		}
	}
	dirs = edit(dirs)
	if len(dirs) == 0 {
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(dirs, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// DetachVolume implements infra.VolumeHost.
func (in *Infra) DetachVolume(ctx context.Context, v *state.Volume, m api.VolumeMount, info *provision.ClusterInfo, runners []provision.CommandRunner) error {
	root := VolumeDir(in.env.Home, v.NameOnCloud)
	dir := infra.VolumeSubDir(root, m)
	var errs []error
	for _, r := range runners {
		errs = append(errs, infra.RunVolumeCommand(ctx, r, v.Name, infra.UnlinkVolumeCommand(dir, m.Path)))
	}
	errs = append(errs, in.editVolumeBinds(info.Name, func(dirs []string) []string {
		return slices.DeleteFunc(dirs, func(d string) bool { return d == root })
	}))
	return errors.Join(errs...)
}
