package backend

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/storage"
)

// StorageHandle is the handle JSON of a storage record: the stores of the
// storage and whether SkyGo made them.
type StorageHandle struct {
	StorageName string        `json:"storage_name"`
	Source      []string      `json:"source,omitempty"`
	Mode        string        `json:"mode"`
	Persistent  bool          `json:"persistent"`
	Stores      []StoreHandle `json:"stores"`
}

// StoreHandle is one store (bucket) of a storage.
type StoreHandle struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	Region     string `json:"region"`
	SkyManaged bool   `json:"sky_managed"`
}

// mountPlan is a task's bucket mount once the bucket is there.
type mountPlan struct {
	api.StorageMount
	region     string
	skyManaged bool
}

// objectStore is the object store buckets live in (S3), opened with the
// server's credentials (aws.profile of the config) for one region. Its
// implementation needs the AWS SDK, so it lives in a file a build can
// leave out (storage_s3.go, skygo_omit_aws).
type objectStore interface {
	// Bucket is one bucket in region.
	Bucket(name, region string) bucket
	// NodeOptions is what a node's mount or copy needs to reach region.
	NodeOptions(region string) storage.NodeOptions
	// NodeCredentials are the files that give a cluster's nodes the
	// server's credentials when remoteIdentity (aws.remote_identity)
	// asks for it, else none.
	NodeCredentials(ctx context.Context, remoteIdentity any, cluster string) (map[string][]byte, error)
}

// bucket is one bucket of an objectStore.
type bucket interface {
	// Exists reports whether the bucket is there and, if the store says,
	// the region it is in.
	Exists(ctx context.Context) (bool, string, error)
	Create(ctx context.Context) error
	// UploadTree uploads the files under src (an upload tree on this
	// machine) under prefix.
	UploadTree(ctx context.Context, src, prefix string) error
	// Delete removes the bucket with its objects.
	Delete(ctx context.Context) error
}

// constructStorage makes the task's buckets ready before the nodes see
// them: a bucket SkyGo creates is recorded (INIT, then READY, or
// INIT_FAILED / UPLOAD_FAILED) and local sources (the client's upload
// tree, filtered as the workdir is) are uploaded into it. cloud and
// region are the cluster's: new buckets go to its AWS region, else
// us-east-1.
func (b *Backend) constructStorage(ctx context.Context, t *api.TaskSpec, cloud, region, command string, log io.Writer) ([]mountPlan, error) {
	if len(t.Storage) == 0 {
		return nil, nil
	}
	if !strings.EqualFold(cloud, "aws") {
		region = storage.DefaultRegion
	}
	cfg, _, err := b.objectStore(ctx, region)
	if err != nil {
		return nil, err
	}
	var plans []mountPlan
	for _, sm := range t.Storage {
		p, err := b.constructOne(ctx, cfg, sm, region, command, log)
		if err != nil {
			return nil, fmt.Errorf("file_mounts %s: %w", sm.Dst, err)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

func (b *Backend) constructOne(ctx context.Context, cfg objectStore, sm api.StorageMount, region, command string, log io.Writer) (mountPlan, error) {
	p := mountPlan{StorageMount: sm, region: region}
	if err := storage.CheckStore(sm.Store); err != nil {
		return p, err
	}
	if err := storage.ValidateName(sm.Store, sm.Name); err != nil {
		return p, err
	}
	var rec *StorageHandle
	if row, err := b.Store.GetStorage(ctx, sm.Name); err == nil {
		var h StorageHandle
		if json.Unmarshal([]byte(row.Handle), &h) == nil {
			rec = &h
			for _, s := range h.Stores {
				if s.Type == storage.S3 {
					p.region, p.skyManaged = cmp.Or(s.Region, region), s.SkyManaged
				}
			}
		}
	} else if !errors.Is(err, state.ErrNotFound) {
		return p, err
	}
	bkt := cfg.Bucket(sm.Name, p.region)
	exists, bucketRegion, err := bkt.Exists(ctx)
	if err != nil {
		return p, err
	}
	if exists && bucketRegion != "" && bucketRegion != p.region {
		p.region = bucketRegion
		bkt = cfg.Bucket(sm.Name, p.region)
	}
	switch {
	case sm.URI != "":
		if !exists {
			return p, fmt.Errorf("the source bucket %s does not exist (or this AWS identity cannot see it); create it first or fix the URI", sm.URI)
		}
		return p, nil
	case !exists && sm.Mode == storage.Copy && len(sm.Source) == 0:
		return p, fmt.Errorf("source must be specified when using COPY mode (bucket %s does not exist yet)", sm.Name)
	}
	if !exists && rec != nil {
		// Recorded, but gone: whatever removed it, this launch makes it anew.
		p.skyManaged = false
	}
	if !exists {
		p.skyManaged = true
	}
	if p.skyManaged {
		h := StorageHandle{StorageName: sm.Name, Source: sm.Source, Mode: sm.Mode, Persistent: sm.Persistent,
			Stores: []StoreHandle{{Type: storage.S3, Name: sm.Name, Region: p.region, SkyManaged: true}}}
		raw, _ := json.Marshal(h)
		if err := b.Store.PutStorage(ctx, state.Storage{Name: sm.Name, Handle: string(raw), LastUse: command}); err != nil {
			return p, err
		}
	}
	fail := func(status string, err error) (mountPlan, error) {
		if p.skyManaged {
			_, _ = b.Store.SetStorageStatus(context.WithoutCancel(ctx), sm.Name, []string{state.StorageInit}, status)
		}
		return p, err
	}
	if !exists {
		fmt.Fprintf(log, "  Created S3 bucket %s in %s.\n", sm.Name, p.region)
		if err := bkt.Create(ctx); err != nil {
			return fail(state.StorageInitFailed, err)
		}
	}
	for j, src := range sm.Source {
		prefix := ""
		if sm.SourceIsList && j < len(sm.SourceNames) {
			prefix = sm.SourceNames[j]
		}
		if err := bkt.UploadTree(ctx, src, prefix); err != nil {
			return fail(state.StorageUploadFailed, err)
		}
	}
	if len(sm.Source) > 0 {
		fmt.Fprintf(log, "  Uploaded %d source%s to s3://%s.\n", len(sm.Source), plural(len(sm.Source)), sm.Name)
	}
	if p.skyManaged {
		if _, err := b.Store.SetStorageStatus(ctx, sm.Name, []string{state.StorageInit}, state.StorageReady); err != nil {
			return p, err
		}
	}
	return p, nil
}

// attachStorage runs each bucket mount on every node, after the file
// sync: COPY copies the bucket with rclone, MOUNT and MOUNT_CACHED mount
// it with rclone. The nodes get the user's AWS
// credentials only when aws.remote_identity is LOCAL_CREDENTIALS.
func (b *Backend) attachStorage(ctx context.Context, c *state.Cluster, h *Handle, runners []provision.CommandRunner, plans []mountPlan, down bool, log io.Writer) error {
	if len(plans) == 0 {
		return nil
	}
	cfg, sc, err := b.objectStore(ctx, plans[0].region)
	if err != nil {
		return err
	}
	rid, _ := sc.Get("aws.remote_identity")
	files, err := cfg.NodeCredentials(ctx, rid, c.Name)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		if err := b.giveCredentials(ctx, files, runners); err != nil {
			return err
		}
	}
	var mounted []string
	for _, p := range plans {
		o := cfg.NodeOptions(p.region)
		src := storage.URI(storage.S3, p.Name, p.SubPath)
		var cmd string
		if p.Mode == storage.Copy {
			fmt.Fprintf(log, "  Syncing %s: %s -> %s\n", toNodes(len(runners)), src, p.Dst)
		} else {
			fmt.Fprintf(log, "  Mounting %s (%s) %s: %s -> %s\n", p.Name, p.Mode, toNodes(len(runners)), src, p.Dst)
			if cmd, err = storage.MountScript(p.StorageMount, o); err != nil {
				return fmt.Errorf("file_mounts %s: %w", p.Dst, err)
			}
			mounted = append(mounted, p.Dst)
		}
		err := parallel(len(runners), func(i int) error {
			c := cmd
			if p.Mode == storage.Copy {
				c = storage.CopyCommand(p.StorageMount, o)
			}
			res, err := runners[i].Run(ctx, c, provision.RunOptions{})
			if err == nil && res.ExitCode != 0 {
				what := "mount"
				if p.Mode == storage.Copy {
					what = "copy"
				}
				err = fmt.Errorf("%s of %s to %s failed on node %s (exit code %d): %s", what, src, p.Dst, runners[i].NodeIP(), res.ExitCode,
					lastLines(strings.TrimSpace(string(res.Stderr)+"\n"+string(res.Stdout)), 25))
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	var drop []string
	for _, p := range plans {
		if !p.Persistent && p.skyManaged && down {
			drop = append(drop, p.Name)
		}
	}
	return b.update(ctx, c, h, func(_ *state.Cluster, h *Handle) (string, error) {
		h.StorageMounts = mergeUnique(h.StorageMounts, mounted)
		h.DeleteBuckets = mergeUnique(h.DeleteBuckets, drop)
		return "", nil
	})
}

// lastLines is the end of a tool's output: rclone prints its whole usage
// on a bad flag, and the error only needs the reason.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func mergeUnique(a, b []string) []string {
	for _, x := range b {
		found := false
		for _, y := range a {
			found = found || x == y
		}
		if !found {
			a = append(a, x)
		}
	}
	return a
}

// giveCredentials writes the object store's node credential files to
// every node with mode 0600, through stdin: never a command line or a log.
func (b *Backend) giveCredentials(ctx context.Context, files map[string][]byte, runners []provision.CommandRunner) error {
	return parallel(len(runners), func(i int) error {
		if err := provision.WriteSecretFiles(ctx, runners[i], files); err != nil {
			return fmt.Errorf("node %s: giving it the AWS credentials (aws.remote_identity: LOCAL_CREDENTIALS): %w", runners[i].NodeIP(), err)
		}
		return nil
	})
}

// unmountStorage lazily unmounts the cluster's bucket mounts on its
// nodes before they stop or go; a node that cannot be reached is left
// as it is (its mounts go with it).
func (b *Backend) unmountStorage(ctx context.Context, h *Handle) {
	if h == nil || len(h.StorageMounts) == 0 || h.Info == nil {
		return
	}
	runners, err := b.runners(h)
	if err != nil {
		return
	}
	script := storage.UnmountScript(h.StorageMounts)
	_ = parallel(len(runners), func(i int) error {
		_, err := runners[i].Run(ctx, script, provision.RunOptions{})
		return err
	})
}

// deleteBuckets removes the non-persistent buckets a `sky launch --down`
// created, once its cluster is torn down.
func (b *Backend) deleteBuckets(ctx context.Context, h *Handle, log io.Writer) {
	if h == nil {
		return
	}
	for _, name := range h.DeleteBuckets {
		if err := b.DeleteStorage(ctx, name, log); err != nil {
			fmt.Fprintf(log, "Warning: deleting the non-persistent bucket %s: %v\n", name, err)
		}
	}
}

// ListStorage is the storage records as `sky storage ls` shows them.
func (b *Backend) ListStorage(ctx context.Context) ([]api.StorageRecord, error) {
	rows, err := b.Store.ListStorage(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.StorageRecord{}
	for _, r := range rows {
		rec := api.StorageRecord{Name: r.Name, LaunchedAt: r.LaunchedAt, LastUse: r.LastUse, Status: r.Status, Store: []string{}}
		var h StorageHandle
		if json.Unmarshal([]byte(r.Handle), &h) == nil {
			for _, s := range h.Stores {
				rec.Store = append(rec.Store, s.Type)
			}
		}
		out = append(out, rec)
	}
	return out, nil
}

// ErrStorageNotFound is DeleteStorage's error for an unknown name.
var ErrStorageNotFound = errors.New("storage not found")

// DeleteStorage deletes each sky-managed bucket of a storage with its
// objects, then the record; a bucket SkyGo did not create is only
// forgotten.
func (b *Backend) DeleteStorage(ctx context.Context, name string, log io.Writer) error {
	row, err := b.Store.GetStorage(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("storage %q: %w", name, ErrStorageNotFound)
	}
	if err != nil {
		return err
	}
	var h StorageHandle
	if err := json.Unmarshal([]byte(row.Handle), &h); err != nil {
		return fmt.Errorf("storage %s: unreadable record: %w", name, err)
	}
	for _, s := range h.Stores {
		if !s.SkyManaged {
			continue
		}
		if err := storage.CheckStore(s.Type); err != nil {
			return err
		}
		cfg, _, err := b.objectStore(ctx, s.Region)
		if err != nil {
			return err
		}
		if err := cfg.Bucket(s.Name, s.Region).Delete(ctx); err != nil {
			return err
		}
		fmt.Fprintf(log, "Deleted S3 bucket %s.\n", s.Name)
	}
	_, err = b.Store.RemoveStorage(context.WithoutCancel(ctx), name)
	return err
}
