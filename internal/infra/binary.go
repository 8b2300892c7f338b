package infra

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/skygo/skygo/internal/provision"
)

// The sky binary on nodes that do not share this machine's: every
// infrastructure whose nodes are other machines or containers (SSH hosts,
// Slurm login nodes, EC2 instances, Kubernetes pods) installs it the same
// way, through its CommandRunner.

// BinaryPath is where EnsureBinary puts the sky binary on a host.
const BinaryPath = "~/.sky/bin/sky"

// EnsureBinary puts localBinary at ~/.sky/bin/sky on the node unless the
// node already has a file with the same SHA-256; see EnsureBinaryAt.
func EnsureBinary(ctx context.Context, r provision.CommandRunner, localBinary string) (bool, error) {
	return EnsureBinaryAt(ctx, r, localBinary, BinaryPath)
}

// EnsureBinaryAt puts localBinary at path (absolute or "~/...") on the
// node unless the node already has a file with the same SHA-256. The copy
// goes to a temporary name, is checked, made executable and renamed into
// place, so a running agent never sees half a binary. It reports whether
// it copied.
func EnsureBinaryAt(ctx context.Context, r provision.CommandRunner, localBinary, path string) (bool, error) {
	want, err := fileSHA256(localBinary)
	if err != nil {
		return false, fmt.Errorf("hashing the sky binary: %w", err)
	}
	qpath := provision.QuoteHomePath(path)
	res, err := r.Run(ctx, "sha256sum "+qpath+" 2>/dev/null", provision.RunOptions{})
	if err != nil {
		return false, fmt.Errorf("checking the sky binary on %s: %w", r.NodeIP(), err)
	}
	if fields := strings.Fields(string(res.Stdout)); res.ExitCode == 0 && len(fields) > 0 && fields[0] == want {
		return false, nil
	}
	tmp := uploadTemp(path)
	if err := r.Upload(ctx, localBinary, tmp); err != nil {
		return false, err
	}
	cmd := fmt.Sprintf(`t=%s; h=$(sha256sum "$t" | cut -d' ' -f1); if [ "$h" != %s ]; then rm -f "$t"; echo "copied binary has hash $h, expected %s" >&2; exit 1; fi; chmod 755 "$t" && mv -f "$t" %s`,
		provision.QuoteHomePath(tmp), want, want, qpath)
	res, err = r.Run(ctx, cmd, provision.RunOptions{})
	if err != nil {
		return false, fmt.Errorf("installing the sky binary on %s: %w", r.NodeIP(), err)
	}
	if res.ExitCode != 0 {
		return false, fmt.Errorf("installing the sky binary on %s: %s", r.NodeIP(), bytes.TrimSpace(res.Stderr))
	}
	return true, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// uploadTemp is a fresh name beside path for the copy in flight.
func uploadTemp(path string) string {
	dir := "."
	if i := strings.LastIndex(path, "/"); i > 0 {
		dir = path[:i]
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return dir + "/.sky.upload-" + hex.EncodeToString(b)
}
