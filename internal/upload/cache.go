package upload

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// HashCache remembers the sha256 of local files by what stat says of them
// (size, mtime, ctime, inode), so that a re-launch of unchanged files
// hashes nothing: the cost rsync's quick check had before uploads. Any
// write moves the ctime, so a changed file is never taken for its old
// self. It lives on the client, one file per HOME.
type HashCache struct {
	path string
	mu   sync.Mutex
	m    map[string]cacheEntry
}

type cacheEntry struct {
	Size  int64  `json:"s"`
	MTime int64  `json:"m"`
	CTime int64  `json:"c"`
	Ino   uint64 `json:"i"`
	SHA   string `json:"h"`
	Seen  int64  `json:"t"` // unix seconds of the last scan that met it
}

// cacheKeep is how long an entry no scan met is kept; cacheMaxEntries
// bounds the file (about 100 bytes an entry).
const (
	cacheKeep       = 30 * 24 * time.Hour
	cacheMaxEntries = 300_000
)

// OpenHashCache reads the cache at path; a missing or broken file is an
// empty cache (it is only a cache).
func OpenHashCache(path string) *HashCache {
	c := &HashCache{path: path, m: map[string]cacheEntry{}}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &c.m)
	}
	return c
}

func statKey(fi fs.FileInfo) cacheEntry {
	ino, ctime := statIDs(fi)
	return cacheEntry{Size: fi.Size(), MTime: fi.ModTime().UnixNano(), CTime: ctime, Ino: ino}
}

func (c *HashCache) lookup(path string, fi fs.FileInfo) (string, bool) {
	if c == nil {
		return "", false
	}
	k := statKey(fi)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[path]
	if !ok || e.Size != k.Size || e.MTime != k.MTime || e.CTime != k.CTime || e.Ino != k.Ino {
		return "", false
	}
	e.Seen = time.Now().Unix()
	c.m[path] = e
	return e.SHA, true
}

func (c *HashCache) store(path string, fi fs.FileInfo, sha string) {
	if c == nil {
		return
	}
	e := statKey(fi)
	e.SHA, e.Seen = sha, time.Now().Unix()
	c.mu.Lock()
	c.m[path] = e
	c.mu.Unlock()
}

// Save writes the cache (dropping entries no scan met for a month),
// atomically, so concurrent launches at worst lose each other's entries.
func (c *HashCache) Save() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	old := time.Now().Add(-cacheKeep).Unix()
	for p, e := range c.m {
		if e.Seen < old {
			delete(c.m, p)
		}
	}
	if len(c.m) > cacheMaxEntries {
		// Keep the most recently met: a bounded file whatever is launched.
		keys := make([]string, 0, len(c.m))
		for p := range c.m {
			keys = append(keys, p)
		}
		sort.Slice(keys, func(i, j int) bool { return c.m[keys[i]].Seen > c.m[keys[j]].Seen })
		for _, p := range keys[cacheMaxEntries:] {
			delete(c.m, p)
		}
	}
	b, err := json.Marshal(c.m)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".upload-hashes-")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), c.path)
}
