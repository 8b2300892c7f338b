package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/upload"
)

// TestHostileUploadCannotWriteOutsideItsTree is issue 26's first attack:
// bob (no admin) commits a manifest with a symlink entry to a directory of
// the server's machine and a file entry below it. The server must refuse
// it with a 400 saying why, and create nothing outside the upload store;
// nor may an upload's root be a link (the server would sync or upload
// whatever it names on its own disk).
func TestHostileUploadCannotWriteOutsideItsTree(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	bob := tm.clientAs("bob")
	ctx := context.Background()
	// A real upload first, so the blob of x.txt is in bob's store and
	// only the tree's shape can stop the commit.
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "x.txt"), []byte("written by bob\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(wd, "inner-link")); err != nil {
		t.Fatal(err)
	}
	spec := api.TaskSpec{NumNodes: 1, Workdir: wd}
	if _, err := bob.Upload(ctx, upload.Roots(spec, true)); err != nil {
		t.Fatal(err)
	}
	scan, err := upload.Scan(upload.Roots(spec, true), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var file api.UploadEntry
	for _, e := range scan.Manifest.Entries {
		if e.Path == "workdir/x.txt" {
			file = e
		}
	}
	at := func(p string) api.UploadEntry { e := file; e.Path = p; return e }
	for _, tc := range []struct {
		name    string
		entries func(target string) []api.UploadEntry
		says    string
	}{
		{"file below a symlink", func(target string) []api.UploadEntry {
			return []api.UploadEntry{
				{Path: "workdir", Type: api.EntryDir, Mode: 0o755},
				{Path: "workdir/l", Type: api.EntrySymlink, Mode: 0o777, Link: target},
				at("workdir/l/x.txt"),
			}
		}, `which is a symlink`},
		{"file below a relative symlink", func(target string) []api.UploadEntry {
			return []api.UploadEntry{
				{Path: "workdir/l", Type: api.EntrySymlink, Mode: 0o777, Link: strings.Repeat("../", 30) + strings.TrimPrefix(target, "/")},
				{Path: "workdir/l/sub", Type: api.EntryDir, Mode: 0o755},
				at("workdir/l/sub/x.txt"),
			}
		}, `which is a symlink`},
		{"root of a file mount is a symlink", func(target string) []api.UploadEntry {
			return []api.UploadEntry{
				{Path: "mounts/0", Type: api.EntrySymlink, Mode: 0o777, Link: target},
			}
		}, "must be a directory or a file, not a symlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := t.TempDir() // a directory of the server's machine
			m := api.UploadManifest{Entries: tc.entries(target)}
			for _, path := range []string{api.PathUpload, api.PathUploadCommit} {
				err := bob.Do(ctx, http.MethodPost, path, m, nil)
				var ae *client.APIError
				if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Detail, tc.says) {
					t.Errorf("POST %s: %v, want a 400 saying %q", path, err, tc.says)
				}
			}
			if ls, _ := os.ReadDir(target); len(ls) != 0 {
				t.Fatalf("bob's upload created %s in %s, outside the upload store\n%s", ls[0].Name(), target, tm.serverLogTail())
			}
		})
	}
	// The server still takes bob's ordinary upload (with its link).
	if _, err := bob.Upload(ctx, upload.Roots(spec, true)); err != nil {
		t.Errorf("bob's ordinary upload after the refusals: %v", err)
	}
}
