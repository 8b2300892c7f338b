package upload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

func TestCheckTree(t *testing.T) {
	for _, tc := range []struct {
		name  string
		types map[string]string
		bad   string // a substring of the refusal; "" when the tree is fine
	}{
		{"plain tree", map[string]string{"workdir": "dir", "workdir/a": "dir", "workdir/a/b.txt": "file", "workdir/l": "symlink"}, ""},
		{"implied directories", map[string]string{"workdir/a/b/c.txt": "file", "mounts/0/x": "file"}, ""},
		{"a link beside a directory of a similar name", map[string]string{"workdir/l": "symlink", "workdir/l-2/x": "file", "workdir/l.d/x": "file"}, ""},
		{"file below a symlink", map[string]string{"workdir/l": "symlink", "workdir/l/x.txt": "file"}, `inside "workdir/l", which is a symlink`},
		{"directory below a symlink", map[string]string{"workdir/l": "symlink", "workdir/l/d": "dir"}, "which is a symlink"},
		{"symlink below a symlink", map[string]string{"workdir/l": "symlink", "workdir/l/m": "symlink"}, "which is a symlink"},
		{"deep below a symlink", map[string]string{"workdir/a/l": "symlink", "workdir/a/l/b/c/x": "file"}, `inside "workdir/a/l"`},
		{"below a file", map[string]string{"workdir/f": "file", "workdir/f/x": "file"}, "which is a file, not a directory"},
		{"below a file root", map[string]string{"mounts/0": "file", "mounts/0/x": "file"}, `inside "mounts/0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkTree(tc.types)
			switch {
			case tc.bad == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
				t.Errorf("err = %v, want one saying %q", err, tc.bad)
			}
		})
	}
}

func TestCheckEntryRefusesRootLinks(t *testing.T) {
	for _, tc := range []struct {
		e  api.UploadEntry
		ok bool
	}{
		{api.UploadEntry{Path: "workdir", Type: api.EntrySymlink, Link: "/"}, false},
		{api.UploadEntry{Path: "mounts/3", Type: api.EntrySymlink, Link: "/root/.sky"}, false},
		{api.UploadEntry{Path: "storage/0/1", Type: api.EntrySymlink, Link: "/etc"}, false},
		{api.UploadEntry{Path: "workdir/l", Type: api.EntrySymlink, Link: ""}, false},
		{api.UploadEntry{Path: "workdir/l", Type: api.EntrySymlink, Link: "a\x00b"}, false},
		{api.UploadEntry{Path: "workdir/l", Type: api.EntrySymlink, Link: "/etc"}, true},
		{api.UploadEntry{Path: "mounts/3/l", Type: api.EntrySymlink, Link: "../x"}, true},
		{api.UploadEntry{Path: "storage/0/1/l", Type: api.EntrySymlink, Link: "x"}, true},
		{api.UploadEntry{Path: "workdir", Type: api.EntryDir}, true},
	} {
		if err := checkEntry(tc.e); (err == nil) != tc.ok {
			t.Errorf("%s %s -> %q: err %v, want ok=%v", tc.e.Type, tc.e.Path, tc.e.Link, err, tc.ok)
		}
	}
}

// putBlob stores content as a blob of user and returns its hash.
func putBlob(t *testing.T, st *Store, user, content string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	sha := hex.EncodeToString(sum[:])
	if _, err := st.WriteChunk(user, sha, int64(len(content)), 0, 0o644, strings.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	return sha
}

// TestCommitNeverWritesThroughALink is the attack of issue 26: a symlink
// entry to a directory outside the store, then a file entry below it.
func TestCommitNeverWritesThroughALink(t *testing.T) {
	outside := t.TempDir()
	st := NewStore(t.TempDir(), 0)
	sha := putBlob(t, st, "bob", "pwned")
	file := api.UploadEntry{Type: api.EntryFile, SHA256: sha, Size: 5, Mode: 0o644}
	at := func(p string, e api.UploadEntry) api.UploadEntry { e.Path = p; return e }
	for _, tc := range []struct {
		name    string
		entries []api.UploadEntry
	}{
		{"file below a link", []api.UploadEntry{
			{Path: "workdir", Type: api.EntryDir, Mode: 0o755},
			{Path: "workdir/l", Type: api.EntrySymlink, Link: outside},
			at("workdir/l/x.txt", file)}},
		{"directory and file below a link", []api.UploadEntry{
			{Path: "workdir/l", Type: api.EntrySymlink, Link: outside},
			{Path: "workdir/l/sub", Type: api.EntryDir, Mode: 0o755},
			at("workdir/l/sub/x.txt", file)}},
		{"relative link out of the tree", []api.UploadEntry{
			{Path: "workdir/l", Type: api.EntrySymlink, Link: "../../../../../../../../../../" + strings.TrimPrefix(outside, "/")},
			at("workdir/l/x.txt", file)}},
		{"root link", []api.UploadEntry{
			{Path: "mounts/0", Type: api.EntrySymlink, Link: outside},
			at("mounts/0/x.txt", file)}},
		{"duplicate path, link then file", []api.UploadEntry{
			{Path: "workdir/x.txt", Type: api.EntrySymlink, Link: filepath.Join(outside, "x.txt")},
			at("workdir/x.txt", file)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.Commit("bob", api.UploadManifest{Entries: tc.entries})
			var ce *ClientError
			if !errors.As(err, &ce) || ce.Status != 400 {
				t.Errorf("commit: %v, want a 400", err)
			}
			if ls, _ := os.ReadDir(outside); len(ls) != 0 {
				t.Fatalf("the commit wrote %s outside the store", ls[0].Name())
			}
		})
	}
	// A link inside a workdir stays a link in the tree.
	res, err := st.Commit("bob", api.UploadManifest{Entries: []api.UploadEntry{
		{Path: "workdir", Type: api.EntryDir, Mode: 0o755},
		{Path: "workdir/l", Type: api.EntrySymlink, Link: outside},
		at("workdir/d/x.txt", file),
	}})
	if err != nil {
		t.Fatal(err)
	}
	tree, release, err := Open(st.Dir, "bob", res.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if l, err := os.Readlink(filepath.Join(tree, "workdir", "l")); err != nil || l != outside {
		t.Errorf("workdir/l -> %q %v, want a link to %s", l, err, outside)
	}
	if b, err := os.ReadFile(filepath.Join(tree, "workdir", "d", "x.txt")); err != nil || string(b) != "pwned" {
		t.Errorf("workdir/d/x.txt = %q %v", b, err)
	}
}

// TestTreeDirRefusesLinksOnDisk: even a link the manifest check did not
// see (one already on disk) is never followed by the build.
func TestTreeDirRefusesLinksOnDisk(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	td, err := openTreeDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer td.close()
	for _, p := range []string{"l/x", "l/a/b/x", "f/x", "../x", "a/../../x"} {
		if _, _, err := td.parent(p); err == nil {
			t.Errorf("resolved %s", p)
		}
	}
	if err := td.chmodDir("l", 0o777); err == nil {
		t.Error("chmod followed the link l")
	}
	if fi, _ := os.Stat(outside); fi.Mode().Perm() == 0o777 {
		t.Error("the link's target changed mode")
	}
	parent, name, err := td.parent("a/b/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := copyFileAt(filepath.Join(root, "f"), parent, name, 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, "a", "b", "x")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("a/b/x: %v %v", fi, err)
	}
	// An existing link as the final name is not written through either.
	parent, _, err = td.parent("l")
	if err != nil {
		t.Fatal(err)
	}
	if err := copyFileAt(filepath.Join(root, "f"), parent, "l", 0o644); err == nil {
		t.Error("copied over the link l")
	}
	if ls, _ := os.ReadDir(outside); len(ls) != 0 {
		t.Errorf("%s appeared outside the root", ls[0].Name())
	}
}
