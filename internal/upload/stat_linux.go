package upload

import (
	"io/fs"
	"syscall"
	"time"
)

// linkInfo is a blob's link count and change time. The change time moves
// when a tree links or unlinks the blob and when Needs refreshes it, but
// not with the content's time, which the trees' files share with rsync.
func linkInfo(fi fs.FileInfo) (nlink uint64, changed time.Time) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1, fi.ModTime()
	}
	return uint64(st.Nlink), time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
}

// statIDs is a file's inode and change time, for the hash cache.
func statIDs(fi fs.FileInfo) (ino uint64, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return st.Ino, st.Ctim.Nano()
}
