package backend

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/storage"
	"github.com/skygo/skygo/internal/storage/s3bucket"
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

// awsConfig is the server's AWS configuration (aws.profile of the config)
// for region.
func (b *Backend) awsConfig(ctx context.Context, region string) (aws.Config, *config.Config, error) {
	cfg, err := config.Load(config.LoadOptions{Home: b.Home})
	if err != nil {
		return aws.Config{}, nil, err
	}
	ac, err := awsx.Load(ctx, awsx.Options{Home: b.Home, Profile: cfg.GetString("aws.profile", ""), Region: region})
	return ac, cfg, err
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
		region = awsx.DefaultRegion
	}
	cfg, _, err := b.awsConfig(ctx, region)
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

func (b *Backend) constructOne(ctx context.Context, cfg aws.Config, sm api.StorageMount, region, command string, log io.Writer) (mountPlan, error) {
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
	bkt := s3bucket.OpenS3(cfg, sm.Name, p.region)
	exists, bucketRegion, err := bkt.Exists(ctx)
	if err != nil {
		return p, err
	}
	if exists && bucketRegion != "" && bucketRegion != p.region {
		p.region = bucketRegion
		bkt = s3bucket.OpenS3(cfg, sm.Name, p.region)
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
		objs, err := s3bucket.Walk(src, prefix)
		if err != nil {
			return fail(state.StorageUploadFailed, fmt.Errorf("reading the upload of %s: %w", src, err))
		}
		if err := bkt.Upload(ctx, objs); err != nil {
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
	cfg, sc, err := b.awsConfig(ctx, plans[0].region)
	if err != nil {
		return err
	}
	rid, _ := sc.Get("aws.remote_identity")
	identity, err := awsx.RemoteIdentity(rid, c.Name)
	if err != nil {
		return err
	}
	if identity == awsx.IdentityLocal {
		if err := b.giveCredentials(ctx, cfg, runners); err != nil {
			return err
		}
	}
	var mounted []string
	for _, p := range plans {
		o := storage.NodeOptions{Region: p.region, Endpoint: awsx.EndpointURL(cfg)}
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

// giveCredentials writes awsx.NodeCredentialFiles to every node's ~/.aws
// with mode 0600, through stdin: never a command line or a log.
func (b *Backend) giveCredentials(ctx context.Context, cfg aws.Config, runners []provision.CommandRunner) error {
	files, err := awsx.NodeCredentialFiles(ctx, cfg)
	if err != nil {
		return err
	}
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
		cfg, _, err := b.awsConfig(ctx, s.Region)
		if err != nil {
			return err
		}
		if err := s3bucket.OpenS3(cfg, s.Name, s.Region).Delete(ctx); err != nil {
			return err
		}
		fmt.Fprintf(log, "Deleted S3 bucket %s.\n", s.Name)
	}
	_, err = b.Store.RemoveStorage(context.WithoutCancel(ctx), name)
	return err
}
