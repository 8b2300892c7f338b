package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/provision"
)

// Environment variables Runner sets for every command it starts. Every
// descendant inherits them, which is how a node's processes are found.
const (
	// EnvNode holds the node directory (the node's HOME).
	EnvNode = "SKYGO_LOCAL_NODE"
	// EnvNodeIP holds the node's address (its loopback or namespace address).
	EnvNodeIP = "SKYGO_NODE_IP"
)

// Runner runs commands on one local node: `bash -c` with HOME set to the
// node directory, working directory the node HOME, in its own process group
// so a cancelled context kills the whole tree. The local infrastructure
// hands it out as the nodes' CommandRunner, and the head agent uses it to
// reach the other nodes of a local cluster.
type Runner struct {
	home  string
	ip    string
	netns string // path of the node's network namespace; "" shares this machine's
}

var _ provision.CommandRunner = (*Runner)(nil)

// NewRunner returns the runner of the node whose HOME is home and whose
// address is ip.
func NewRunner(home, ip string) *Runner { return &Runner{home: home, ip: ip} }

// InNetNS returns the runner of the same node whose commands start in the
// network namespace at path (see NetNSPath); "" is this machine's.
func (r *Runner) InNetNS(path string) *Runner {
	c := *r
	c.netns = path
	return &c
}

// NetNS is the path of the node's network namespace ("" when the node
// shares this machine's network).
func (r *Runner) NetNS() string { return r.netns }

// NodeIP implements provision.CommandRunner.
func (r *Runner) NodeIP() string { return r.ip }

// Home implements provision.CommandRunner.
func (r *Runner) Home() string { return r.home }

// Env is the environment of commands on this node; see NodeEnv.
func (r *Runner) Env() []string {
	return NodeEnv(os.Environ(), r.home, r.ip)
}

// defaultPath is the PATH of a node whose starter had none, the usual
// login PATH of a Linux host.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// passedEnv are the only variables a local node takes from the process
// that starts its commands (the API server, or the head agent reaching
// another node): what a cloud node's login shell has too. Nothing else
// passes, because the server's environment is whatever the client that
// auto-started it had — cloud credentials, SKYPILOT_INITIAL_BASIC_AUTH —
// and every user's job would see it.
//
// EnvPIDNS passes too when set: the node's agent must follow the server's
// choice of PID namespaces.
var passedEnv = []string{"PATH", "USER", "LOGNAME", "LANG", "LC_ALL", EnvPIDNS}

// NodeEnv is the environment of commands on the local node at home: PATH,
// USER, LOGNAME, LANG and LC_ALL from base (PATH defaulting to the usual
// login PATH), HOME set to the node's home, and the node markers. Jobs add
// their task's envs, secrets and SKYPILOT_* variables on top.
func NodeEnv(base []string, home, ip string) []string {
	keep := map[string]string{}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(passedEnv, k) {
			keep[k] = v
		}
	}
	if keep["PATH"] == "" {
		keep["PATH"] = defaultPath
	}
	env := make([]string, 0, len(passedEnv)+3)
	for _, k := range passedEnv {
		if v, ok := keep[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "HOME="+home, EnvNode+"="+home, EnvNodeIP+"="+ip)
}

func (r *Runner) command(ctx context.Context, cmd string) *exec.Cmd {
	c := Command(ctx, "bash", "-c", cmd)
	c.Dir = r.home
	c.Env = r.Env()
	// Background children may hold the output open; wait returns the
	// command's own result after this long.
	c.WaitDelay = 2 * time.Second
	return c
}

// Run implements provision.CommandRunner.
func (r *Runner) Run(ctx context.Context, cmd string, opts provision.RunOptions) (provision.Result, error) {
	c := r.command(ctx, cmd)
	var stdout, stderr bytes.Buffer
	c.Stdin = opts.Stdin
	c.Stdout, c.Stderr = &stdout, &stderr
	if opts.Stdout != nil {
		c.Stdout = opts.Stdout
	}
	if opts.Stderr != nil {
		c.Stderr = opts.Stderr
	}
	code, err := wait(ctx, c, r.netns)
	return provision.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, err
}

// Stream implements provision.CommandRunner.
func (r *Runner) Stream(ctx context.Context, cmd string, stdout, stderr io.Writer) (int, error) {
	c := r.command(ctx, cmd)
	c.Stdout, c.Stderr = stdout, stderr
	return wait(ctx, c, r.netns)
}

// wait runs c and turns its end into (exit code, error); a non-zero exit is
// not an error, a cancelled context or a failed start is. The command
// starts in the network namespace at netns ("": this process's).
func wait(ctx context.Context, c *exec.Cmd, netns string) (int, error) {
	err := StartIn(c, netns)
	if err == nil {
		err = c.Wait()
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		// The command finished but a background child kept its output
		// open; the command's own result is what counts.
		err = nil
		if c.ProcessState != nil && !c.ProcessState.Success() {
			return ExitCode(c.ProcessState), nil
		}
	}
	if ctx.Err() != nil {
		return -1, fmt.Errorf("running on local node: %w", ctx.Err())
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return ExitCode(exitErr.ProcessState), nil
	}
	if err != nil {
		return -1, fmt.Errorf("running on local node: %w", err)
	}
	return 0, nil
}

// resolve maps a node path ("~/x", "x" or "/abs") to a path on this machine.
func (r *Runner) resolve(p string) string {
	switch {
	case p == "~":
		return r.home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(r.home, p[2:])
	case filepath.IsAbs(p):
		return p
	default:
		return filepath.Join(r.home, p)
	}
}

// Upload implements provision.CommandRunner.
func (r *Runner) Upload(ctx context.Context, localPath, remotePath string) error {
	dst := r.resolve(remotePath)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("uploading %s to local node: %w", localPath, err)
	}
	if err := copyFile(localPath, dst); err != nil {
		return fmt.Errorf("uploading %s to local node: %w", localPath, err)
	}
	return nil
}

// Rsync implements provision.CommandRunner with the system rsync, or a Go
// copy when rsync is not installed.
func (r *Runner) Rsync(ctx context.Context, localDir, remoteDir string, opts provision.RsyncOptions) error {
	dst := r.resolve(remoteDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("syncing %s to local node: %w", localDir, err)
	}
	if path, err := exec.LookPath("rsync"); err == nil {
		args := []string{"-a"}
		if opts.Delete {
			args = append(args, "--delete")
		}
		for _, ex := range opts.Excludes {
			args = append(args, "--exclude="+ex)
		}
		args = append(args, strings.TrimSuffix(localDir, "/")+"/", dst+"/")
		out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("rsync %s to local node: %v: %s", localDir, err, bytes.TrimSpace(out))
		}
		return nil
	}
	return copyTree(localDir, dst, opts.Excludes)
}

// copyTree is the rsync fallback: an additive copy that skips paths
// matching an exclude pattern (by base name or by path relative to src).
func copyTree(src, dst string, excludes []string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel != "." && excluded(rel, d.Name(), excludes) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			// A link (or file) the node's job left where the source has a
			// directory is replaced, not followed: the copy must not write
			// where the link points, as rsync -a does not.
			if fi, err := os.Lstat(target); err == nil && !fi.IsDir() {
				if err := os.Remove(target); err != nil {
					return err
				}
			}
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			_ = os.Remove(target)
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(p, target)
		}
		return nil
	})
}

func excluded(rel, base string, patterns []string) bool {
	for _, pat := range patterns {
		pat = strings.TrimSuffix(strings.TrimPrefix(pat, "/"), "/")
		if ok, _ := filepath.Match(pat, base); ok {
			return true
		}
		if ok, _ := filepath.Match(pat, rel); ok {
			return true
		}
	}
	return false
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := dst + ".skygo-tmp"
	// Exclusive: a link planted at tmp fails the create instead of being
	// written through; the rename then replaces dst itself, link or not.
	_ = os.Remove(tmp)
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_EXCL, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}
