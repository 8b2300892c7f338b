package task

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSpecStorageMounts(t *testing.T) {
	src := t.TempDir()
	tk := mustLoad(t, `
file_mounts:
  /ckpt:
    name: my-ckpt
    source: `+src+`
    mode: mount_cached
    persistent: false
  /plain: s3://ext-bucket/sub/dir
  /whole:
    source: s3://ext-bucket
  /list:
    name: lst
    source: [`+filepath.Join(src, "a")+`, `+filepath.Join(src, "b")+`]
    mode: COPY
run: echo
`, LoadOptions{})
	s, err := Spec(tk)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.FileMounts) != 0 || len(s.Storage) != 4 {
		t.Fatalf("file mounts %v storage %+v", s.FileMounts, s.Storage)
	}
	// Sorted by destination: the upload tree indexes them in this order.
	ck, lst, plain, whole := s.Storage[0], s.Storage[1], s.Storage[2], s.Storage[3]
	if ck.Dst != "/ckpt" || ck.Name != "my-ckpt" || ck.Store != "S3" || ck.Mode != "MOUNT_CACHED" || ck.Persistent || ck.Source[0] != src {
		t.Errorf("bucket mount: %+v", ck)
	}
	if plain.Mode != "COPY" || plain.Name != "ext-bucket" || plain.SubPath != "sub/dir" || plain.URI != "s3://ext-bucket/sub/dir" || len(plain.Source) != 0 {
		t.Errorf("URI string source is a COPY of the bucket prefix: %+v", plain)
	}
	if whole.Mode != "MOUNT" || whole.Name != "ext-bucket" || whole.SubPath != "" {
		t.Errorf("URI source mapping: %+v", whole)
	}
	if !lst.SourceIsList || strings.Join(lst.SourceNames, ",") != "a,b" {
		t.Errorf("list source: %+v", lst)
	}
}

func TestSpecStorageRefusals(t *testing.T) {
	for yaml, want := range map[string]string{
		"file_mounts:\n  /d: gs://b\n":                               "GCS is not available in this build",
		"file_mounts:\n  /d:\n    name: b1\n    store: gcs\n":        "store GCS is not available in this build",
		"file_mounts:\n  /d:\n    name: Bad_Name\n":                  "invalid S3 bucket name",
		"file_mounts:\n  /d:\n    source: s3://b/sub\n":              "mounts a bucket's root",
		"file_mounts:\n  /d:\n    source: s3://bkt\n    store: s3\n": "",
	} {
		tk := mustLoad(t, yaml+"run: echo\n", LoadOptions{})
		_, err := Spec(tk)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", yaml, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", yaml, err, want)
		}
	}
}
