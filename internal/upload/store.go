package upload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

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
//	users/<user>/blobs/<sha[:2]>/<sha>   content-addressed file contents
//	users/<user>/partial/<sha>           a blob being received
//	users/<user>/trees/<id>/             the files of one manifest, as the nodes get them
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
	writing map[string]*sync.Mutex
}

// NewStore is a store under dir with the defaults for zero fields.
func NewStore(dir string, maxBytes int64) *Store {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Store{Dir: dir, MaxBytes: maxBytes, ChunkBytes: DefaultChunkBytes, MaxAge: DefaultMaxAge, writing: map[string]*sync.Mutex{}}
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
	return filepath.Join(s.userDir(userID), "blobs", sha[:2], sha)
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
	seen := make(map[string]bool, len(m.Entries))
	for _, e := range m.Entries {
		if err := checkEntry(e); err != nil {
			return badRequest("%v", err)
		}
		if seen[e.Path] {
			return badRequest("manifest path %q appears twice", e.Path)
		}
		seen[e.Path] = true
		total += e.Size
		if e.Size > largest.Size {
			largest = e
		}
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
	now := time.Now()
	needs.Missing = []api.UploadBlob{}
	for _, b := range Blobs(m) {
		p := s.blobPath(userID, b.SHA256)
		if err := os.Chtimes(p, now, now); err == nil {
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
// the blob is checked against its hash before the blob is stored.
func (s *Store) WriteChunk(userID, sha string, size, offset int64, body io.Reader) (api.UploadChunkResult, error) {
	if len(sha) != 64 || !isHex(sha) {
		return api.UploadChunkResult{}, badRequest("sha256 %q: want 64 hex digits", sha)
	}
	if size < 0 || size > s.MaxBytes {
		return api.UploadChunkResult{}, &ClientError{Status: 413, Msg: fmt.Sprintf("a file of %s is more than the API server's upload limit of %s", HumanBytes(size), HumanBytes(s.MaxBytes))}
	}
	s.gc.RLock()
	defer s.gc.RUnlock()
	key := userID + "/" + sha
	s.mu.Lock()
	l := s.writing[key]
	if l == nil {
		l = &sync.Mutex{}
		s.writing[key] = l
	}
	s.mu.Unlock()
	l.Lock()
	defer func() {
		l.Unlock()
		s.mu.Lock()
		delete(s.writing, key)
		s.mu.Unlock()
	}()
	if _, err := os.Stat(s.blobPath(userID, sha)); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, s.ChunkBytes))
		return api.UploadChunkResult{Have: size, Complete: true}, nil
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
	n, err := io.Copy(&offsetWriter{f: f, off: offset}, io.LimitReader(body, min(s.ChunkBytes, size-offset)+1))
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
	if err := f.Sync(); err != nil {
		return api.UploadChunkResult{}, err
	}
	got, err := HashFile(pp)
	if err != nil {
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
	if err := os.Rename(pp, bp); err != nil {
		return api.UploadChunkResult{}, err
	}
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

// build writes the entries under dir: directories first (modes applied
// last, so a read-only directory can still be filled), then files copied
// from blobs with their modes and times, then symlinks as written.
func (s *Store) build(userID, dir string, m api.UploadManifest) error {
	es := append([]api.UploadEntry(nil), m.Entries...)
	sort.Slice(es, func(i, j int) bool { return es[i].Path < es[j].Path })
	var dirs []api.UploadEntry
	for _, e := range es {
		dst := filepath.Join(dir, filepath.FromSlash(e.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		switch e.Type {
		case api.EntryDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, e)
		case api.EntrySymlink:
			if err := os.Symlink(e.Link, dst); err != nil {
				return err
			}
		case api.EntryFile:
			if err := copyBlob(s.blobPath(userID, e.SHA256), dst, os.FileMode(e.Mode&0o7777)); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return badRequest("commit: the content of %s (sha256 %s) was not uploaded; upload its blob first", e.Path, e.SHA256[:12])
				}
				return err
			}
			if e.MTime != 0 {
				t := time.Unix(0, e.MTime)
				_ = os.Chtimes(dst, t, t)
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		dst := filepath.Join(dir, filepath.FromSlash(dirs[i].Path))
		_ = os.Chmod(dst, os.FileMode(dirs[i].Mode&0o7777)|0o700)
		if dirs[i].MTime != 0 {
			t := time.Unix(0, dirs[i].MTime)
			_ = os.Chtimes(dst, t, t)
		}
	}
	return os.WriteFile(filepath.Join(dir, treeMarker), nil, 0o600)
}

func copyBlob(src, dst string, mode os.FileMode) error {
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

// GC removes what was not used for MaxAge: trees no request holds, blobs
// (a tree holds copies, so blobs only serve dedup), partial blobs and
// leftover build directories. It returns how many it removed.
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
		shards, _ := os.ReadDir(filepath.Join(ud, "blobs"))
		for _, sh := range shards {
			blobs, _ := os.ReadDir(filepath.Join(ud, "blobs", sh.Name()))
			for _, b := range blobs {
				bp := filepath.Join(ud, "blobs", sh.Name(), b.Name())
				if old(bp) {
					errs = append(errs, os.Remove(bp))
					removed++
				}
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
