package slurm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	slurmnode "github.com/skygo/skygo/internal/infra/slurm/node"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/provision"
)

// Runner runs commands on one compute node of an allocation: over the
// login node's cached SSH connection, then `srun --overlap` into the
// allocation, pinned to the node, with HOME set to the node's runtime
// directory. It implements provision.CommandRunner and SkyLocator.
type Runner struct {
	login *ssh.Runner
	kh    *ssh.KnownHosts
	job   string // Slurm job id of the allocation
	node  string // Slurm node name
	ip    string // NodeAddr
	home  string // node-local runtime dir, the HOME of SkyGo's commands
	sky   string // absolute path of the node runtime (shared filesystem)
	// jobEnv is the allocation's job-scoped environment file on the
	// shared filesystem (JobEnvFileName).
	jobEnv string
}

// NewRunner returns the runner of node (its Slurm name and address) in
// allocation job, reached through login.
func NewRunner(login *ssh.Runner, kh *ssh.KnownHosts, job, node, ip, home, sky string) *Runner {
	return &Runner{login: login, kh: kh, job: job, node: node, ip: ip, home: home, sky: sky}
}

// command is cmd wrapped for the login node: srun to the node, bash with
// HOME at the runtime dir.
func (r *Runner) command(cmd string) string {
	return provision.Join(slurmnode.SrunArgs(r.job, r.node)...) + " bash -c " + provision.Quote(slurmnode.NodeShell(r.home, cmd))
}

// NodeIP implements provision.CommandRunner.
func (r *Runner) NodeIP() string { return r.ip }

// Home implements provision.CommandRunner.
func (r *Runner) Home() string { return r.home }

// SkyCommand implements provision.SkyLocator: the binary bootstrap put on
// the shared filesystem.
func (r *Runner) SkyCommand() string { return provision.Quote(r.sky) }

// Node is the Slurm name of the runner's node.
func (r *Runner) Node() string { return r.node }

// Run implements provision.CommandRunner.
func (r *Runner) Run(ctx context.Context, cmd string, opts provision.RunOptions) (provision.Result, error) {
	// stderr is also watched for srun's own failures (tail); when the
	// caller gives no writer it is captured into the result as usual.
	var errBuf bytes.Buffer
	tail := &tailWriter{max: 2048}
	captured := opts.Stderr == nil
	if captured {
		opts.Stderr = io.MultiWriter(&errBuf, tail)
	} else {
		opts.Stderr = io.MultiWriter(opts.Stderr, tail)
	}
	res, err := r.login.Run(ctx, r.command(cmd), opts)
	if captured {
		res.Stderr = errBuf.Bytes()
	}
	if err != nil {
		return res, fmt.Errorf("node %s of Slurm job %s: %w", r.node, r.job, err)
	}
	if res.ExitCode != 0 {
		if e := slurmnode.SrunStepFailure(tail.String()); e != "" {
			return res, fmt.Errorf("node %s of Slurm job %s: %s", r.node, r.job, e)
		}
	}
	return res, nil
}

// Stream implements provision.CommandRunner.
func (r *Runner) Stream(ctx context.Context, cmd string, stdout, stderr io.Writer) (int, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	res, err := r.Run(ctx, cmd, provision.RunOptions{Stdout: stdout, Stderr: stderr})
	return res.ExitCode, err
}

// Upload implements provision.CommandRunner: the file travels on the
// step's stdin into a temporary name beside the target, then is renamed.
func (r *Runner) Upload(ctx context.Context, localPath, remotePath string) error {
	f, err := os.Open(localPath)
	if err != nil {
		return fmt.Errorf("uploading to node %s: %w", r.node, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("uploading to node %s: %w", r.node, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("uploading to node %s: %s is not a regular file", r.node, localPath)
	}
	p := provision.QuoteHomePath(remotePath)
	cmd := fmt.Sprintf(`p=%s; d=$(dirname "$p"); mkdir -p "$d" && t="$d/.skygo-upload.$$" && cat > "$t" && chmod %o "$t" && mv -f "$t" "$p" || { rc=$?; rm -f "$t"; exit $rc; }`, p, st.Mode().Perm())
	res, err := r.Run(ctx, cmd, provision.RunOptions{Stdin: f})
	if err != nil {
		return fmt.Errorf("uploading %s to node %s: %w", remotePath, r.node, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("uploading %s to node %s: exit %d: %s", remotePath, r.node, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

// Rsync implements provision.CommandRunner: the system rsync, whose
// remote shell is a small script that drops the host name rsync passes
// and runs the remote rsync through ssh to the login node and srun to the
// node. --protect-args keeps paths off the remote command line.
func (r *Runner) Rsync(ctx context.Context, localDir, remoteDir string, opts provision.RsyncOptions) error {
	ep := r.login.Endpoint()
	if len(ep.IdentityFiles) == 0 {
		return fmt.Errorf("syncing %s to node %s: rsync needs key authentication to the login node; set IdentityFile for it in ~/.slurm/config", localDir, r.node)
	}
	dst := provision.HomePath(r.home, remoteDir)
	if res, err := r.Run(ctx, "mkdir -p "+provision.Quote(dst), provision.RunOptions{}); err != nil || res.ExitCode != 0 {
		if err == nil {
			err = fmt.Errorf("mkdir exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
		}
		return fmt.Errorf("syncing %s to node %s: %w", localDir, r.node, err)
	}
	rsh, cleanup, err := r.rshScript()
	if err != nil {
		return fmt.Errorf("syncing %s to node %s: %w", localDir, r.node, err)
	}
	defer cleanup()
	args := []string{"-a", "--protect-args"}
	if opts.Delete {
		args = append(args, "--delete")
	}
	for _, ex := range opts.Excludes {
		args = append(args, "--exclude="+ex)
	}
	args = append(args, "-e", rsh, strings.TrimSuffix(localDir, "/")+"/", "node:"+dst+"/")
	out, err := exec.CommandContext(ctx, "rsync", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rsync %s to node %s:%s: %v: %s", localDir, r.node, dst, err, bytes.TrimSpace(out))
	}
	return nil
}

// rshScript writes the remote-shell script of one rsync (mode 0700 in a
// private temporary directory) and returns its path.
func (r *Runner) rshScript() (string, func(), error) {
	dir, err := os.MkdirTemp("", "skygo-slurm-rsh-")
	if err != nil {
		return "", nil, err
	}
	ep := r.login.Endpoint()
	words := append(ssh.SSHCommand(ep, r.kh), ep.User+"@"+ep.Addr, "--")
	words = append(words, slurmnode.SrunArgs(r.job, r.node)...)
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# rsync passes the host first: the host is the login node, already named.\nshift\nexec")
	for _, w := range words {
		b.WriteString(" " + provision.Quote(w))
	}
	b.WriteString(` "$@"` + "\n")
	path := filepath.Join(dir, "rsh")
	if err := os.WriteFile(path, []byte(b.String()), 0o700); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return string(t.b) }
