package upload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skygo/skygo/internal/api"
)

// Defaults of a Store.
const (
	DefaultMaxBytes   = 4 << 30 // per upload
	DefaultChunkBytes = 8 << 20
	DefaultMaxAge     = 24 * time.Hour
	maxEntries        = 1_000_000
	treeMarker        = ".skygo-tree" // touched on every use; flocked while a request uses the tree
)

// Store is the server's upload store, one directory per user:
//
//	users/<user>/blobs/<sha>         content-addressed file contents
//	users/<user>/blobs/<sha>.<mode>  the same with other permission bits
//	users/<user>/partial/<sha>           a blob being received
//	users/<user>/trees/<id>/             the files of one manifest, as the nodes get them
//
// A tree's files are hard links to blobs (a blob carries its file's mode,
// hence a variant per mode): a tree costs no copy, and an unchanged file
// keeps its inode and time from one tree to the next, so rsync to the
// nodes skips it. A blob no tree links is collected MaxAge after its
// last use.
//
// Users never share blobs: a user cannot learn by a manifest that another
// has some content, nor put another's files in their tree.
type Store struct {
	Dir        string
	MaxBytes   int64
	ChunkBytes int64
	// MaxAge is how long an unused tree, blob or partial blob is kept.
	MaxAge time.Duration

	// gc excludes writers while a collection runs; blobs touched by a
	// manifest call are young, so they survive the next one.
	gc sync.RWMutex
	mu sync.Mutex
	// writing serialises the chunks of one partial blob.
	writing map[string]*blobLock
}

// NewStore is a store under dir with the defaults for zero fields.
func NewStore(dir string, maxBytes int64) *Store {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Store{Dir: dir, MaxBytes: maxBytes, ChunkBytes: DefaultChunkBytes, MaxAge: DefaultMaxAge, writing: map[string]*blobLock{}}
}

// Limits are what a client must respect.
func (s *Store) Limits() api.UploadLimits {
	return api.UploadLimits{MaxBytes: s.MaxBytes, ChunkBytes: s.ChunkBytes}
}

// userDir names a user's directory by a hash of the id, so no id can
// spell a path.
func (s *Store) userDir(userID string) string {
	sum := sha256.Sum256([]byte(userID))
	return filepath.Join(s.Dir, "users", hex.EncodeToString(sum[:8]))
}

func (s *Store) blobPath(userID, sha string) string {
	// One flat directory: ext4 and xfs index large directories, and a
	// new upload then dirties one directory rather than hundreds.
	return filepath.Join(s.userDir(userID), "blobs", sha)
}

// ClientError is a refusal the client caused (bad manifest, too large,
// wrong offset): the server answers it with Status, not 500.
type ClientError struct {
	Status int // HTTP status
	Msg    string
	Have   int64 // for a wrong offset: what the server has
}

func (e *ClientError) Error() string { return e.Msg }

func badRequest(format string, a ...any) error {
	return &ClientError{Status: 400, Msg: fmt.Sprintf(format, a...)}
}

// check validates a manifest and its size.
func (s *Store) check(m api.UploadManifest) error {
	if len(m.Entries) > maxEntries {
		return &ClientError{Status: 413, Msg: fmt.Sprintf("the upload has %d files and directories, more than the API server's limit of %d; leave some out with .skyignore", len(m.Entries), maxEntries)}
	}
	var total int64
	var largest api.UploadEntry
	types := make(map[string]string, len(m.Entries))
	for _, e := range m.Entries {
		if err := checkEntry(e); err != nil {
			return badRequest("%v", err)
		}
		if _, dup := types[e.Path]; dup {
			return badRequest("manifest path %q appears twice", e.Path)
		}
		types[e.Path] = e.Type
		total += e.Size
		if e.Size > largest.Size {
			largest = e
		}
	}
	if err := checkTree(types); err != nil {
		return badRequest("%v", err)
	}
	if total > s.MaxBytes {
		return &ClientError{Status: 413, Msg: (&TooLargeError{Total: total, Limit: s.MaxBytes, Largest: largest.Path, LargestSize: largest.Size}).Error()}
	}
	return nil
}

// Needs answers which blobs of a manifest the user's store lacks (and how
// much of each a cut-off upload left), and counts the blobs it has, which
// it touches so that a collection does not take them before the commit.
func (s *Store) Needs(userID string, m api.UploadManifest) (needs api.UploadNeeds, have int, err error) {
	if err := s.check(m); err != nil {
		return needs, 0, err
	}
	s.gc.RLock()
	defer s.gc.RUnlock()
	needs.Missing = []api.UploadBlob{}
	for _, b := range Blobs(m) {
		if refresh(s.blobPath(userID, b.SHA256)) == nil {
			have++
			continue
		}
		if fi, err := os.Stat(s.partialPath(userID, b.SHA256)); err == nil && fi.Size() <= b.Size {
			b.Have = fi.Size()
		}
		needs.Missing = append(needs.Missing, b)
	}
	return needs, have, nil
}

// refresh marks a blob used (its change time, not its content time, which
// its tree files share).
func refresh(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	return os.Chmod(p, fi.Mode().Perm())
}

func (s *Store) partialPath(userID, sha string) string {
	return filepath.Join(s.userDir(userID), "partial", sha)
}

// Have is how many bytes of a blob the store holds (size when complete).
func (s *Store) Have(userID, sha string, size int64) (api.UploadChunkResult, error) {
	if len(sha) != 64 || !isHex(sha) {
		return api.UploadChunkResult{}, badRequest("sha256 %q: want 64 hex digits", sha)
	}
	if _, err := os.Stat(s.blobPath(userID, sha)); err == nil {
		return api.UploadChunkResult{Have: size, Complete: true}, nil
	}
	fi, err := os.Stat(s.partialPath(userID, sha))
	if err != nil {
		return api.UploadChunkResult{}, nil
	}
	return api.UploadChunkResult{Have: fi.Size()}, nil
}

// WriteChunk appends body (at most ChunkBytes) to a blob being received,
// at offset, which must be what the store has. The chunk that completes
// the blob is checked against its hash before the blob is stored, with
// mode (the permission bits of a file of this content).
func (s *Store) WriteChunk(userID, sha string, size, offset int64, mode uint32, body io.Reader) (api.UploadChunkResult, error) {
	if len(sha) != 64 || !isHex(sha) {
		return api.UploadChunkResult{}, badRequest("sha256 %q: want 64 hex digits", sha)
	}
	if size < 0 || size > s.MaxBytes {
		return api.UploadChunkResult{}, &ClientError{Status: 413, Msg: fmt.Sprintf("a file of %s is more than the API server's upload limit of %s", HumanBytes(size), HumanBytes(s.MaxBytes))}
	}
	s.gc.RLock()
	defer s.gc.RUnlock()
	defer s.lockBlob(userID + "/" + sha)()
	if _, err := os.Stat(s.blobPath(userID, sha)); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, s.ChunkBytes))
		return api.UploadChunkResult{Have: size, Complete: true}, nil
	}
	if offset == 0 && size <= s.ChunkBytes {
		return s.writeWhole(userID, sha, size, mode, body)
	}
	pp := s.partialPath(userID, sha)
	if err := os.MkdirAll(filepath.Dir(pp), 0o700); err != nil {
		return api.UploadChunkResult{}, err
	}
	f, err := os.OpenFile(pp, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return api.UploadChunkResult{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return api.UploadChunkResult{}, err
	}
	if fi.Size() != offset {
		return api.UploadChunkResult{}, &ClientError{Status: 409, Msg: fmt.Sprintf("blob %s: chunk at offset %d, but the server has %d bytes", sha[:12], offset, fi.Size()), Have: fi.Size()}
	}
	// A blob sent whole (most are small) is hashed as it arrives, sparing
	// a second read.
	var h hash.Hash
	var w io.Writer = &offsetWriter{f: f, off: offset}
	if offset == 0 {
		h = sha256.New()
		w = io.MultiWriter(w, h)
	}
	n, err := io.Copy(w, io.LimitReader(body, min(s.ChunkBytes, size-offset)+1))
	if err != nil {
		// What arrived is kept: the client resumes from the new size.
		return api.UploadChunkResult{}, fmt.Errorf("receiving blob %s: %w", sha[:12], err)
	}
	if offset+n > size || n > s.ChunkBytes {
		_ = f.Truncate(offset)
		return api.UploadChunkResult{}, badRequest("blob %s: chunk of %d bytes at %d runs past the size %d or the chunk limit %d", sha[:12], n, offset, size, s.ChunkBytes)
	}
	have := offset + n
	if have < size {
		return api.UploadChunkResult{Have: have}, nil
	}
	// No fsync: the hash is checked here, and build checks each blob's
	// size, so a blob a crash left short is sent again, not used.
	var got string
	if h != nil {
		got = hex.EncodeToString(h.Sum(nil))
	} else if got, err = HashFile(pp); err != nil {
		return api.UploadChunkResult{}, err
	}
	if got != sha {
		os.Remove(pp)
		return api.UploadChunkResult{}, badRequest("blob %s: the bytes received hash to %s; the file changed while it was being uploaded, run the command again", sha[:12], got[:12])
	}
	bp := s.blobPath(userID, sha)
	if err := os.MkdirAll(filepath.Dir(bp), 0o700); err != nil {
		return api.UploadChunkResult{}, err
	}
	if err := f.Chmod(os.FileMode(mode & 0o777)); err != nil {
		return api.UploadChunkResult{}, err
	}
	if err := os.Rename(pp, bp); err != nil {
		return api.UploadChunkResult{}, err
	}
	return api.UploadChunkResult{Have: size, Complete: true}, nil
}

// lockBlob serialises the writers of one blob; it returns the unlock.
func (s *Store) lockBlob(key string) func() {
	s.mu.Lock()
	l := s.writing[key]
	if l == nil {
		l = &blobLock{}
		s.writing[key] = l
	}
	l.users++
	s.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.writing, key)
		}
		s.mu.Unlock()
	}
}

type blobLock struct {
	sync.Mutex
	users int // guarded by Store.mu
}

// WriteWhole stores a small blob sent whole in a batch (see
// api.PathUploadBatch); one the store has is read and dropped.
func (s *Store) WriteWhole(userID, sha string, size int64, mode uint32, body io.Reader) (stored bool, err error) {
	if len(sha) != 64 || !isHex(sha) {
		return false, badRequest("batch entry %q: want a 64-digit hex sha256 as its name", sha)
	}
	if size < 0 || size > s.ChunkBytes {
		return false, badRequest("batch entry %s: %d bytes, more than a chunk (%d); send it by chunks", sha[:12], size, s.ChunkBytes)
	}
	s.gc.RLock()
	defer s.gc.RUnlock()
	defer s.lockBlob(userID + "/" + sha)()
	if _, err := os.Stat(s.blobPath(userID, sha)); err == nil {
		_, err := io.Copy(io.Discard, body)
		return false, err
	}
	_, err = s.writeWhole(userID, sha, size, mode, body)
	return err == nil, err
}

// writeWhole stores a blob that comes in one chunk (most files): written
// beside its final name and hashed as it arrives, so it costs one create
// and one rename. A cut-off one is simply sent again.
func (s *Store) writeWhole(userID, sha string, size int64, mode uint32, body io.Reader) (api.UploadChunkResult, error) {
	bp := s.blobPath(userID, sha)
	if err := os.MkdirAll(filepath.Dir(bp), 0o700); err != nil {
		return api.UploadChunkResult{}, err
	}
	f, err := os.CreateTemp(filepath.Dir(bp), ".in-")
	if err != nil {
		return api.UploadChunkResult{}, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, size+1))
	if err != nil {
		return api.UploadChunkResult{}, fmt.Errorf("receiving blob %s: %w", sha[:12], err)
	}
	if n != size {
		return api.UploadChunkResult{}, badRequest("blob %s: got %d bytes, want %d", sha[:12], n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		return api.UploadChunkResult{}, badRequest("blob %s: the bytes received hash to %s; the file changed while it was being uploaded, run the command again", sha[:12], got[:12])
	}
	if err := f.Chmod(os.FileMode(mode & 0o777)); err != nil {
		return api.UploadChunkResult{}, err
	}
	if err := f.Close(); err != nil {
		return api.UploadChunkResult{}, err
	}
	if err := os.Rename(f.Name(), bp); err != nil {
		return api.UploadChunkResult{}, err
	}
	ok = true
	return api.UploadChunkResult{Have: size, Complete: true}, nil
}

type offsetWriter struct {
	f   *os.File
	off int64
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// Commit assembles the tree of a manifest from the user's blobs (all must
// be there) and returns its id. A tree that exists is reused; one being
// built by a concurrent commit of the same files is built twice and the
// first rename wins.
func (s *Store) Commit(userID string, m api.UploadManifest) (api.UploadResult, error) {
	if err := s.check(m); err != nil {
		return api.UploadResult{}, err
	}
	s.gc.RLock()
	defer s.gc.RUnlock()
	res := api.UploadResult{ID: TreeID(m)}
	for _, e := range m.Entries {
		if e.Type == api.EntryFile {
			res.Files++
			res.Bytes += e.Size
		}
	}
	trees := filepath.Join(s.userDir(userID), "trees")
	final := filepath.Join(trees, res.ID)
	if touch(filepath.Join(final, treeMarker)) == nil {
		return res, nil
	}
	if err := os.MkdirAll(trees, 0o700); err != nil {
		return res, err
	}
	tmp, err := os.MkdirTemp(trees, ".build-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	if err := s.build(userID, tmp, m); err != nil {
		return res, err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, treeMarker)); serr == nil {
			return res, nil // a concurrent commit of the same files won
		}
		return res, err
	}
	return res, nil
}

// build writes the entries under dir in path order: directories (their
// modes applied last, so a read-only one can still be filled), files as
// links to their blobs, symlinks as written. Every name is made relative
// to its parent directory's descriptor, each parent opened without
// following a link (see treeDir), so no entry lands outside dir whatever
// the manifest holds; check has refused entries below a link already.
func (s *Store) build(userID, dir string, m api.UploadManifest) error {
	es := append([]api.UploadEntry(nil), m.Entries...)
	sort.Slice(es, func(i, j int) bool { return es[i].Path < es[j].Path })
	td, err := openTreeDir(dir)
	if err != nil {
		return err
	}
	defer td.close()
	var dirs []api.UploadEntry
	for _, e := range es {
		parent, name, err := td.parent(e.Path)
		if err != nil {
			return err
		}
		switch e.Type {
		case api.EntryDir:
			if err := unix.Mkdirat(parent, name, 0o755); err != nil && err != unix.EEXIST {
				return fmt.Errorf("mkdir %s: %w", e.Path, err)
			}
			dirs = append(dirs, e)
		case api.EntrySymlink:
			if err := unix.Symlinkat(e.Link, parent, name); err != nil {
				return fmt.Errorf("symlink %s: %w", e.Path, err)
			}
		case api.EntryFile:
			src, err := s.blobFor(userID, e)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return badRequest("commit: the content of %s (sha256 %s) was not uploaded; upload its blob first", e.Path, e.SHA256[:12])
				}
				return err
			}
			// Flags 0: the blob itself is linked, never what a link names.
			if err := unix.Linkat(unix.AT_FDCWD, src, parent, name, 0); err != nil {
				// Too many links to one inode, or a store across devices.
				if err := copyFileAt(src, parent, name, os.FileMode(e.Mode&0o777)); err != nil {
					return fmt.Errorf("%s: %w", e.Path, err)
				}
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := td.chmodDir(dirs[i].Path, dirs[i].Mode&0o7777|0o700); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, treeMarker), nil, 0o600)
}

// blobFor is the blob a tree file of e links to: the blob itself when
// its mode is e's, else its variant of e's mode, made once. A blob whose
// size is not e's (cut short by a crash) counts as missing.
func (s *Store) blobFor(userID string, e api.UploadEntry) (string, error) {
	bp := s.blobPath(userID, e.SHA256)
	fi, err := os.Stat(bp)
	if err != nil {
		return "", err
	}
	if fi.Size() != e.Size {
		os.Remove(bp)
		return "", fmt.Errorf("blob %s: %w", e.SHA256[:12], os.ErrNotExist)
	}
	mode := os.FileMode(e.Mode & 0o777)
	if fi.Mode().Perm() == mode {
		return bp, nil
	}
	vp := fmt.Sprintf("%s.%o", bp, mode)
	if _, err := os.Stat(vp); err == nil {
		return vp, nil
	}
	tmp := fmt.Sprintf("%s.tmp-%d", vp, time.Now().UnixNano())
	if err := copyFile(bp, tmp, mode); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return vp, os.Rename(tmp, vp)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode) // the umask may have narrowed it
}

func touch(p string) error {
	now := time.Now()
	return os.Chtimes(p, now, now)
}

// ErrNoTree means a request names a tree its user does not have (never
// uploaded, another user's, or collected).
var ErrNoTree = errors.New("upload not found")

// Open finds a user's tree for a request and holds it (a shared lock on
// its marker) until release, so a collection never removes the files of
// a running request, however long it runs. It needs only the directory:
// the operations open the trees the server's handlers wrote.
func Open(dir, userID, id string) (root string, release func(), err error) {
	if len(id) != 32 || !isHex(id) {
		return "", nil, fmt.Errorf("upload id %q: %w", id, ErrNoTree)
	}
	s := Store{Dir: dir}
	root = filepath.Join(s.userDir(userID), "trees", id)
	f, err := os.Open(filepath.Join(root, treeMarker))
	if err != nil {
		return "", nil, fmt.Errorf("upload %s: %w; run the command again to upload the files once more", id, ErrNoTree)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return "", nil, err
	}
	// A collection may have taken the tree while this waited for the lock.
	if _, err := os.Stat(filepath.Join(root, treeMarker)); err != nil {
		f.Close()
		return "", nil, fmt.Errorf("upload %s: %w; run the command again to upload the files once more", id, ErrNoTree)
	}
	_ = touch(f.Name())
	return root, func() { f.Close() }, nil
}

// GC removes what was not used for MaxAge: trees no request holds, then
// blobs no tree links, partial blobs and leftover build directories. It
// returns how many it removed.
func (s *Store) GC(now time.Time) (int, error) {
	s.gc.Lock()
	defer s.gc.Unlock()
	cutoff := now.Add(-s.MaxAge)
	users, err := os.ReadDir(filepath.Join(s.Dir, "users"))
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	removed := 0
	var errs []error
	old := func(p string) bool {
		fi, err := os.Lstat(p)
		return err == nil && fi.ModTime().Before(cutoff)
	}
	for _, u := range users {
		ud := filepath.Join(s.Dir, "users", u.Name())
		trees, _ := os.ReadDir(filepath.Join(ud, "trees"))
		for _, t := range trees {
			td := filepath.Join(ud, "trees", t.Name())
			marker := filepath.Join(td, treeMarker)
			if strings.HasPrefix(t.Name(), ".build-") {
				if old(td) {
					errs = append(errs, removeTree(td))
					removed++
				}
				continue
			}
			if !old(marker) {
				continue
			}
			if ok, err := removeUnheld(td, marker); err != nil {
				errs = append(errs, err)
			} else if ok {
				removed++
			}
		}
		partials, _ := os.ReadDir(filepath.Join(ud, "partial"))
		for _, p := range partials {
			pp := filepath.Join(ud, "partial", p.Name())
			if old(pp) {
				errs = append(errs, os.Remove(pp))
				removed++
			}
		}
		blobs, _ := os.ReadDir(filepath.Join(ud, "blobs"))
		for _, b := range blobs {
			bp := filepath.Join(ud, "blobs", b.Name())
			fi, err := os.Lstat(bp)
			if err != nil {
				continue
			}
			if nlink, changed := linkInfo(fi); nlink <= 1 && changed.Before(cutoff) {
				errs = append(errs, os.Remove(bp))
				removed++
			}
		}
	}
	return removed, errors.Join(errs...)
}

// removeUnheld removes a tree unless a request holds its marker.
func removeUnheld(td, marker string) (bool, error) {
	f, err := os.Open(marker)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false, nil // in use
	}
	// Renamed away first, so no Open can find a half-removed tree.
	gone := filepath.Join(filepath.Dir(td), ".build-gc-"+filepath.Base(td))
	if err := os.Rename(td, gone); err != nil {
		return false, err
	}
	return true, removeTree(gone)
}

// removeTree removes a tree whose directories may be read-only.
func removeTree(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
