package upload

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIgnoreRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string // files kept, relative to the root
	}{
		{"gitignore basics", map[string]string{
			".gitignore": "# comment\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/*.md\n",
			"a.py":       "", "x.log": "", "keep.log": "", "sub/y.log": "", "build/out": "", "sub/build/o": "",
			"top.txt": "", "sub/top.txt": "", "docs/r.md": "", "docs/deep/r.md": "",
		}, []string{".gitignore", "a.py", "docs/deep/r.md", "keep.log", "sub/top.txt"}},
		{"skyignore wins over gitignore", map[string]string{
			".skyignore": "data\n", ".gitignore": "*.py\n", "a.py": "", "data/big": "", "sub/data": "",
		}, []string{".gitignore", ".skyignore", "a.py"}},
		{"nested gitignore is relative to its directory", map[string]string{
			"sub/.gitignore": "/only-here\n*.tmp\n", "only-here": "", "sub/only-here": "", "sub/deeper/only-here": "", "x.tmp": "", "sub/z/x.tmp": "",
		}, []string{"only-here", "sub/.gitignore", "sub/deeper/only-here", "x.tmp"}},
		{"double star and classes", map[string]string{
			".gitignore": "**/cache/**\nfile[0-9].txt\na/**/b\n", "cache/x": "", "p/cache/y": "", "file1.txt": "", "fileA.txt": "", "a/b": "", "a/q/r/b": "", "a/c": "",
		}, []string{".gitignore", "a/c", "fileA.txt"}},
		{"git info exclude", map[string]string{
			".git/info/exclude": "secret\n", "secret": "", "plain": "",
		}, []string{".git/info/exclude", "plain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tc.files)
			s, err := Scan([]Root{{Name: WorkdirRoot, Source: root}}, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range s.Manifest.Entries {
				if e.Type == api.EntryFile {
					got = append(got, strings.TrimPrefix(e.Path, WorkdirRoot+"/"))
				}
			}
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScanKeepsSymlinksModesAndFollowsRootLink(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	write(t, src, map[string]string{"run.sh": "#!/bin/sh\n", "d/f": "x"})
	if err := os.Chmod(filepath.Join(src, "run.sh"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d/f", filepath.Join(src, "ln")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(src, filepath.Join(dir, "via")); err != nil {
		t.Fatal(err)
	}
	s, err := Scan([]Root{{Name: WorkdirRoot, Source: filepath.Join(dir, "via")}, {Name: MountRoot(0), Source: filepath.Join(src, "d", "f")}}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]api.UploadEntry{}
	for _, e := range s.Manifest.Entries {
		byPath[e.Path] = e
	}
	if e := byPath["workdir/run.sh"]; e.Mode != 0o750 || e.Type != api.EntryFile {
		t.Errorf("run.sh: %+v, want a file of mode 750", e)
	}
	if e := byPath["workdir/ln"]; e.Type != api.EntrySymlink || e.Link != "d/f" {
		t.Errorf("ln: %+v, want a symlink to d/f", e)
	}
	if e := byPath["mounts/0"]; e.Type != api.EntryFile || e.Size != 1 {
		t.Errorf("single-file mount: %+v", e)
	}
	if s.Files != 3 {
		t.Errorf("files = %d, want 3 (run.sh, d/f, the mount)", s.Files)
	}
}

// TestHashCacheSkipsUnchangedFiles: a second scan reads only the file that
// changed, even when its size and mtime were kept.
func TestHashCacheSkipsUnchangedFiles(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{"a": "one", "b": "two", "c": "three"})
	cachePath := filepath.Join(t.TempDir(), "hashes.json")
	roots := []Root{{Name: WorkdirRoot, Source: root}}
	scan := func() *Scanned {
		t.Helper()
		c := OpenHashCache(cachePath)
		s, err := Scan(roots, 0, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Save(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := scan(); s.Hashed != 3 {
		t.Fatalf("first scan hashed %d files, want 3", s.Hashed)
	}
	if s := scan(); s.Hashed != 0 {
		t.Errorf("unchanged scan hashed %d files, want 0", s.Hashed)
	}
	p := filepath.Join(root, "b")
	fi, _ := os.Stat(p)
	if err := os.WriteFile(p, []byte("TWO"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil { // same size, same mtime
		t.Fatal(err)
	}
	s := scan()
	if s.Hashed != 1 {
		t.Errorf("after changing b (size and mtime kept) the scan hashed %d files, want 1", s.Hashed)
	}
	want, _ := HashFile(p)
	for _, e := range s.Manifest.Entries {
		if e.Path == "workdir/b" && e.SHA256 != want {
			t.Errorf("b's hash is the stale one")
		}
	}
}

func TestScanRefusesTooLargeNamingTheFile(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{"small": "x", "big.bin": strings.Repeat("y", 5000)})
	_, err := Scan([]Root{{Name: WorkdirRoot, Source: root}}, 1024, nil)
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("err = %v, want a TooLargeError", err)
	}
	msg := err.Error()
	for _, want := range []string{filepath.Join(root, "big.bin"), "4.9 KiB", "1.0 KiB", ".skyignore"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
}

// upload runs the protocol against a store as the client does, and
// returns how many blobs it had to send.
func upload(t *testing.T, st *Store, user string, s *Scanned) (api.UploadResult, int) {
	t.Helper()
	needs, _, err := st.Needs(user, s.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range needs.Missing {
		data, err := os.ReadFile(s.Local[b.SHA256])
		if err != nil {
			t.Fatal(err)
		}
		for off := b.Have; ; {
			end := min(off+st.ChunkBytes, b.Size)
			res, err := st.WriteChunk(user, b.SHA256, b.Size, off, b.Mode, bytes.NewReader(data[off:end]))
			if err != nil {
				t.Fatal(err)
			}
			if res.Complete {
				break
			}
			off = res.Have
		}
	}
	res, err := st.Commit(user, s.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return res, len(needs.Missing)
}

func TestStoreDedupsResumesAndBuildsTree(t *testing.T) {
	src := t.TempDir()
	write(t, src, map[string]string{"a": "alpha", "b": strings.Repeat("b", 100), "same1": "dup", "same2": "dup"})
	if err := os.Symlink("a", filepath.Join(src, "ln")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "a"), 0o700); err != nil {
		t.Fatal(err)
	}
	// One content, two modes: the tree needs a variant of the blob.
	if err := os.Chmod(filepath.Join(src, "same2"), 0o755); err != nil {
		t.Fatal(err)
	}
	st := NewStore(t.TempDir(), 0)
	st.ChunkBytes = 16 // b travels in 7 chunks
	scan := func() *Scanned {
		s, err := Scan([]Root{{Name: WorkdirRoot, Source: src}}, st.MaxBytes, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := scan()
	// A cut-off upload: half of b arrives, then the client goes away.
	var bSum string
	for sum, p := range s.Local {
		if filepath.Base(p) == "b" {
			bSum = sum
		}
	}
	if _, err := st.WriteChunk("alice", bSum, 100, 0, 0o644, strings.NewReader(strings.Repeat("b", 16))); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteChunk("alice", bSum, 100, 0, 0o644, strings.NewReader("bbbb")); err == nil {
		t.Fatal("a chunk at a stale offset was accepted")
	}
	needs, _, err := st.Needs("alice", s.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range needs.Missing {
		if b.SHA256 == bSum && b.Have != 16 {
			t.Errorf("resume point of b = %d, want 16", b.Have)
		}
	}
	res, sent := upload(t, st, "alice", s)
	if sent != 3 { // a, b, dup (two files, one blob)
		t.Errorf("first upload sent %d blobs, want 3", sent)
	}
	tree, release, err := Open(st.Dir, "alice", res.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	wd := filepath.Join(tree, WorkdirRoot)
	if b, _ := os.ReadFile(filepath.Join(wd, "same2")); string(b) != "dup" {
		t.Errorf("same2 = %q", b)
	}
	for name, mode := range map[string]os.FileMode{"a": 0o700, "same1": 0o644, "same2": 0o755} {
		if fi, err := os.Stat(filepath.Join(wd, name)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("mode of %s: %v %v, want %o", name, fi, err, mode)
		}
	}
	if l, err := os.Readlink(filepath.Join(wd, "ln")); err != nil || l != "a" {
		t.Errorf("ln -> %q %v", l, err)
	}
	// Unchanged: nothing to send, the same tree.
	res2, sent := upload(t, st, "alice", scan())
	if sent != 0 || res2.ID != res.ID {
		t.Errorf("unchanged upload: sent %d, id %s (was %s)", sent, res2.ID, res.ID)
	}
	// One changed file: one blob, a new tree.
	write(t, src, map[string]string{"a": "alpha2"})
	res3, sent := upload(t, st, "alice", scan())
	if sent != 1 || res3.ID == res.ID {
		t.Errorf("after changing one file: sent %d blobs (want 1), id changed: %v", sent, res3.ID != res.ID)
	}
	// Another user has none of alice's blobs and cannot open her tree.
	if needs, _, _ := st.Needs("bob", s.Manifest); len(needs.Missing) != 3 {
		t.Errorf("bob's store lacks %d blobs of alice's manifest, want all 3", len(needs.Missing))
	}
	if _, _, err := Open(st.Dir, "bob", res.ID); !errors.Is(err, ErrNoTree) {
		t.Errorf("bob opened alice's tree: %v", err)
	}
	if _, err := st.Commit("bob", s.Manifest); err == nil {
		t.Error("bob committed a manifest of blobs he never sent")
	}
}

func TestStoreRefusesBadManifestsAndTooLarge(t *testing.T) {
	st := NewStore(t.TempDir(), 1000)
	sha := strings.Repeat("a", 64)
	for _, m := range []api.UploadManifest{
		{Entries: []api.UploadEntry{{Path: "workdir/../../etc/passwd", Type: api.EntryFile, SHA256: sha}}},
		{Entries: []api.UploadEntry{{Path: "/abs", Type: api.EntryDir}}},
		{Entries: []api.UploadEntry{{Path: "elsewhere/x", Type: api.EntryDir}}},
		{Entries: []api.UploadEntry{{Path: "workdir/x", Type: "device"}}},
		{Entries: []api.UploadEntry{{Path: "workdir/x", Type: api.EntryFile, SHA256: "zz"}}},
	} {
		var ce *ClientError
		if _, _, err := st.Needs("u", m); !errors.As(err, &ce) || ce.Status != 400 {
			t.Errorf("manifest %+v: err %v, want a 400", m.Entries[0], err)
		}
	}
	big := api.UploadManifest{Entries: []api.UploadEntry{{Path: "workdir/huge", Type: api.EntryFile, Size: 5000, SHA256: sha}}}
	_, _, err := st.Needs("u", big)
	var ce *ClientError
	if !errors.As(err, &ce) || ce.Status != 413 || !strings.Contains(err.Error(), "workdir/huge") {
		t.Errorf("too large: %v", err)
	}
	if _, err := st.WriteChunk("u", sha, 4, 0, 0o644, strings.NewReader("abcd")); err == nil || !strings.Contains(err.Error(), "changed while it was being uploaded") {
		t.Errorf("a blob whose bytes do not match its hash: %v", err)
	}
}

func TestConcurrentCommitsAndGC(t *testing.T) {
	src := t.TempDir()
	write(t, src, map[string]string{"f": "content", "d/g": "more"})
	st := NewStore(t.TempDir(), 0)
	s, err := Scan([]Root{{Name: WorkdirRoot, Source: src}}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, _ := upload(t, st, "alice", s)
			ids[i] = res.ID
		}(i)
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent commits of the same files gave ids %v", ids)
		}
	}
	// A held tree survives a collection that takes everything old.
	_, release, err := Open(st.Dir, "alice", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * st.MaxAge)
	if _, err := st.GC(later); err != nil {
		t.Fatal(err)
	}
	if _, r2, err := Open(st.Dir, "alice", ids[0]); err != nil {
		t.Fatalf("GC removed a tree a request holds: %v", err)
	} else {
		r2()
	}
	release()
	n, err := st.GC(later)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("GC removed nothing once the tree was released")
	}
	if _, _, err := Open(st.Dir, "alice", ids[0]); !errors.Is(err, ErrNoTree) {
		t.Errorf("tree still there after GC: %v", err)
	}
	_ = filepath.WalkDir(st.Dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left after GC: %s", p)
		}
		return nil
	})
}
