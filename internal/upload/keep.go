package upload

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/skygo/skygo/internal/api"
)

// Keep gives a task its own hard-linked copy, at dir, of the tree its
// client uploaded (which the upload store may collect long before a
// relaunch needs it), and points the task at it. A task naming no local
// files needs none.
func Keep(uploads, userID string, ts *api.TaskSpec, dir string) error {
	if len(Roots(*ts, true)) == 0 {
		return nil
	}
	if ts.UploadID == "" {
		return fmt.Errorf("%w: the task names local files but its client did not upload them; use a SkyGo client of this version", ErrNoTree)
	}
	tree, release, err := Open(uploads, userID, ts.UploadID)
	if err != nil {
		return err
	}
	defer release()
	_ = os.RemoveAll(dir) // a failed attempt's leftovers
	if err := LinkTree(tree, dir); err != nil {
		return err
	}
	Rebase(ts, dir, true)
	return nil
}

// LinkTree copies the tree at src to dst with hard links (a copy where
// links are not possible), keeping modes and symlinks.
func LinkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(out, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		}
		if err := os.Link(p, out); err == nil {
			return nil
		}
		return copyFile(p, out, info.Mode().Perm())
	})
}
