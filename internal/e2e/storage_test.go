package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/testutil/mototest"
)

func bucketKeys(t *testing.T, c *s3.Client, bucket string) []string {
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		return nil
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

func bucketExists(c *s3.Client, bucket string) bool {
	_, err := c.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	return err == nil
}

// fuseMountsUnder lists the mountpoints below dir.
func fuseMountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && strings.HasPrefix(fs[4], dir+"/") {
			out = append(out, fs[4])
		}
	}
	return out
}

// A local-infra task with a bucket in each mode: COPY and both mounts
// read a file uploaded from a local source (its .skyignore honoured), the
// mounts write one that S3 then holds, a plain s3:// source is copied
// down from an existing bucket that SkyGo does not manage; `sky storage
// ls` lists the buckets SkyGo made, `sky storage delete` removes them
// (and leaves the external one), and `sky down` leaves no mount behind.
func TestStorageBucketsOnLocalInfra(t *testing.T) {
	// Sequential: its nodes share this machine's network (SKYGO_LOCAL_NETNS=0), at the 127.0.0.x addresses another such test's nodes get too.
	if testing.Short() {
		t.Skip("launches a cluster")
	}
	for _, tool := range []string{"rclone", "fusermount3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install rclone fuse3)", tool)
		}
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("/dev/fuse is missing")
	}
	moto := mototest.Start(t, mototest.Options{})
	c := awsx.S3(moto.Config(t, ""), "")
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("e2e-external")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("e2e-external"), Key: aws.String("sub/ext.txt"),
		Body: strings.NewReader("from-external\n")}); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t)
	// Local nodes share the host's network here, so they reach moto on
	// loopback as the server does.
	e.env = append(append(e.env, moto.Env()...), "SKYGO_LOCAL_NETNS=0")
	if err := os.MkdirAll(filepath.Join(e.home, ".sky"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, ".sky", "config.yaml"), []byte("aws:\n  remote_identity: LOCAL_CREDENTIALS\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for name, body := range map[string]string{"data.txt": "from-local\n", "skip.log": "ignored\n", ".skyignore": "*.log\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yaml := fmt.Sprintf(`name: st
file_mounts:
  ~/copy:
    name: e2e-st-copy
    source: %[1]s
    mode: COPY
  ~/mnt:
    name: e2e-st-mount
    source: %[1]s
  ~/cached:
    name: e2e-st-cached
    source: %[1]s
    mode: MOUNT_CACHED
  ~/ext: s3://e2e-external/sub
run: |
  set -e
  for d in copy mnt cached; do cat ~/$d/data.txt; test ! -e ~/$d/skip.log; done
  cat ~/ext/ext.txt
  echo out-mount > ~/mnt/out.txt
  echo out-cached > ~/cached/out.txt
  sleep 3
`, src)
	taskFile := writeFile(t, "task.yaml", yaml)
	r := e.exec(5*time.Minute, nil, "launch", "-y", "-c", "st", taskFile)
	if r.code != 0 {
		t.Fatalf("%s\n%s", r, e.serverLogTail())
	}
	for _, want := range []string{"from-local", "from-external", "Job finished (status: SUCCEEDED)"} {
		if strings.Count(r.stdout, want) < 1 {
			t.Errorf("launch output lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "from-local"); n != 3 {
		t.Errorf("want data.txt read in 3 modes, read %d times:\n%s", n, r.stdout)
	}
	for _, b := range []string{"e2e-st-mount", "e2e-st-cached"} {
		if !waitFor(30*time.Second, func() bool { return slices.Contains(bucketKeys(t, c, b), "out.txt") }) {
			t.Errorf("bucket %s lacks the file the job wrote: %v", b, bucketKeys(t, c, b))
		}
	}
	if keys := bucketKeys(t, c, "e2e-st-copy"); !slices.Contains(keys, "data.txt") || slices.Contains(keys, "skip.log") {
		t.Errorf("bucket e2e-st-copy holds %v; want data.txt and not the .skyignore'd skip.log", keys)
	}

	var recs []struct {
		Name   string   `json:"name"`
		Store  []string `json:"store"`
		Status string   `json:"status"`
	}
	e.mustJSON(&recs, "storage", "ls", "-o", "json")
	var names []string
	for _, rec := range recs {
		names = append(names, rec.Name)
		if rec.Status != "READY" || !slices.Equal(rec.Store, []string{"S3"}) {
			t.Errorf("storage record %+v: want READY on S3", rec)
		}
	}
	if want := []string{"e2e-st-cached", "e2e-st-copy", "e2e-st-mount"}; !slices.Equal(names, want) {
		t.Errorf("sky storage ls: %v, want %v (the external bucket is not SkyGo's)", names, want)
	}
	table := e.must("storage", "ls").stdout
	if !strings.HasPrefix(table, "NAME") || !strings.Contains(table, "e2e-st-mount") || !strings.Contains(table, "READY") {
		t.Errorf("sky storage ls table:\n%s", table)
	}

	e.must("down", "-y", "st")
	if left := fuseMountsUnder(e.home); len(left) > 0 {
		t.Errorf("mounts left after sky down: %v", left)
	}

	// Without LOCAL_CREDENTIALS (SkyGo's default SERVICE_ACCOUNT) a local
	// node has no AWS identity: the mount fails saying what to configure.
	if err := os.WriteFile(filepath.Join(e.home, ".sky", "config.yaml"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nc := writeFile(t, "nocred.yaml", "file_mounts:\n  ~/m:\n    name: e2e-st-mount\nrun: ls ~/m\n")
	r = e.exec(3*time.Minute, nil, "launch", "-y", "-c", "nc", nc)
	if r.code == 0 || !strings.Contains(r.out(), "aws.remote_identity: LOCAL_CREDENTIALS") || strings.Contains(r.out(), "testing") {
		t.Errorf("a mount without credentials: want a failure naming aws.remote_identity (and no secret): %s", r)
	}
	e.must("down", "-y", "nc")
	if left := fuseMountsUnder(e.home); len(left) > 0 {
		t.Errorf("mounts left after the failed mount: %v", left)
	}

	r = e.must("storage", "delete", "-y", "e2e-st-*", "nope")
	if !strings.Contains(r.stdout, "Storage name 'nope' not found.") {
		t.Errorf("delete of an unknown name: %s", r)
	}
	for _, b := range []string{"e2e-st-copy", "e2e-st-mount", "e2e-st-cached"} {
		if bucketExists(c, b) {
			t.Errorf("bucket %s still exists after sky storage delete", b)
		}
	}
	if !bucketExists(c, "e2e-external") {
		t.Error("the external bucket was deleted")
	}
	if out := strings.TrimSpace(e.must("storage", "ls").stdout); out != "No existing storage." {
		t.Errorf("sky storage ls after delete: %q", out)
	}
	// persistent: false: the bucket a `sky launch --down` made goes with
	// its cluster's teardown.
	if err := os.WriteFile(filepath.Join(e.home, ".sky", "config.yaml"), []byte("aws:\n  remote_identity: LOCAL_CREDENTIALS\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eph := writeFile(t, "eph.yaml", fmt.Sprintf("file_mounts:\n  ~/e:\n    name: e2e-st-eph\n    source: %s\n    persistent: false\n    mode: COPY\nrun: cat ~/e/data.txt\n", src))
	e.must("launch", "-y", "--down", "-c", "eph", eph)
	if !waitFor(60*time.Second, func() bool { _, ok := e.status(true)["eph"]; return !ok && !bucketExists(c, "e2e-st-eph") }) {
		t.Errorf("the non-persistent bucket of a launch --down outlived its cluster: bucket exists %v, cluster %+v",
			bucketExists(c, "e2e-st-eph"), e.status(false)["eph"])
	}
	raw, _ := json.Marshal(names)
	t.Logf("buckets made and deleted: %s", raw)
}
