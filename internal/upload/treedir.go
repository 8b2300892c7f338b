package upload

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// treeDir resolves manifest paths beneath the root of a tree being built
// one component at a time, each directory opened relative to its parent
// with O_NOFOLLOW|O_DIRECTORY: a component that is a symlink (or not a
// directory) fails the open instead of being followed, so nothing a
// manifest says can make the build create a file outside the root.
//
// It keeps the descriptors of the directories of the last path it
// resolved; entries come in path order, so most resolutions reuse them.
type treeDir struct {
	stack []openDir // stack[0] is the root
}

type openDir struct {
	name string // the component; "" for the root
	fd   int
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

func openTreeDir(root string) (*treeDir, error) {
	fd, err := unix.Open(root, dirFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	return &treeDir{stack: []openDir{{fd: fd}}}, nil
}

func (t *treeDir) close() {
	for _, d := range t.stack {
		unix.Close(d.fd)
	}
	t.stack = nil
}

// parent opens (making missing ones) the directories above the slash
// path p and returns the descriptor of the last one and p's final name.
func (t *treeDir) parent(p string) (int, string, error) {
	comps := strings.Split(p, "/")
	for _, c := range comps {
		// checkEntry refuses these; a descriptor walk must never see one.
		if c == "" || c == "." || c == ".." {
			return -1, "", fmt.Errorf("manifest path %q: empty, . or .. component", p)
		}
	}
	dirs := comps[:len(comps)-1]
	keep := 0
	for keep < len(dirs) && keep+1 < len(t.stack) && t.stack[keep+1].name == dirs[keep] {
		keep++
	}
	for len(t.stack) > keep+1 {
		unix.Close(t.stack[len(t.stack)-1].fd)
		t.stack = t.stack[:len(t.stack)-1]
	}
	for _, c := range dirs[keep:] {
		top := t.stack[len(t.stack)-1].fd
		fd, err := unix.Openat(top, c, dirFlags, 0)
		if err == unix.ENOENT {
			// A directory the manifest implies but does not list.
			if err = unix.Mkdirat(top, c, 0o755); err == nil || err == unix.EEXIST {
				fd, err = unix.Openat(top, c, dirFlags, 0)
			}
		}
		if err != nil {
			if err == unix.ELOOP || err == unix.ENOTDIR {
				return -1, "", badRequest("manifest path %q: %q is not a directory in the upload (a symlink or a file); nothing can be put below it", p, c)
			}
			return -1, "", fmt.Errorf("opening the directory of %s: %w", p, err)
		}
		t.stack = append(t.stack, openDir{name: c, fd: fd})
	}
	return t.stack[len(t.stack)-1].fd, comps[len(comps)-1], nil
}

// chmodDir sets the mode of the directory at p, refusing to follow a link.
func (t *treeDir) chmodDir(p string, mode uint32) error {
	parent, name, err := t.parent(p)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(parent, name, dirFlags, 0)
	if err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	return nil
}

// copyFileAt copies src to a new file name in the directory parent; an
// existing name, a link among them, fails rather than being written.
func copyFileAt(src string, parent int, name string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(parent, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode))
	if err != nil {
		return &os.PathError{Op: "create", Path: name, Err: err}
	}
	out := os.NewFile(uintptr(fd), name)
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(mode); err != nil { // the umask may have narrowed it
		out.Close()
		return err
	}
	return out.Close()
}
