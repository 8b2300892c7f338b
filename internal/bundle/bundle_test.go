package bundle

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

// The build ID read here is the one `go tool buildid` prints, for the
// test binary itself (a Go ELF file like sky-server).
func TestGoBuildIDMatchesGoTool(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Skipf("go tool buildid: %v", err)
	}
	got, err := GoBuildID(exe)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("GoBuildID = %q, go tool buildid = %q", got, want)
	}
}

func TestParseManifest(t *testing.T) {
	for _, tc := range []struct {
		text    string
		want    []File
		wantErr string
	}{
		{"sky-server 12 abc id/x\n\nsky-node-linux-arm64 5 def\n", []File{
			{Name: "sky-server", Size: 12, SHA256: "abc", BuildID: "id/x"},
			{Name: "sky-node-linux-arm64", Size: 5, SHA256: "def"},
		}, ""},
		{"", nil, ""},
		{"sky-server 12\n", nil, "line 1: want NAME SIZE SHA256"},
		{"sky-server -1 abc\n", nil, "line 1: size"},
		{"../evil 1 abc\n", nil, "not a plain file name"},
	} {
		got, err := ParseManifest(tc.text)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseManifest(%q) error %v, want %q", tc.text, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseManifest(%q) = %v, %v; want %v", tc.text, got, err, tc.want)
		}
	}
}

// Matches takes the files beside sky only when they are the embedded
// build: same size and Go build ID (a Go binary) or SHA-256 (any other).
func TestMatches(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id, err := GoBuildID(exe)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sky-server"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	note := []byte("not a Go binary\n")
	sum := sha256.Sum256(note)
	if err := os.WriteFile(filepath.Join(dir, "notes"), note, 0o644); err != nil {
		t.Fatal(err)
	}
	server := File{Name: "sky-server", Size: st.Size(), BuildID: id}
	notes := File{Name: "notes", Size: int64(len(note)), SHA256: hex.EncodeToString(sum[:])}
	other := server
	other.BuildID = "another/build"
	grown := server
	grown.Size++
	changed := notes
	changed.SHA256 = strings.Repeat("0", 64)
	for _, tc := range []struct {
		name string
		man  []File
		want bool
	}{
		{"same build", []File{server, notes}, true},
		{"another build ID", []File{other, notes}, false},
		{"another size", []File{grown}, false},
		{"another hash", []File{server, changed}, false},
		{"a file missing", []File{server, {Name: "sky-node-linux-arm64", Size: 1}}, false},
		{"empty manifest", nil, false},
	} {
		if got := Matches(dir, tc.man); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Extract: concurrent extractors of the same content end with one
// complete directory of 0755 files and no temporary leftovers; a
// manifest that does not match the embedded bytes is refused.
func TestExtractConcurrent(t *testing.T) {
	fsys := fstest.MapFS{}
	var man []File
	for i, name := range []string{"sky-server", "sky-node-linux-amd64", "sky-node-linux-arm64"} {
		data := []byte(strings.Repeat(name, 1000*(i+1)))
		sum := sha256.Sum256(data)
		fsys["files/"+name+".gz"] = &fstest.MapFile{Data: gz(t, data)}
		man = append(man, File{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	parent := t.TempDir()
	dest := filepath.Join(parent, "runtime", "0123abcd")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := Extract(fsys, "files", man, dest)
			if err == nil && got != dest {
				err = fmt.Errorf("extracted to %s", got)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("extractor %d: %v", i, err)
		}
	}
	for _, f := range man {
		st, err := os.Stat(filepath.Join(dest, f.Name))
		if err != nil || st.Size() != f.Size || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v", f.Name, st, err)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(dest))
	if err != nil || len(entries) != 1 {
		t.Errorf("want only %s in %s, got %v (%v)", filepath.Base(dest), filepath.Dir(dest), entries, err)
	}

	bad := slices.Clone(man)
	bad[0].SHA256 = strings.Repeat("0", 64)
	if _, err := Extract(fsys, "files", bad, filepath.Join(parent, "runtime", "bad")); err == nil || !strings.Contains(err.Error(), "does not match its manifest") {
		t.Errorf("a manifest that does not match: %v", err)
	}
	if _, err := os.Stat(filepath.Join(parent, "runtime", "bad")); err == nil {
		t.Error("a refused extraction left its directory")
	}

	// An embedded file longer than its manifest says is cut one byte past
	// the size and refused, not written out whole; one that is not gzip
	// says so.
	short := slices.Clone(man)
	short[2].Size = 10
	if _, err := Extract(fsys, "files", short, filepath.Join(parent, "runtime", "short")); err == nil || !strings.Contains(err.Error(), "size 11, want 10") {
		t.Errorf("a file longer than its manifest: %v", err)
	}
	fsys["files/sky-server.gz"] = &fstest.MapFile{Data: []byte("plain bytes")}
	if _, err := Extract(fsys, "files", man, filepath.Join(parent, "runtime", "plain")); err == nil || !strings.Contains(err.Error(), "not gzip") {
		t.Errorf("a file that is not gzip: %v", err)
	}
}

// gz is data gzipped, as `make build` embeds each runtime file.
func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The lookup order: $SKYGO_RUNTIME_DIR, then the link-time directory;
// with neither and nothing embedded (a bare `go build ./cmd/sky`), an
// error that says how to build sky; with files embedded and no sibling
// build, the files are extracted into the user cache.
func TestLocate(t *testing.T) {
	empty := fstest.MapFS{"files/README.md": {Data: []byte("placeholder")}}
	if d, err := locate(empty, "/opt/rt", "/linked"); err != nil || d != "/opt/rt" {
		t.Errorf("env dir: %q, %v", d, err)
	}
	if d, err := locate(empty, "", "/linked"); err != nil || d != "/linked" {
		t.Errorf("linked dir: %q, %v", d, err)
	}
	if _, err := locate(empty, "", ""); err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), EnvDir) {
		t.Errorf("nothing embedded: %v", err)
	}

	data := []byte("#!/bin/sh\necho server\n")
	sum := sha256.Sum256(data)
	man := fmt.Sprintf("sky-server %d %s\n", len(data), hex.EncodeToString(sum[:]))
	embedded := fstest.MapFS{"files/MANIFEST": {Data: []byte(man)}, "files/sky-server.gz": {Data: gz(t, data)}}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	d, err := locate(embedded, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cache, _ := os.UserCacheDir()
	if !strings.HasPrefix(d, filepath.Join(cache, "skygo", "runtime")+"/") {
		t.Errorf("extracted to %s, want under %s", d, cache)
	}
	if got, err := os.ReadFile(filepath.Join(d, "sky-server")); err != nil || string(got) != string(data) {
		t.Errorf("extracted sky-server: %q, %v", got, err)
	}
	if again, err := locate(embedded, "", ""); err != nil || again != d {
		t.Errorf("second lookup: %q, %v; want the same directory %s", again, err, d)
	}
}
