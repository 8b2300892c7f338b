// Package bundle carries the runtime files of a sky binary (sky-server,
// and the node binaries when they are built) and finds them for the CLI.
// A user downloads one sky file: `make build` embeds the runtime into it
// (files/, each file gzipped as NAME.gz, with a MANIFEST of each
// uncompressed file's size, SHA-256 and Go build ID),
// and the CLI uses, in this order:
//
//  1. $SKYGO_RUNTIME_DIR, when set;
//  2. the files beside the sky executable, when they are the embedded
//     build (same size and Go build ID; nothing is hashed per call), as in
//     bin/ after `make build`;
//  3. the embedded files, extracted once per content into
//     os.UserCacheDir()/skygo/runtime/<hash>/.
//
// Every runtime file is found in one directory, so a server started from
// it finds the node binaries beside its own executable. Only cmd/sky
// imports this package: the server and the tests do not carry the bytes.
package bundle

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/skygo/skygo/internal/upload"
)

//go:embed all:files
var files embed.FS

// EnvDir names a directory holding the runtime files; it wins over the
// embedded ones (development, packaging, tests).
const EnvDir = "SKYGO_RUNTIME_DIR"

// linkedDir is a runtime directory named at link time
// (-X github.com/skygo/skygo/internal/bundle.linkedDir=DIR): what a test
// build of sky that embeds nothing uses (internal/testutil.SkyBinary).
var linkedDir string

// File is one runtime file as the manifest records it.
type File struct {
	Name    string
	Size    int64
	SHA256  string
	BuildID string // the Go build ID; "" for a file that is not a Go binary
}

// ParseManifest reads MANIFEST lines: NAME SIZE SHA256 [BUILDID].
func ParseManifest(text string) ([]File, error) {
	var out []File
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 3 || len(fields) > 4 {
			return nil, fmt.Errorf("MANIFEST line %d: want NAME SIZE SHA256 [BUILDID], got %q", n, sc.Text())
		}
		size, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("MANIFEST line %d: size %q", n, fields[1])
		}
		if strings.ContainsAny(fields[0], `/\`) || fields[0] == "." || fields[0] == ".." {
			return nil, fmt.Errorf("MANIFEST line %d: %q is not a plain file name", n, fields[0])
		}
		f := File{Name: fields[0], Size: size, SHA256: fields[2]}
		if len(fields) == 4 {
			f.BuildID = fields[3]
		}
		out = append(out, f)
	}
	return out, nil
}

var (
	dirOnce sync.Once
	dir     string
	dirErr  error
)

// Path is the path of the runtime file name (e.g. "sky-server").
func Path(name string) (string, error) {
	dirOnce.Do(func() { dir, dirErr = locate(files, os.Getenv(EnvDir), linkedDir) })
	if dirErr != nil {
		return "", dirErr
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		if d := os.Getenv(EnvDir); d != "" {
			return "", fmt.Errorf("%s=%s has no %s: point it at a directory holding sky's runtime (bin/ after `make build`), or unset it", EnvDir, d, name)
		}
		return "", fmt.Errorf("the runtime directory %s has no %s: rebuild with `make build`", dir, name)
	}
	return p, nil
}

// locate finds the runtime directory from the embedded files fsys (under
// files/), $SKYGO_RUNTIME_DIR (envDir) and the link-time directory.
func locate(fsys fs.FS, envDir, linked string) (string, error) {
	if envDir != "" {
		return envDir, nil
	}
	if linked != "" {
		return linked, nil
	}
	text, err := fs.ReadFile(fsys, "files/MANIFEST")
	if err != nil {
		return "", errors.New("this sky binary was built without its runtime (sky-server): build it with `make build`, " +
			"which embeds it, or set " + EnvDir + " to a directory holding sky-server")
	}
	man, err := ParseManifest(string(text))
	if err != nil {
		return "", err
	}
	if exe, err := os.Executable(); err == nil {
		if d := filepath.Dir(exe); Matches(d, man) {
			return d, nil
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory to extract sky's runtime into (%v); set %s", err, EnvDir)
	}
	sum := sha256.Sum256(text)
	return Extract(fsys, "files", man, filepath.Join(cache, "skygo", "runtime", hex.EncodeToString(sum[:8])))
}

// Matches says whether dir holds every manifest file as built: the same
// size and, for Go binaries, the same build ID (read from the ELF note,
// a few hundred bytes, so a 100 MB file is not hashed on every call).
func Matches(dir string, man []File) bool {
	if len(man) == 0 {
		return false
	}
	for _, f := range man {
		p := filepath.Join(dir, f.Name)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || st.Size() != f.Size {
			return false
		}
		if f.BuildID == "" {
			if sum, err := upload.HashFile(p); err != nil || sum != f.SHA256 {
				return false
			}
			continue
		}
		if id, err := GoBuildID(p); err != nil || id != f.BuildID {
			return false
		}
	}
	return true
}

// Extract writes the manifest's files from fsys (under root) into dest,
// once: a directory complete at dest is used as it is. Concurrent
// extractors each fill a temporary directory beside dest and rename it
// into place; the first rename wins and the others use its result.
func Extract(fsys fs.FS, root string, man []File, dest string) (string, error) {
	if complete(dest, man) {
		return dest, nil
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("extract sky's runtime: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+"-")
	if err != nil {
		return "", fmt.Errorf("extract sky's runtime: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after a successful rename
	for _, f := range man {
		if err := extractFile(fsys, root+"/"+f.Name, filepath.Join(tmp, f.Name), f); err != nil {
			return "", fmt.Errorf("extract sky's runtime (%s): %w", f.Name, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dest); err != nil {
		if complete(dest, man) {
			return dest, nil // another extractor won
		}
		return "", fmt.Errorf("extract sky's runtime: %w", err)
	}
	return dest, nil
}

// complete says whether dir holds every manifest file at its size. A
// directory appears only by a rename of a filled one, so sizes suffice.
func complete(dir string, man []File) bool {
	for _, f := range man {
		st, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil || st.Size() != f.Size {
			return false
		}
	}
	return true
}

// extractFile writes the manifest file f, embedded gzipped as src+".gz",
// to dst. It stops one byte past the manifest's size, so a file that does
// not match cannot fill the disk.
func extractFile(fsys fs.FS, src, dst string, f File) error {
	in, err := fsys.Open(src + ".gz")
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(in, 256<<10))
	if err != nil {
		return fmt.Errorf("embedded file is not gzip: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(zr, f.Size+1))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("embedded file does not match its manifest (size %d, want %d)", n, f.Size)
	}
	return nil
}

// GoBuildID reads the Go build ID from an ELF file's .note.go.buildid
// section (what `go tool buildid` prints); stripped binaries keep it.
func GoBuildID(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return "", errors.New("no Go build ID note")
	}
	data, err := s.Data()
	if err != nil {
		return "", err
	}
	// An ELF note: name size, descriptor size, type, then the name
	// ("Go\0" padded to 4 bytes) and the descriptor, the ID itself.
	if len(data) < 16 {
		return "", errors.New("short Go build ID note")
	}
	bo := f.ByteOrder
	namesz, descsz := bo.Uint32(data[0:]), bo.Uint32(data[4:])
	off := 12 + (uint64(namesz)+3)&^3
	if !bytes.HasPrefix(data[12:], []byte("Go\x00")) || off+uint64(descsz) > uint64(len(data)) {
		return "", errors.New("malformed Go build ID note")
	}
	return string(data[off : off+uint64(descsz)]), nil
}
