package s3bucket

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/storage"
)

// storage names S3's default region without the SDK; it must be the
// region the server's SDK calls use.
func TestDefaultRegionAgrees(t *testing.T) {
	if storage.DefaultRegion != awsx.DefaultRegion {
		t.Errorf("storage.DefaultRegion %q, awsx.DefaultRegion %q", storage.DefaultRegion, awsx.DefaultRegion)
	}
}

func TestWalkSkipsSymlinks(t *testing.T) {
	d := t.TempDir()
	os.MkdirAll(filepath.Join(d, "sub"), 0o755)
	os.WriteFile(filepath.Join(d, "a"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(d, "sub", "b"), []byte("y"), 0o644)
	os.Symlink("a", filepath.Join(d, "link"))
	objs, err := Walk(d, "pre")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"pre/a", "pre/sub/b"}) {
		t.Errorf("keys %v", keys)
	}
	objs, _ = Walk(filepath.Join(d, "a"), "a")
	if len(objs) != 1 || objs[0].Key != "a" {
		t.Errorf("file walk %v", objs)
	}
}
