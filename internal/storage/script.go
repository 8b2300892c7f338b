package storage

import (
	"cmp"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/api"
)

// Modes of a bucket mount.
const (
	Mount       = "MOUNT"
	Copy        = "COPY"
	MountCached = "MOUNT_CACHED"
)

// NodeOptions is what a node needs besides the mount to reach the bucket.
type NodeOptions struct {
	Region string
	// Endpoint is AWS_ENDPOINT_URL of the server (an emulator or an
	// S3-compatible store), "" for AWS. Not a secret.
	Endpoint string
}

// DefaultRegion is the region of a bucket whose region nobody said:
// S3's us-east-1, as awsx.DefaultRegion on the server's side (this
// package must not link the SDK to name it; s3bucket's test checks
// they agree).
const DefaultRegion = "us-east-1"

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// nodePath is dst as a shell word: a leading ~ stays the node's HOME.
func nodePath(dst string) string {
	if dst == "~" {
		return `"$HOME"`
	}
	if rest, ok := strings.CutPrefix(dst, "~/"); ok {
		return `"$HOME"/` + quote(rest)
	}
	return quote(dst)
}

// noCredentials is printed when a node's mount or copy fails for want
// of AWS credentials.
const noCredentials = "the node has no AWS credentials: give it an instance profile, or set aws.remote_identity: LOCAL_CREDENTIALS in ~/.sky/config.yaml to copy yours to the nodes"

// s3Remote is the rclone remote of bucket name (both COPY and the
// mounts): rclone's own S3 backend, authenticated from the environment,
// the node's ~/.aws files or its instance profile.
func s3Remote(name string, o NodeOptions) string {
	region := cmp.Or(o.Region, DefaultRegion)
	if o.Endpoint != "" {
		// Path-style, as awsx's clients: emulators and most S3-compatible
		// stores serve no per-bucket host names, and rclone's AWS
		// provider insists on virtual hosts.
		return ":s3,provider=Other,env_auth=true,region=" + region +
			",endpoint=" + quoteRcloneValue(o.Endpoint) + ",force_path_style=true:" + name
	}
	return ":s3,provider=AWS,env_auth=true,region=" + region + ":" + name
}

// installRclone is the shell step that installs the Debian packages
// pkgs where rclone is missing and apt-get is there; the caller checks
// the result. $SUDO must be set.
func installRclone(pkgs string) string {
	return `if ! command -v rclone >/dev/null; then
  if command -v apt-get >/dev/null; then $SUDO apt-get install -y -qq ` + pkgs + ` >/dev/null 2>&1; fi
fi
if ! command -v rclone >/dev/null; then
  echo "rclone is not installed on this node and could not be installed; install the ` + pkgs + ` package(s)" >&2; exit 127
fi
`
}

// credentialHint prints the no-credentials hint when the rclone output
// in file $1 says credentials were the trouble.
const credentialHint = `grep -qiE 'NoCredentialProviders|no valid providers|credentials|AccessDenied|InvalidAccessKeyId' `

// CopyCommand is the node script of a COPY mount: rclone copies the
// bucket (or its sub-path) to the destination, so nodes need neither the
// AWS SDK nor the aws CLI. A sub-path naming one object becomes the
// destination file itself (rclone copyto), a prefix its directory.
func CopyCommand(sm api.StorageMount, o NodeOptions) string {
	src := s3Remote(sm.Name, o)
	sub := strings.Trim(sm.SubPath, "/")
	if sub != "" {
		src += "/" + sub
	}
	what := URI(S3, sm.Name, sub) + " to " + sm.Dst
	// S3 has no directories: a sub-path nothing is under copies nothing
	// and rclone succeeds, so a destination still missing says so. An
	// empty bucket is a destination directory with nothing in it.
	missing := `[ -e "$DST" ] || mkdir -p "$DST"` + "\n"
	if sub != "" {
		missing = `if [ ! -e "$DST" ]; then echo ` + quote(URI(S3, sm.Name, sub)+": no such object or prefix") + ` >&2; exit 1; fi` + "\n"
	}
	return fmt.Sprintf(`set -u
SUDO=""; [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && SUDO="sudo -n"
%[1]sDST=%[2]s
mkdir -p "$(dirname "$DST")" "$HOME"/.sky
OUT=$(mktemp "$HOME"/.sky/storage-copy.XXXXXX)
rclone copyto %[3]s "$DST" --transfers %[4]d --checkers %[4]d >"$OUT" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  echo %[5]s"(rclone exit code $rc):" >&2
  tail -n 40 "$OUT" >&2
  if %[7]s"$OUT"; then
    echo %[8]s >&2
  fi
  rm -f "$OUT"
  exit $rc
fi
rm -f "$OUT"
%[9]secho %[6]s
`, installRclone("rclone"), nodePath(sm.Dst), quote(src), Concurrency, quote("Failed to copy "+what+" "), quote("Copied "+what+"."), credentialHint, quote("Hint: "+noCredentials+"."), missing)
}

// Concurrency is how many objects move at once, uploads on the server
// and copies on a node (SkyPilot's up to 32 concurrent uploads).
const Concurrency = 32

// RcloneLogDir is where mount logs go on a node (SkyPilot's
// ~/.sky/rclone_log).
const RcloneLogDir = "~/.sky/rclone_log"

// MountArgs is the rclone command line of a MOUNT or MOUNT_CACHED mount
// (without the destination's shell quoting and the log file, which the
// script adds): rclone's own S3 backend, authenticated from the
// environment, the node's ~/.aws files or its instance profile.
func MountArgs(sm api.StorageMount, o NodeOptions) ([]string, error) {
	remote := s3Remote(sm.Name, o)
	args := []string{"rclone", "mount", remote}
	switch sm.Mode {
	case Mount:
		args = append(args, "--daemon", "--daemon-wait", "10s", "--allow-other", "--dir-cache-time", "5s")
		if m, _ := sm.Config["mount"].(map[string]any); m != nil {
			if ro, _ := m["read_only"].(bool); ro {
				args = append(args, "--read-only")
			}
		}
	case MountCached:
		mc, err := cachedConfig(sm)
		if err != nil {
			return nil, err
		}
		args = append(args, "--daemon", "--daemon-wait", "10s", "--log-level", "INFO", "--allow-other",
			"--vfs-cache-mode", "full", "--dir-cache-time", "10s", "--vfs-cache-poll-interval", "10s",
			"--vfs-fast-fingerprint")
		args = append(args, mc...)
	default:
		return nil, fmt.Errorf("mode %s is not a mount mode", sm.Mode)
	}
	return args, nil
}

// quoteRcloneValue quotes a connection-string value that holds , or :.
func quoteRcloneValue(v string) string {
	if strings.ContainsAny(v, ",:'\"") {
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return v
}

// presets are MOUNT_CACHED's `type`s.
var presets = map[string]map[string]any{
	"MODEL_CHECKPOINT_RO": {"vfs_read_chunk_streams": 16, "vfs_read_chunk_size": "32M", "read_only": true},
	"MODEL_CHECKPOINT_RW": {"vfs_read_chunk_streams": 16, "vfs_read_chunk_size": "32M", "transfers": 8},
	"DATASET_RO":          {"vfs_read_chunk_streams": 0, "vfs_read_chunk_size": "8M", "read_only": true},
	"DATASET_RW":          {"vfs_read_chunk_streams": 0, "vfs_read_chunk_size": "8M", "transfers": 16},
}

var (
	sizeRE     = regexp.MustCompile(`^[0-9]+[bBkKmMgGtTpP]?$`)
	durationRE = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ms|s|m|h|d|w|M|y))+$|^[0-9]+$`)
)

// cachedConfig is MOUNT_CACHED's flags from the preset and
// config.mount_cached (which overrides it), with SkyPilot's defaults.
func cachedConfig(sm api.StorageMount) ([]string, error) {
	c := map[string]any{}
	if sm.Type != "" {
		p, ok := presets[sm.Type]
		if !ok {
			return nil, fmt.Errorf("unknown MOUNT_CACHED type %s; use MODEL_CHECKPOINT_RO, MODEL_CHECKPOINT_RW, DATASET_RO or DATASET_RW", sm.Type)
		}
		for k, v := range p {
			c[k] = v
		}
	}
	if m, _ := sm.Config["mount_cached"].(map[string]any); m != nil {
		for k, v := range m {
			c[k] = v
		}
	}
	var out []string
	str := func(k string) (string, bool) {
		switch v := c[k].(type) {
		case string:
			return v, true
		case int:
			return strconv.Itoa(v), true
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64), true
		}
		return "", false
	}
	out = append(out, "--vfs-cache-max-size", "10G")
	if v, ok := str("vfs_cache_max_size"); ok {
		if !sizeRE.MatchString(v) {
			return nil, fmt.Errorf("config.mount_cached.vfs_cache_max_size %q is not a size like 10G", v)
		}
		out[len(out)-1] = v
	}
	out = append(out, "--vfs-write-back", "1s")
	if v, ok := str("vfs_write_back"); ok {
		if !durationRE.MatchString(v) {
			return nil, fmt.Errorf("config.mount_cached.vfs_write_back %q is not a duration like 5s", v)
		}
		out[len(out)-1] = v
	}
	for _, k := range []string{"buffer_size", "vfs_read_ahead", "vfs_read_chunk_size"} {
		if v, ok := str(k); ok {
			if !sizeRE.MatchString(v) {
				return nil, fmt.Errorf("config.mount_cached.%s %q is not a size like 32M", k, v)
			}
			out = append(out, "--"+strings.ReplaceAll(k, "_", "-"), v)
		}
	}
	if v, ok := str("vfs_cache_max_age"); ok {
		if !durationRE.MatchString(v) {
			return nil, fmt.Errorf("config.mount_cached.vfs_cache_max_age %q is not a duration like 1h", v)
		}
		out = append(out, "--vfs-cache-max-age", v)
	}
	if v, ok := c["vfs_read_chunk_streams"].(int); ok {
		out = append(out, "--vfs-read-chunk-streams", strconv.Itoa(v))
	}
	if t, ok := c["transfers"].(int); ok {
		checkers := max(4, min(2*t, int(math.Floor(30+1.2*float64(t)))))
		out = append(out, "--transfers", strconv.Itoa(t), "--checkers", strconv.Itoa(checkers))
	}
	if ro, _ := c["read_only"].(bool); ro {
		out = append(out, "--read-only")
	}
	return out, nil
}

// hashDst names a destination's log and cache (md5, as SkyPilot).
func hashDst(dst string) string {
	h := md5.Sum([]byte(dst))
	return hex.EncodeToString(h[:])
}

// MountScript is the per-node script of a MOUNT or MOUNT_CACHED mount,
// SkyPilot's steps: unmount a mount already there, make sure rclone and
// FUSE are there, make (or empty) the directory, mount, and on failure
// print rclone's log and exit with its code.
func MountScript(sm api.StorageMount, o NodeOptions) (string, error) {
	args, err := MountArgs(sm, o)
	if err != nil {
		return "", err
	}
	h := hashDst(sm.Dst)
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = quote(a)
	}
	cmd := strings.Join(words, " ") + " " + nodePath(sm.Dst) + ` --log-file "$LOG"`
	if sm.Mode == MountCached {
		cmd += ` --cache-dir "$HOME"/.cache/sky_rclone/` + h
	}
	return fmt.Sprintf(`set -u
MP=%[1]s
LOG="$HOME"/.sky/rclone_log/%[2]s.log
SUDO=""; [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && SUDO="sudo -n"
if mountpoint -q "$MP" 2>/dev/null; then
  fusermount3 -uz "$MP" 2>/dev/null || fusermount -uz "$MP" 2>/dev/null || $SUDO umount -l "$MP"
  for i in 1 2 3 4 5 6 7 8; do mountpoint -q "$MP" || break; sleep 0.5; done
fi
if ! { command -v fusermount3 >/dev/null || command -v fusermount >/dev/null; }; then
  if command -v apt-get >/dev/null; then $SUDO apt-get install -y -qq fuse3 >/dev/null 2>&1; fi
fi
%[7]sif [ ! -e /dev/fuse ]; then echo "/dev/fuse is missing on this node: FUSE is needed to mount %[3]s" >&2; exit 1; fi
if [ "$(id -u)" != 0 ] && ! grep -qs '^user_allow_other' /etc/fuse.conf; then
  echo user_allow_other | $SUDO tee -a /etc/fuse.conf >/dev/null 2>&1 || true
fi
# Where only root may open /dev/fuse (mode 0600, as on some hosts), the
# mount runs as root for this user (its files owned by the user, the
# user's own ~/.aws read), through passwordless sudo.
ASROOT=""
if [ "$(id -u)" != 0 ] && ! { [ -r /dev/fuse ] && [ -w /dev/fuse ]; }; then
  if [ -n "$SUDO" ] && $SUDO true 2>/dev/null; then
    ASROOT="$SUDO env HOME=$HOME"
  else
    echo "/dev/fuse is not open to $(id -un) on this node and sudo needs a password: FUSE is needed to mount %[3]s" >&2; exit 1
  fi
fi
mkdir -p "$MP" "$HOME"/.sky/rclone_log
if [ -n "$(ls -A "$MP" 2>/dev/null)" ]; then find "$MP" -mindepth 1 -delete; fi
chmod 777 "$MP" 2>/dev/null || true
: > "$LOG"
# rclone's daemon must not hold the caller's output open (an SSH
# session would wait for it); it writes to its log file.
if [ -n "$ASROOT" ]; then
  $ASROOT %[4]s --uid "$(id -u)" --gid "$(id -g)" </dev/null >/dev/null 2>&1
else
  %[4]s </dev/null >/dev/null 2>&1
fi
rc=$?
if [ $rc -ne 0 ]; then
  echo "Failed to mount %[3]s at %[5]s (rclone exit code $rc). rclone log:" >&2
  tail -n 40 "$LOG" >&2
  if grep -qiE 'NoCredentialProviders|no valid providers|credentials|AccessDenied|InvalidAccessKeyId' "$LOG"; then
    echo %[6]s >&2
  fi
  exit $rc
fi
# rclone mounts without asking S3 anything: a first listing shows now,
# not in the job, that the bucket cannot be reached.
if ! ls "$MP" >/dev/null 2>&1; then
  echo "Mounted %[3]s at %[5]s, but it cannot be read. rclone log:" >&2
  tail -n 40 "$LOG" >&2
  if grep -qiE 'NoCredentialProviders|no valid providers|credentials|AccessDenied|InvalidAccessKeyId' "$LOG"; then
    echo %[6]s >&2
  fi
  fusermount3 -uz "$MP" 2>/dev/null || fusermount -uz "$MP" 2>/dev/null || $SUDO umount -l "$MP"
  exit 1
fi
`, nodePath(sm.Dst), h, URI(S3, sm.Name, ""), cmd, sm.Dst, quote("Hint: "+noCredentials+"."), installRclone("rclone fuse3")), nil
}

// UnmountScript lazily unmounts each path (a no-op where nothing is
// mounted); stop and down run it before the node goes.
func UnmountScript(dsts []string) string {
	var b strings.Builder
	for _, d := range dsts {
		fmt.Fprintf(&b, "MP=%s; if mountpoint -q \"$MP\" 2>/dev/null; then fusermount3 -uz \"$MP\" 2>/dev/null || fusermount -uz \"$MP\" 2>/dev/null || umount -l \"$MP\" 2>/dev/null || sudo -n umount -l \"$MP\" 2>/dev/null; fi\n", nodePath(d))
	}
	b.WriteString("true\n")
	return b.String()
}
