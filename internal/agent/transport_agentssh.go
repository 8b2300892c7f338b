package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/provision"
)

// The "agent-ssh" transport: the head reaches a node whose only SSH
// server is the node agent's own (`sky agent ssh-serve`) with an SSH
// client inside the agent, for nodes that have no ssh client to run
// (containers). One connection per node carries every command as a
// session of its own, and is dialled again once it breaks; keepalives
// notice a node that went away without a word, as the ssh transport's
// ServerAlive options do.

func init() {
	Transports[agentapi.TransportAgentSSH] = newAgentSSHRunner
}

// agentSSHConnectTimeout bounds the TCP connect and, separately, the SSH
// handshake (the ssh transport's ConnectTimeout).
const agentSSHConnectTimeout = 5 * time.Second

// agentSSHRunner runs commands on one node over one SSH connection.
type agentSSHRunner struct {
	addr         string // host:port
	user         string
	key          string // private key path on the head
	what         string // "agent-ssh to user@host:port", for errors
	hostKey      gossh.HostKeyCallback
	hostKeyAlgos []string // nil: any

	// slot is a one-place lock on conn, held while dialling: commands
	// waiting for a connection share the one being made, and a waiter can
	// give up when its context ends.
	slot chan struct{}
	conn *agentSSHConn
}

// agentSSHConn is a connection and, closed once it ended, done.
type agentSSHConn struct {
	c    *gossh.Client
	done chan struct{}
}

func newAgentSSHRunner(n agentapi.Node) (NodeRunner, error) {
	if n.IP == "" {
		return nil, errors.New("agent-ssh transport: node has no ip")
	}
	if n.SSHKey == "" {
		return nil, fmt.Errorf("node %s: agent-ssh transport needs ssh_key (the private key's path on the head)", n.IP)
	}
	port := n.SSHPort
	if port == 0 {
		port = 22
	}
	login := n.SSHUser
	if login == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("node %s: agent-ssh transport: no ssh_user, and who runs this agent: %w", n.IP, err)
		}
		login = u.Username
	}
	r := &agentSSHRunner{
		addr: net.JoinHostPort(n.IP, strconv.Itoa(port)),
		user: login,
		key:  n.SSHKey,
		slot: make(chan struct{}, 1),
	}
	r.what = "agent-ssh to " + r.user + "@" + r.addr
	if n.SSHHostKey != "" {
		want, _, _, _, err := gossh.ParseAuthorizedKey([]byte(n.SSHHostKey))
		if err != nil {
			return nil, fmt.Errorf("node %s: ssh_host_key %q is not an SSH public key in authorized_keys form (%v); use what `sky agent ssh-serve --print-host-key` prints on the node", n.IP, n.SSHHostKey, err)
		}
		r.hostKey, r.hostKeyAlgos = pinnedHostKey(want), hostKeyAlgorithms(want.Type())
	} else {
		home, err := homeDir()
		if err != nil {
			return nil, err
		}
		r.hostKey = acceptNewHostKey(filepath.Join(home, ".sky", "known_hosts"))
	}
	return r, nil
}

// Run implements NodeRunner. As with the ssh transport, the command's own
// exit status is a result, and the transport failing (the node cannot be
// dialled, refuses the login or the session, the connection is lost
// before the exit status came) is an error naming the node; so is a
// cancelled context, after the remote program was sent SIGKILL.
func (r *agentSSHRunner) Run(ctx context.Context, cmd string, opts provision.RunOptions) (provision.Result, error) {
	var outBuf, errBuf bytes.Buffer
	stdout, stderr := &cutWriter{w: &outBuf}, &cutWriter{w: &errBuf}
	if opts.Stdout != nil {
		stdout.w = opts.Stdout
	}
	if opts.Stderr != nil {
		stderr.w = opts.Stderr
	}
	result := func() provision.Result {
		stdout.cut()
		stderr.cut()
		return provision.Result{Stdout: outBuf.Bytes(), Stderr: errBuf.Bytes()}
	}
	// The server runs the command with bash -c, as sshd runs it with the
	// login shell; the inner bash -c keeps the semantics of the ssh
	// transport's `ssh host -- bash -c CMD` whatever that shell is.
	rm, err := r.start(ctx, "bash -c "+provision.Quote(cmd))
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return result(), fmt.Errorf("%s: %w", r.what, err)
	}
	go func() {
		if opts.Stdin != nil {
			_, _ = io.Copy(rm.stdin, opts.Stdin)
		}
		_ = rm.stdin.Close()
	}()
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); _, _ = io.Copy(stdout, rm.stdout) }()
	go func() { defer copies.Done(); _, _ = io.Copy(stderr, rm.stderr) }()
	ended := make(chan error, 1)
	go func() {
		err := rm.s.Wait()
		copies.Wait()
		ended <- err
	}()
	select {
	case <-ctx.Done():
		// The session's end would come from the node, which may be gone:
		// Run does not wait for it.
		_ = rm.s.Signal(gossh.SIGKILL)
		_ = rm.s.Close()
		return result(), fmt.Errorf("%s: %w", r.what, ctx.Err())
	case err = <-ended:
	}
	res := result()
	var ee *gossh.ExitError
	var missing *gossh.ExitMissingError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s: %w", r.what, ctx.Err())
	case err == nil:
		return res, nil
	case errors.As(err, &ee):
		// A program killed by a signal counts as bash reports it, 128+n.
		res.ExitCode = ee.ExitStatus()
		return res, nil
	case errors.As(err, &missing):
		return res, fmt.Errorf("%s: the connection was lost before the command's exit status came (did the node go away, or its `sky agent ssh-serve` stop?)", r.what)
	}
	return res, fmt.Errorf("%s: %w", r.what, err)
}

// Close ends the runner's connection; the next Run dials again.
func (r *agentSSHRunner) Close() error {
	r.slot <- struct{}{}
	defer func() { <-r.slot }()
	if r.conn == nil {
		return nil
	}
	err := r.conn.c.Close()
	r.conn = nil
	return err
}

// remote is a started session and its streams.
type remote struct {
	s              *gossh.Session
	stdin          io.WriteCloser
	stdout, stderr io.Reader
}

// start starts command in a new session. A connection that broke
// before anyone noticed fails the session's opening, before the command
// was sent: then it is dialled again, once. A command whose exec request
// was sent is never sent again, since it may have started.
func (r *agentSSHRunner) start(ctx context.Context, command string) (*remote, error) {
	var broken *gossh.Client
	for {
		c, err := r.client(ctx, broken)
		if err != nil {
			return nil, err
		}
		rm, opened, err := startSession(ctx, c, command)
		var refused *gossh.OpenChannelError
		switch {
		case err == nil:
			return rm, nil
		case errors.As(err, &refused):
			return nil, fmt.Errorf("the node refused the session: %s", refused.Message)
		case opened || broken != nil || ctx.Err() != nil:
			return nil, err
		}
		broken = c
	}
}

// startSession opens a session on c and starts command in it; opened
// says whether the session was opened (and so the command perhaps sent).
// A session that opens after ctx ended is killed and closed.
func startSession(ctx context.Context, c *gossh.Client, command string) (rm *remote, opened bool, err error) {
	type outcome struct {
		rm     *remote
		opened bool
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		s, err := c.NewSession()
		if err != nil {
			done <- outcome{err: err}
			return
		}
		rm := &remote{s: s}
		// These fail only once started.
		rm.stdin, _ = s.StdinPipe()
		rm.stdout, _ = s.StdoutPipe()
		rm.stderr, _ = s.StderrPipe()
		if err := s.Start(command); err != nil {
			s.Close()
			done <- outcome{opened: true, err: err}
			return
		}
		done <- outcome{rm: rm, opened: true}
	}()
	select {
	case o := <-done:
		return o.rm, o.opened, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.rm != nil {
				_ = o.rm.s.Signal(gossh.SIGKILL)
				_ = o.rm.s.Close()
			}
		}()
		return nil, true, ctx.Err()
	}
}

// client is the node's connection, dialled when there is none, it
// ended, or it is broken (one a session could not be opened on).
func (r *agentSSHRunner) client(ctx context.Context, broken *gossh.Client) (*gossh.Client, error) {
	select {
	case r.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.slot }()
	if r.conn != nil {
		select {
		case <-r.conn.done:
		default:
			if r.conn.c != broken {
				return r.conn.c, nil
			}
			r.conn.c.Close()
		}
		r.conn = nil
	}
	conn, err := r.dial(ctx)
	if err != nil {
		return nil, err
	}
	r.conn = conn
	return conn.c, nil
}

func (r *agentSSHRunner) dial(ctx context.Context) (*agentSSHConn, error) {
	signer, err := loadClientKey(r.key)
	if err != nil {
		return nil, err
	}
	conf := &gossh.ClientConfig{
		User:              r.user,
		Auth:              []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback:   r.hostKey,
		HostKeyAlgorithms: r.hostKeyAlgos,
	}
	nc, err := (&net.Dialer{Timeout: agentSSHConnectTimeout}).DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(agentSSHConnectTimeout))
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	sc, chans, reqs, err := gossh.NewClientConn(nc, r.addr, conf)
	if !stop() {
		if err == nil {
			sc.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	conn := &agentSSHConn{c: gossh.NewClient(sc, chans, reqs), done: make(chan struct{})}
	go func() {
		_ = conn.c.Wait()
		close(conn.done)
	}()
	go keepAlive(conn.c, conn.done)
	return conn, nil
}

// keepAlive asks the server for an answer every sshKeepAlive seconds and
// closes the connection once sshKeepAliveMax intervals passed without
// one: a node that vanished (no reset ever comes) fails its commands in
// about 9 s instead of leaving them waiting.
func keepAlive(c *gossh.Client, done <-chan struct{}) {
	t := time.NewTicker(sshKeepAlive * time.Second)
	defer t.Stop()
	answered := make(chan error, 1)
	asking, silent := false, 0
	for {
		select {
		case <-done:
			return
		case err := <-answered:
			asking = false
			if err != nil {
				c.Close()
				return
			}
			silent = 0
		case <-t.C:
			if silent++; silent >= sshKeepAliveMax {
				c.Close()
				return
			}
			if !asking {
				asking = true
				go func() {
					// Any answer will do: the agent's server refuses the
					// request, OpenSSH's too.
					_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
					answered <- err
				}()
			}
		}
	}
}

func loadClientKey(path string) (gossh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ssh key: %w", err)
	}
	signer, err := gossh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("ssh key %s: %w (agent-ssh needs a key without a passphrase)", path, err)
	}
	return signer, nil
}

// pinnedHostKey accepts want only.
func pinnedHostKey(want gossh.PublicKey) gossh.HostKeyCallback {
	return func(host string, _ net.Addr, got gossh.PublicKey) error {
		if bytes.Equal(got.Marshal(), want.Marshal()) {
			return nil
		}
		return fmt.Errorf("host key of %s is %s %s, not the node's ssh_host_key %s %s; refusing to connect",
			host, got.Type(), gossh.FingerprintSHA256(got), want.Type(), gossh.FingerprintSHA256(want))
	}
}

// hostKeyAlgorithms are the algorithms that make a server show a key of
// type keyType, so a server with several keys shows the pinned one.
func hostKeyAlgorithms(keyType string) []string {
	if keyType == gossh.KeyAlgoRSA {
		return []string{gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256, gossh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// knownHostsMu serializes this process's writers of known_hosts files;
// flock serializes processes.
var knownHostsMu sync.Mutex

// acceptNewHostKey checks host keys against file as the ssh transport's
// StrictHostKeyChecking=accept-new does: a host never seen is trusted and
// its key added, a host seen with another key is refused.
func acceptNewHostKey(file string) gossh.HostKeyCallback {
	return func(host string, remote net.Addr, key gossh.PublicKey) error {
		knownHostsMu.Lock()
		defer knownHostsMu.Unlock()
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return err
		}
		check, err := knownhosts.New(file)
		if err != nil {
			return fmt.Errorf("reading %s: %w", file, err)
		}
		err = check(host, remote, key)
		var ke *knownhosts.KeyError
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &ke):
			return err // a revoked key
		case len(ke.Want) > 0:
			return fmt.Errorf("host key of %s has changed (recorded at %s:%d); if the node was made again, remove the old key with `ssh-keygen -R %s -f %s`, otherwise someone may be intercepting the connection",
				host, ke.Want[0].Filename, ke.Want[0].Line, knownhosts.Normalize(host), file)
		}
		_, err = f.WriteString(knownhosts.Line([]string{knownhosts.Normalize(host)}, key) + "\n")
		return err
	}
}

// cutWriter passes writes on until cut, then drops them: the copying of
// a cancelled session's output can outlive Run, and must not reach the
// caller's writers once Run returned.
type cutWriter struct {
	mu  sync.Mutex
	w   io.Writer
	off bool
}

func (c *cutWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return len(p), nil
	}
	return c.w.Write(p)
}

func (c *cutWriter) cut() {
	c.mu.Lock()
	c.off = true
	c.mu.Unlock()
}
