package upload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/skygo/skygo/internal/api"
)

// WorkdirRoot is the workdir's root in a tree; file mounts are under
// MountRoot(i), i indexing the sorted destinations.
const WorkdirRoot = "workdir"

// MountRoot is the root of the i-th local file mount (in sorted
// destination order).
func MountRoot(i int) string { return "mounts/" + strconv.Itoa(i) }

// StorageRoot is the root of the j-th local source of the i-th bucket
// mount (TaskSpec.Storage order): the server uploads it into the bucket.
func StorageRoot(i, j int) string { return "storage/" + strconv.Itoa(i) + "/" + strconv.Itoa(j) }

// Root is one local source and where it goes in the tree.
type Root struct {
	Name   string // WorkdirRoot or MountRoot(i)
	Source string // the client's absolute path
}

// Roots lists the local sources of a task: its workdir and, with mounts,
// the sources of its file_mounts. Client and server derive the same names
// from the same spec, so the spec needs no other mapping.
func Roots(t api.TaskSpec, mounts bool) []Root {
	var out []Root
	if t.Workdir != "" {
		out = append(out, Root{Name: WorkdirRoot, Source: t.Workdir})
	}
	if mounts {
		for i, dst := range MountOrder(t.FileMounts) {
			out = append(out, Root{Name: MountRoot(i), Source: t.FileMounts[dst]})
		}
		for i, sm := range t.Storage {
			for j, src := range sm.Source {
				out = append(out, Root{Name: StorageRoot(i, j), Source: src})
			}
		}
	}
	return out
}

// Rebase points a task's workdir and (with mounts) its file-mount
// sources at their copies in the tree at dir, laid out as Roots names
// them. It returns each copy's path mapped to the client's path it
// replaced.
func Rebase(t *api.TaskSpec, dir string, mounts bool) map[string]string {
	shown := map[string]string{}
	local := func(root, client string) string {
		p := filepath.Join(dir, filepath.FromSlash(path.Clean(root)))
		shown[p] = client
		return p
	}
	if t.Workdir != "" {
		t.Workdir = local(WorkdirRoot, t.Workdir)
	}
	if mounts && len(t.FileMounts) > 0 {
		fm := make(map[string]string, len(t.FileMounts))
		for i, dst := range MountOrder(t.FileMounts) {
			fm[dst] = local(MountRoot(i), t.FileMounts[dst])
		}
		t.FileMounts = fm
	}
	if mounts && len(t.Storage) > 0 {
		st := make([]api.StorageMount, len(t.Storage))
		for i, sm := range t.Storage {
			src := make([]string, len(sm.Source))
			for j, s := range sm.Source {
				src[j] = local(StorageRoot(i, j), s)
			}
			sm.Source = src
			st[i] = sm
		}
		t.Storage = st
	}
	return shown
}

// MountOrder is the order of file-mount destinations that MountRoot
// indexes.
func MountOrder(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EnvLimit is the server's setting of the upload limit.
const EnvLimit = "SKYGO_UPLOAD_LIMIT"

// TooLargeError says that the files to upload exceed the server's limit,
// naming the biggest file so the user knows what to leave out.
type TooLargeError struct {
	Total, Limit int64
	Largest      string // the client's path of the largest file
	LargestSize  int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the workdir and file mounts to upload to the API server total %s, more than its limit of %s; the largest file is %s (%s): "+
		"add it to .skyignore (or .gitignore) in its directory, put large data in a bucket and mount it from there (file_mounts: {/data: s3://...}), "+
		"or raise the server's limit (%s=8GiB where `sky api start` runs)",
		HumanBytes(e.Total), HumanBytes(e.Limit), e.Largest, HumanBytes(e.LargestSize), EnvLimit)
}

// HumanBytes is 1.5 GiB, 12 KiB, 7 B.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Scanned is a manifest with where each file's bytes are on this machine.
type Scanned struct {
	Manifest api.UploadManifest
	// Local maps a file entry's sha256 to a local path holding it.
	Local map[string]string
	Files int
	Bytes int64
	// Hashed counts the files read to hash them (the others the cache
	// knew).
	Hashed int
}

// Scan walks the roots (ignore rules applied, symlinks kept as links),
// refuses more than limit bytes (0: no limit) before reading any file,
// then hashes the files the cache (may be nil) does not know, in parallel.
func Scan(roots []Root, limit int64, cache *HashCache) (*Scanned, error) {
	s := &Scanned{Local: map[string]string{}}
	var local []string // parallel to the file entries
	var infos []fs.FileInfo
	var fileIdx []int
	var largest string
	var largestSize int64
	add := func(e api.UploadEntry, src string, fi fs.FileInfo) {
		if e.Type == api.EntryFile {
			fileIdx = append(fileIdx, len(s.Manifest.Entries))
			local = append(local, src)
			infos = append(infos, fi)
			s.Files++
			s.Bytes += e.Size
			if e.Size > largestSize || largest == "" {
				largest, largestSize = src, e.Size
			}
		}
		s.Manifest.Entries = append(s.Manifest.Entries, e)
	}
	for _, r := range roots {
		if err := walkRoot(r, add); err != nil {
			return nil, err
		}
	}
	if limit > 0 && s.Bytes > limit {
		return nil, &TooLargeError{Total: s.Bytes, Limit: limit, Largest: largest, LargestSize: largestSize}
	}
	sums := make([]string, len(local))
	var todo []int
	for i, p := range local {
		if sum, ok := cache.lookup(p, infos[i]); ok {
			sums[i] = sum
		} else {
			todo = append(todo, i)
		}
	}
	s.Hashed = len(todo)
	if err := hashAll(local, sums, todo); err != nil {
		return nil, err
	}
	for _, i := range todo {
		cache.store(local[i], infos[i], sums[i])
	}
	for i, idx := range fileIdx {
		s.Manifest.Entries[idx].SHA256 = sums[i]
		s.Local[sums[i]] = local[i]
	}
	return s, nil
}

// walkRoot adds the entries of one root. The root itself may be a
// symlink (to a directory or file); links below it are kept as links.
func walkRoot(r Root, add func(api.UploadEntry, string, fs.FileInfo)) error {
	src, err := filepath.EvalSymlinks(r.Source)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Source, err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Source, err)
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is neither a regular file nor a directory; only those can be uploaded", r.Source)
		}
		add(fileEntry(r.Name, fi), r.Source, fi)
		return nil
	}
	ig, err := NewIgnore(src)
	if err != nil {
		return fmt.Errorf("reading ignore rules of %s: %w", r.Source, err)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		name := r.Name
		if rel != "." {
			name += "/" + rel
			if ig.Match(rel, d.IsDir()) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		} else {
			rel = ""
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		switch {
		case d.IsDir():
			add(api.UploadEntry{Path: name, Type: api.EntryDir, Mode: uint32(info.Mode().Perm())}, p, info)
			return ig.enterDir(rel)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			add(api.UploadEntry{Path: name, Type: api.EntrySymlink, Mode: 0o777, Link: link}, p, info)
		case info.Mode().IsRegular():
			add(fileEntry(name, info), p, info)
		}
		// Sockets, devices and pipes are not files to ship; rsync -a
		// without --devices/--specials skips them too.
		return nil
	})
}

func fileEntry(name string, fi fs.FileInfo) api.UploadEntry {
	return api.UploadEntry{Path: name, Type: api.EntryFile, Mode: uint32(fi.Mode().Perm()), Size: fi.Size()}
}

// hashAll fills sums[i] with the hex SHA-256 of files[i] for each i of
// todo, on all CPUs.
func hashAll(files, sums []string, todo []int) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sum, err := HashFile(files[i])
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				sums[i] = sum
			}
		}()
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// HashFile is the hex SHA-256 of a file's content.
func HashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Blobs lists the distinct file blobs of a manifest, sorted by hash,
// with the mode of the first file of each (see Store.WriteChunk).
func Blobs(m api.UploadManifest) []api.UploadBlob {
	seen := map[string]bool{}
	var out []api.UploadBlob
	for _, e := range m.Entries {
		if e.Type == api.EntryFile && !seen[e.SHA256] {
			seen[e.SHA256] = true
			out = append(out, api.UploadBlob{SHA256: e.SHA256, Size: e.Size, Mode: e.Mode})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SHA256 < out[j].SHA256 })
	return out
}

// TreeID is the id of the tree a manifest describes: a hash of every
// entry's path, type, mode, size, content and link, so the same files give
// the same tree (and a re-launch of unchanged files reuses it).
func TreeID(m api.UploadManifest) string {
	es := append([]api.UploadEntry(nil), m.Entries...)
	sort.Slice(es, func(i, j int) bool { return es[i].Path < es[j].Path })
	h := sha256.New()
	for _, e := range es {
		fmt.Fprintf(h, "%s\x00%s\x00%o\x00%d\x00%s\x00%s\n", e.Path, e.Type, e.Mode, e.Size, e.SHA256, e.Link)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// checkEntry refuses a path that could leave its tree, or an entry that
// is not one of the three types.
func checkEntry(e api.UploadEntry) error {
	p := e.Path
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || strings.Contains(p, "\x00") {
		return fmt.Errorf("manifest path %q: want a relative slash path", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("manifest path %q: empty, . or .. component", p)
		}
	}
	root, rest, _ := strings.Cut(p, "/")
	switch root {
	case "mounts":
		n, _, _ := strings.Cut(rest, "/")
		if _, err := strconv.Atoi(n); err != nil || rest == "" {
			return fmt.Errorf("manifest path %q: mounts/<index> expected", p)
		}
	case "storage":
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) < 2 {
			return fmt.Errorf("manifest path %q: storage/<index>/<index> expected", p)
		}
		for _, n := range parts[:2] {
			if _, err := strconv.Atoi(n); err != nil {
				return fmt.Errorf("manifest path %q: storage/<index>/<index> expected", p)
			}
		}
	case WorkdirRoot:
	default:
		return fmt.Errorf("manifest path %q: must be under %s/, mounts/<index>/ or storage/<index>/<index>/", p, WorkdirRoot)
	}
	switch e.Type {
	case api.EntryFile:
		if len(e.SHA256) != 64 || !isHex(e.SHA256) || e.Size < 0 {
			return fmt.Errorf("manifest file %q: needs a size and a 64-digit hex sha256", p)
		}
	case api.EntryDir:
	case api.EntrySymlink:
		// A root that is a link would have the server read (and sync to
		// the node, or upload to a bucket) whatever it points at on the
		// server's disk; a client resolves a root link before it scans.
		if isRoot(p) {
			return fmt.Errorf("manifest entry %q: the root of a workdir or file mount must be a directory or a file, not a symlink", p)
		}
		if e.Link == "" || strings.Contains(e.Link, "\x00") {
			return fmt.Errorf("manifest symlink %q: needs a target without NUL bytes", p)
		}
	default:
		return fmt.Errorf("manifest entry %q: unknown type %q", p, e.Type)
	}
	return nil
}

// isRoot says whether a checked manifest path names the root of one
// local source (workdir, mounts/<i>, storage/<i>/<j>).
func isRoot(p string) bool {
	switch n := strings.Count(p, "/"); {
	case strings.HasPrefix(p, "mounts/"):
		return n == 1
	case strings.HasPrefix(p, "storage/"):
		return n == 2
	default:
		return p == WorkdirRoot
	}
}

// checkTree refuses a manifest whose entries do not form a tree the
// server can build without following a link: an entry below a symlink
// (the server would write through the link, anywhere on its disk) or
// below a file. types maps every entry's path to its type.
func checkTree(types map[string]string) error {
	for p := range types {
		for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
			switch t := types[p[:i]]; t {
			case "", api.EntryDir:
			case api.EntrySymlink:
				return fmt.Errorf("manifest entry %q is inside %q, which is a symlink; an upload keeps links as links and cannot hold files behind one", p, p[:i])
			default:
				return fmt.Errorf("manifest entry %q is inside %q, which is a %s, not a directory", p, p[:i], t)
			}
		}
	}
	return nil
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
