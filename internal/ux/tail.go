package ux

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
)

// PrintTail copies the last n lines (0: all) of a file to w; a missing
// file prints nothing.
func PrintTail(path string, n int, w io.Writer) error {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if n > 0 {
		lines := bytes.SplitAfter(raw, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		// A saved attempt ends with the stream's "✓ Job finished" line,
		// which, as on a cluster, comes on top of the n lines of the job.
		if k := len(lines); k > 0 && bytes.Contains(lines[k-1], []byte("Job finished (status: ")) {
			n++
		}
		if len(lines) > n {
			raw = bytes.Join(lines[len(lines)-n:], nil)
		}
	}
	_, err = w.Write(raw)
	return err
}

// CopyFrom writes the bytes of path past off to w, whole lines only, and
// returns the new offset.
func CopyFrom(path string, off int64, w io.Writer) int64 {
	f, err := os.Open(path)
	if err != nil {
		return off
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return off
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return off
		}
		_, _ = w.Write(line)
		off += int64(len(line))
	}
}
