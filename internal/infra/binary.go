package infra

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/upload"
)

// The node runtime (cmd/sky-node) on nodes that do not share this
// machine's: every infrastructure whose nodes are other machines or
// containers (SSH hosts, Slurm login nodes, EC2 instances, Kubernetes
// pods) installs the build for the node's own architecture the same way,
// through its CommandRunner. The local infrastructure and the load
// balancers run this machine's build in place.

// BinaryPath is where EnsureBinary puts the node runtime on a host.
const BinaryPath = "~/.sky/bin/sky-node"

// EnvRuntimeDir names a directory holding the node runtime builds
// (sky-node-linux-<goarch>), searched before the sky binary's own
// directory.
const EnvRuntimeDir = "SKYGO_RUNTIME_DIR"

// LBBinaryName is the file name of the SkyServe load balancer, built for
// the server's own machine and found like the node runtime.
const LBBinaryName = "sky-lb"

// LBBinaryBeside is the load balancer in $SKYGO_RUNTIME_DIR or beside the
// sky binary at sky.
func LBBinaryBeside(sky string) (string, error) {
	p, err := findRuntimeFile(runtimeDirs(sky), LBBinaryName)
	if err != nil {
		return "", fmt.Errorf("%w; build it with `make build` (or `CGO_ENABLED=0 go build -o %s ./cmd/sky-lb`), or set %s to the directory holding it",
			err, LBBinaryName, EnvRuntimeDir)
	}
	return p, nil
}

// runtimeDirs are the directories searched for the runtime's files.
func runtimeDirs(sky string) []string {
	var dirs []string
	if d := os.Getenv(EnvRuntimeDir); d != "" {
		dirs = append(dirs, d)
	}
	if sky != "" {
		dirs = append(dirs, filepath.Dir(sky))
	}
	return dirs
}

// NodeBinaryName is the file name of the node runtime for goarch.
func NodeBinaryName(goarch string) string { return "sky-node-linux-" + goarch }

// NodeBinaries finds the node runtime built for a GOARCH.
type NodeBinaries func(goarch string) (string, error)

// NodeBinariesBeside looks in $SKYGO_RUNTIME_DIR, then in the directory
// of the sky binary at sky (where `make build` puts them).
func NodeBinariesBeside(sky string) NodeBinaries {
	return func(goarch string) (string, error) {
		p, err := findRuntimeFile(runtimeDirs(sky), NodeBinaryName(goarch))
		if err != nil {
			return "", fmt.Errorf("the node runtime for linux/%s: %w; build it with `make build` (or `CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o %s ./cmd/sky-node`), or set %s to the directory holding it",
				goarch, err, goarch, NodeBinaryName(goarch), EnvRuntimeDir)
		}
		return p, nil
	}
}

// NodeBinary is the node runtime for goarch beside this executable (or
// in $SKYGO_RUNTIME_DIR).
func NodeBinary(goarch string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating this executable to find the node runtime: %w", err)
	}
	return NodeBinariesBeside(exe)(goarch)
}

// findRuntimeFile is the first regular file name in dirs.
func findRuntimeFile(dirs []string, name string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", p, err)
		}
	}
	if len(dirs) == 0 {
		return "", fmt.Errorf("%s is not found: nowhere to look", name)
	}
	return "", fmt.Errorf("%s is not in %s", name, strings.Join(dirs, " or "))
}

// NodeArch maps a node's `uname -m` to the GOARCH of the node runtime it
// runs.
func NodeArch(machine string) (string, error) {
	switch m := strings.TrimSpace(machine); m {
	case "x86_64", "amd64":
		return "amd64", nil
	case "aarch64", "arm64":
		return "arm64", nil
	case "":
		return "", errors.New("the node did not say its architecture (`uname -m` printed nothing)")
	}
	return "", fmt.Errorf("the node's architecture %q (`uname -m`) has no SkyGo node runtime; SkyGo runs on x86_64 and aarch64 (arm64) Linux nodes", strings.TrimSpace(machine))
}

// probeCommand prints the node's architecture and the hash of the node
// runtime at qpath (nothing when there is none): one round trip decides
// whether to copy and which build.
func probeCommand(qpath string) string {
	return "uname -m; sha256sum " + qpath + " 2>/dev/null || true"
}

// parseProbe splits probeCommand's output into the machine name and the
// installed file's hash ("" when none).
func parseProbe(out []byte) (machine, hash string) {
	lines := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)
	machine = strings.TrimSpace(lines[0])
	if len(lines) > 1 {
		if f := strings.Fields(lines[1]); len(f) > 0 {
			hash = f[0]
		}
	}
	return machine, hash
}

// EnsureBinary puts the node runtime for the node's architecture at
// ~/.sky/bin/sky-node unless the node already has a file with the same
// SHA-256; see EnsureBinaryAt.
func EnsureBinary(ctx context.Context, r provision.CommandRunner, bins NodeBinaries) (bool, error) {
	return EnsureBinaryAt(ctx, r, bins, BinaryPath)
}

// EnsureBinaryAt asks the node its architecture (`uname -m`) and the hash
// of the file at path (absolute or "~/...") in one command, and puts the
// node runtime built for that architecture there unless the hashes
// agree. The copy goes to a temporary name, is checked, made executable
// and renamed into place, so a running agent never sees half a binary.
// It reports whether it copied.
func EnsureBinaryAt(ctx context.Context, r provision.CommandRunner, bins NodeBinaries, path string) (bool, error) {
	qpath := provision.QuoteHomePath(path)
	res, err := r.Run(ctx, probeCommand(qpath), provision.RunOptions{})
	if err != nil {
		return false, fmt.Errorf("checking the node runtime on %s: %w", r.NodeIP(), err)
	}
	if res.ExitCode != 0 {
		return false, fmt.Errorf("checking the node runtime on %s (exit code %d): %s", r.NodeIP(), res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	machine, have := parseProbe(res.Stdout)
	goarch, err := NodeArch(machine)
	if err != nil {
		return false, fmt.Errorf("node %s: %w", r.NodeIP(), err)
	}
	local, err := bins(goarch)
	if err != nil {
		return false, fmt.Errorf("node %s: %w", r.NodeIP(), err)
	}
	want, err := upload.HashFile(local)
	if err != nil {
		return false, fmt.Errorf("hashing the node runtime: %w", err)
	}
	if have == want {
		return false, nil
	}
	tmp := uploadTemp(path)
	if err := r.Upload(ctx, local, tmp); err != nil {
		return false, err
	}
	cmd := fmt.Sprintf(`t=%s; h=$(sha256sum "$t" | cut -d' ' -f1); if [ "$h" != %s ]; then rm -f "$t"; echo "copied binary has hash $h, expected %s" >&2; exit 1; fi; chmod 755 "$t" && mv -f "$t" %s`,
		provision.QuoteHomePath(tmp), want, want, qpath)
	res, err = r.Run(ctx, cmd, provision.RunOptions{})
	if err != nil {
		return false, fmt.Errorf("installing the node runtime on %s: %w", r.NodeIP(), err)
	}
	if res.ExitCode != 0 {
		return false, fmt.Errorf("installing the node runtime on %s: %s", r.NodeIP(), bytes.TrimSpace(res.Stderr))
	}
	return true, nil
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
