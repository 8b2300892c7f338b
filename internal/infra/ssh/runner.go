package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
)

// DefaultPgidDir is where a Runner not tied to a cluster records the
// process groups of its running commands (on the host).
const DefaultPgidDir = "~/.sky/run"

// Runner runs commands on one host over the Dialer's cached connection.
//
// Every command runs as `setsid -w bash -c CMD`, i.e. in a new session
// whose id is also its process group id. While it runs, that id is written
// to a file under PgidDir on the host (removed when the command ends).
// Cancelling the context opens a second session that kills the whole
// session (kill -KILL -pgid, then pkill -KILL -s for members that moved to
// another group), because closing an SSH channel does not end a command
// started without a terminal. Terminate uses the same files to kill what
// is still running when a cluster goes away.
type Runner struct {
	d      *Dialer
	ep     Endpoint
	ip     string
	pgDir  string
	homeMu sync.Mutex
	home   string
}

var _ provision.CommandRunner = (*Runner)(nil)

// NewRunner returns a runner for ep. nodeIP is what NodeIP reports (the
// host's address on the cluster network); pgidDir is where running
// commands are recorded ("" means DefaultPgidDir); home, when known,
// saves a round trip on the first Home call.
func NewRunner(d *Dialer, ep Endpoint, nodeIP, pgidDir, home string) *Runner {
	if pgidDir == "" {
		pgidDir = DefaultPgidDir
	}
	if nodeIP == "" {
		nodeIP = ep.Addr
	}
	return &Runner{d: d, ep: ep, ip: nodeIP, pgDir: pgidDir, home: home}
}

// Endpoint is the host this runner talks to.
func (r *Runner) Endpoint() Endpoint { return r.ep }

// NodeIP implements provision.CommandRunner.
func (r *Runner) NodeIP() string { return r.ip }

// Home implements provision.CommandRunner. It asks the host once and
// caches the answer; "" if the host could not be asked (see FetchHome).
func (r *Runner) Home() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, _ := r.FetchHome(ctx)
	return h
}

// FetchHome is Home with the error.
func (r *Runner) FetchHome(ctx context.Context) (string, error) {
	r.homeMu.Lock()
	defer r.homeMu.Unlock()
	if r.home != "" {
		return r.home, nil
	}
	res, err := r.Run(ctx, `printf %s "$HOME"`, provision.RunOptions{})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 || len(res.Stdout) == 0 {
		return "", fmt.Errorf("asking %s for its home directory: exit %d: %s", r.ep, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	r.home = string(res.Stdout)
	return r.home, nil
}

// session opens a channel, redialling once if the cached connection
// turns out to be broken.
func (r *Runner) session(ctx context.Context) (*gossh.Session, error) {
	for attempt := 0; ; attempt++ {
		c, err := r.d.Client(ctx, r.ep)
		if err != nil {
			return nil, err
		}
		s, err := newSession(ctx, c)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, &DialError{Host: r.ep.String(), Kind: Timeout, Err: fmt.Errorf("opening a session: %w", err)}
		}
		var oce *gossh.OpenChannelError
		if errors.As(err, &oce) && r.d.alive(r.ep) {
			// The server refused this channel (session limit) but the
			// connection is fine: other commands run on it, keep it.
			return nil, fmt.Errorf("opening a session on %s: %w (raise MaxSessions in the host's sshd_config, or lower Dialer.MaxSessions)", r.ep, err)
		}
		r.d.Forget(r.ep)
		if attempt == 1 || ctx.Err() != nil {
			return nil, &DialError{Host: r.ep.String(), Kind: Unreachable, Err: fmt.Errorf("opening a session: %w", err)}
		}
	}
}

// newSession opens a channel on c, giving up when ctx ends: on a
// connection whose peer vanished the open waits for the keepalive to drop
// it, and a caller with a deadline (a health check) must not wait that
// long. A session that opens after all is closed.
func newSession(ctx context.Context, c *gossh.Client) (*gossh.Session, error) {
	type opened struct {
		s   *gossh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := c.NewSession()
		ch <- opened{s, err}
	}()
	select {
	case o := <-ch:
		return o.s, o.err
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.s != nil {
				o.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func newToken() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// wrap builds the remote command line. The outer part is POSIX sh (it is
// read by the user's login shell); the command itself runs under bash,
// with the environment the login shell set up (as `ssh host cmd` would).
//
// SHLVL=2: bash sources ~/.bashrc when it believes sshd started it, i.e.
// when it is a top-level shell (SHLVL < 2 after exec) and SSH_CLIENT is
// set. The login shell already did that; doing it again in the wrapper
// doubled the cost of every command on hosts with a slow .bashrc (pyenv,
// conda). Test and mkdir keep the common case to builtins.
func wrap(pgFile, cmd string) string {
	const inner = provision.RecordSelfSh + `; bash -c "$1"; rc=$?; rm -f "$0"; exit $rc`
	dir := provision.QuoteHomePath(dirOf(pgFile))
	return fmt.Sprintf("[ -d %s ] || mkdir -p %s 2>/dev/null; SHLVL=2 exec setsid -w bash -c %s %s %s",
		dir, dir, provision.Quote(inner), provision.QuoteHomePath(pgFile), provision.Quote(cmd))
}

func dirOf(p string) string {
	if i := strings.LastIndex(p, "/"); i > 0 {
		return p[:i]
	}
	return "."
}

// exec runs cmd and returns its exit code; see Runner for cancellation.
func (r *Runner) exec(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	release, err := r.d.slot(ctx, r.ep)
	if err != nil {
		return -1, fmt.Errorf("waiting for a free session on %s: %w", r.ep, err)
	}
	defer release()
	s, err := r.session(ctx)
	if err != nil {
		return -1, err
	}
	defer s.Close()
	if stdin != nil {
		s.Stdin = stdin
	}
	s.Stdout, s.Stderr = stdout, stderr
	pgFile := strings.TrimSuffix(r.pgDir, "/") + "/" + newToken()
	if err := s.Start(wrap(pgFile, cmd)); err != nil {
		r.d.Forget(r.ep)
		return -1, &DialError{Host: r.ep.String(), Kind: Unreachable, Err: fmt.Errorf("starting command: %w", err)}
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err := <-done:
		return exitCode(r.ep, err)
	case <-ctx.Done():
		// The kill goes on in the background past killWait: a host that
		// stopped answering would otherwise hold the caller until its
		// connection is dropped.
		killed := make(chan error, 1)
		go func() { killed <- r.kill(pgFile) }()
		var killErr error
		closeWait := 2 * time.Second
		select {
		case killErr = <-killed:
		case <-time.After(killWait):
			killErr = fmt.Errorf("no answer within %s", killWait)
			closeWait = 500 * time.Millisecond // nor will the session's end come
		}
		s.Close()
		select {
		case <-done:
		case <-time.After(closeWait):
		}
		if killErr != nil {
			return -1, fmt.Errorf("cancelled, but killing the command on %s failed (it may still run): %v: %w", r.ep, killErr, ctx.Err())
		}
		return -1, fmt.Errorf("running on %s: %w", r.ep, ctx.Err())
	}
}

// killWait is how long a cancelled command waits for its remote kill (a
// healthy host runs it in milliseconds; one that does not answer within
// this is not waited for).
const killWait = time.Second

// killFilesScript returns a POSIX sh snippet that, for every file matching
// the given (already quoted) globs, kills the session whose id the file
// holds: its process group and every process left in the session (by
// session id, never by name), then removes the file. A file older than the
// last boot is only removed: after a reboot its id may belong to someone
// else, and an id that now names another process (provision.OwnedPIDSh)
// is not signalled either. Ids 0 and 1 are never used (kill -0 would mean
// "my own group").
func killFilesScript(globs ...string) string {
	return provision.OwnedPIDSh + `; read up _ < /proc/uptime; boot=$(( $(date +%s) - ${up%.*} - 2 )); ` +
		`for f in ` + strings.Join(globs, " ") + `; do [ -f "$f" ] || continue; ` +
		`pg=$(cut -d' ' -f1 "$f" 2>/dev/null); ` +
		`case "$pg" in ''|*[!0-9]*) ;; *) if [ "$pg" -gt 1 ] && [ "$(stat -c %Y "$f")" -ge "$boot" ] && sky_owned "$f" "$pg"; then ` +
		`kill -KILL -- -"$pg" 2>/dev/null; pkill -KILL -g "$pg" 2>/dev/null; pkill -KILL -s "$pg" 2>/dev/null; fi;; esac; ` +
		`rm -f "$f"; done; true`
}

// kill ends the command recorded in pgFile. The command may not have
// written its file yet, so wait for it briefly.
func (r *Runner) kill(pgFile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	f := provision.QuoteHomePath(pgFile)
	script := "i=0; while [ ! -s " + f + ` ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; ` + killFilesScript(f)
	s, err := r.session(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	// Plain bash here: this command must not record itself.
	out, err := s.CombinedOutput(script)
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func exitCode(ep Endpoint, err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *gossh.ExitError
	if errors.As(err, &ee) {
		if ee.Signal() != "" {
			return 128 + signalNumber(ee.Signal()), nil
		}
		return ee.ExitStatus(), nil
	}
	var missing *gossh.ExitMissingError
	if errors.As(err, &missing) {
		return -1, &DialError{Host: ep.String(), Kind: Unreachable, Err: errors.New("connection lost before the command finished")}
	}
	return -1, fmt.Errorf("running on %s: %w", ep, err)
}

func signalNumber(name string) int {
	switch name {
	case "HUP":
		return 1
	case "INT":
		return 2
	case "QUIT":
		return 3
	case "KILL":
		return 9
	case "SEGV":
		return 11
	case "PIPE":
		return 13
	case "TERM":
		return 15
	}
	return 0
}

// Run implements provision.CommandRunner.
func (r *Runner) Run(ctx context.Context, cmd string, opts provision.RunOptions) (provision.Result, error) {
	var stdout, stderr bytes.Buffer
	var out, errw io.Writer = &stdout, &stderr
	if opts.Stdout != nil {
		out = opts.Stdout
	}
	if opts.Stderr != nil {
		errw = opts.Stderr
	}
	code, err := r.exec(ctx, cmd, opts.Stdin, out, errw)
	return provision.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, err
}

// Stream implements provision.CommandRunner.
func (r *Runner) Stream(ctx context.Context, cmd string, stdout, stderr io.Writer) (int, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	return r.exec(ctx, cmd, nil, stdout, stderr)
}

// Upload implements provision.CommandRunner: the file goes over the
// session's stdin into a temporary name next to the target, gets the
// local file's mode, and is renamed into place, so a reader never sees
// half a file.
func (r *Runner) Upload(ctx context.Context, localPath, remotePath string) error {
	f, err := os.Open(localPath)
	if err != nil {
		return fmt.Errorf("uploading to %s: %w", r.ep, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("uploading to %s: %w", r.ep, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("uploading to %s: %s is not a regular file", r.ep, localPath)
	}
	return r.UploadReader(ctx, f, remotePath, st.Mode().Perm())
}

// UploadReader writes everything read from src to remotePath with mode.
func (r *Runner) UploadReader(ctx context.Context, src io.Reader, remotePath string, mode os.FileMode) error {
	p := provision.QuoteHomePath(remotePath)
	cmd := fmt.Sprintf(`p=%s; d=$(dirname "$p"); mkdir -p "$d" && t="$d/.skygo-upload.$$" && cat > "$t" && chmod %o "$t" && mv -f "$t" "$p" || { rc=$?; rm -f "$t"; exit $rc; }`, p, mode.Perm())
	res, err := r.Run(ctx, cmd, provision.RunOptions{Stdin: src})
	if err != nil {
		return fmt.Errorf("uploading %s to %s: %w", remotePath, r.ep, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("uploading %s to %s: exit %d: %s", remotePath, r.ep, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

// Rsync implements provision.CommandRunner with the system rsync over the
// system ssh, given the same address, user, key and known_hosts files as
// our own connections (and StrictHostKeyChecking=yes: the key was
// recorded by our own first connection). It is additive unless
// opts.Delete. Password-only hosts cannot be synced this way.
func (r *Runner) Rsync(ctx context.Context, localDir, remoteDir string, opts provision.RsyncOptions) error {
	if len(r.ep.IdentityFiles) == 0 {
		return fmt.Errorf("syncing %s to %s: rsync needs key authentication; add identity_file for this host in ~/.sky/ssh_node_pools.yaml", localDir, r.ep)
	}
	home, err := r.FetchHome(ctx)
	if err != nil {
		return fmt.Errorf("syncing %s to %s: %w", localDir, r.ep, err)
	}
	dst := provision.HomePath(home, remoteDir)
	if res, err := r.Run(ctx, "mkdir -p "+provision.Quote(dst), provision.RunOptions{}); err != nil || res.ExitCode != 0 {
		if err == nil {
			err = fmt.Errorf("mkdir exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
		}
		return fmt.Errorf("syncing %s to %s: %w", localDir, r.ep, err)
	}
	args := []string{"-a"}
	if opts.Delete {
		args = append(args, "--delete")
	}
	for _, ex := range opts.Excludes {
		args = append(args, "--exclude="+ex)
	}
	args = append(args, "-e", strings.Join(quoteAll(SSHCommand(r.ep, r.d.KnownHosts)), " "),
		strings.TrimSuffix(localDir, "/")+"/", r.ep.User+"@"+bracket(r.ep.Addr)+":"+dst+"/")
	out, err := exec.CommandContext(ctx, "rsync", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rsync %s to %s:%s: %v: %s", localDir, r.ep, dst, err, bytes.TrimSpace(out))
	}
	return nil
}

func bracket(addr string) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]"
	}
	return addr
}

func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = provision.Quote(w)
	}
	return out
}

// SSHCommand is the system ssh command line (without the destination)
// that reaches ep like our own client does: explicit port, user, keys,
// the same known_hosts files with strict checking, no user config (we
// already resolved it), jump hosts as a nested ProxyCommand.
func SSHCommand(ep Endpoint, kh *KnownHosts) []string {
	args := []string{"ssh", "-F", "none", "-p", strconv.Itoa(ep.Port), "-l", ep.User,
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10",
		"-o", "ServerAliveInterval=15", "-o", "StrictHostKeyChecking=yes"}
	if kh != nil {
		args = append(args, "-o", "UserKnownHostsFile="+strings.Join(kh.Files(), " "))
	}
	for _, k := range ep.IdentityFiles {
		args = append(args, "-i", k)
	}
	if ep.ProxyCommand != "" && len(ep.Jumps) == 0 {
		args = append(args, "-o", "ProxyCommand="+ep.ProxyCommand)
	}
	if n := len(ep.Jumps); n > 0 {
		hop := ep.Jumps[n-1]
		hop.Jumps = ep.Jumps[:n-1]
		proxy := append(SSHCommand(hop, kh), "-W", "%h:%p", hop.Addr)
		args = append(args, "-o", "ProxyCommand="+strings.Join(quoteAll(proxy), " "))
	}
	return args
}

// SkyCommand implements provision.SkyLocator: hosts run the copy of the
// node runtime that bootstrap installed ("$HOME" expands on the host).
func (r *Runner) SkyCommand() string {
	return `"$HOME"/` + provision.Quote(strings.TrimPrefix(infra.BinaryPath, "~/"))
}
