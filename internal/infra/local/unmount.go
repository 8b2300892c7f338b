package local

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// unmountUnder lazily unmounts every mount below dir (bucket mounts a
// task left on a node's HOME): removing the cluster directory must not
// walk into a FUSE mount, nor fail on its mountpoint.
func unmountUnder(dir string) {
	for _, mp := range mountsUnder(dir) {
		if syscall.Unmount(mp, syscall.MNT_DETACH) == nil {
			continue
		}
		// Not root: FUSE's setuid helper unmounts the user's own mounts.
		if exec.Command("fusermount3", "-uz", mp).Run() != nil {
			_ = exec.Command("fusermount", "-uz", mp).Run()
		}
	}
}

// mountsUnder lists the mountpoints below dir, deepest first (so a mount
// inside another goes before it).
func mountsUnder(dir string) []string {
	dir = filepath.Clean(dir) + "/"
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if mp := unescapeMount(fields[4]); strings.HasPrefix(mp, dir) {
			mps = append(mps, mp)
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	return mps
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if c, err := parseOctal(s[i+1 : i+4]); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func parseOctal(s string) (byte, error) {
	var v int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, os.ErrInvalid
		}
		v = v*8 + int(c-'0')
	}
	return byte(v), nil
}
