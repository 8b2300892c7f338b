package ssh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// FailureKind classifies why a host could not be reached.
type FailureKind string

// Failure kinds, as shown in DialError messages.
const (
	Unreachable    FailureKind = "unreachable"
	Timeout        FailureKind = "timeout"
	AuthFailed     FailureKind = "auth failed"
	HostKeyChanged FailureKind = "host key changed"
	BadCredentials FailureKind = "unusable credentials"
)

// DialError says which host could not be reached and why.
type DialError struct {
	Host string // Endpoint.String()
	Kind FailureKind
	Err  error
}

func (e *DialError) Error() string {
	hint := ""
	switch e.Kind {
	case Unreachable:
		hint = "; check that the host is up, the address and port are right and sshd is running"
	case Timeout:
		hint = "; the host did not answer in time (down, firewalled or overloaded?)"
	case AuthFailed:
		hint = "; check user, identity_file or password in ~/.sky/ssh_node_pools.yaml and the host's authorized_keys"
	}
	return fmt.Sprintf("ssh to %s: %s: %v%s", e.Host, e.Kind, e.Err, hint)
}

func (e *DialError) Unwrap() error { return e.Err }

// Dialer keeps one multiplexed SSH connection per endpoint and hands it
// to every command for that host, so a command costs one channel open
// instead of a TCP + key exchange + auth handshake. A keepalive closes
// connections whose peer stopped answering; the next Client call dials
// again. Safe for concurrent use.
type Dialer struct {
	KnownHosts *KnownHosts
	// ConnectTimeout bounds TCP connect plus handshake (default 10 s).
	ConnectTimeout time.Duration
	// KeepAlive is the keepalive interval (default 3 s); a connection is
	// dropped after KeepAliveMax (default 3) unanswered keepalives, so a
	// host that dropped off the network fails its commands within 10-15 s
	// (the agent's own SSH transport allows 9 s) instead of holding them
	// for a minute.
	KeepAlive    time.Duration
	KeepAliveMax int
	// MaxSessions caps concurrent commands per host (default 8): sshd
	// refuses channels beyond its MaxSessions (10 unless configured), and
	// two slots stay free for the kill sessions of cancelled commands.
	MaxSessions int
	Log         *slog.Logger

	mu      sync.Mutex
	entries map[string]*connEntry
}

type connEntry struct {
	sem    chan struct{} // one token per running command
	mu     sync.Mutex    // held while dialling, so one dial per host at a time
	client *gossh.Client
	done   chan struct{} // closed when client is gone
}

// NewDialer returns a Dialer checking host keys with kh.
func NewDialer(kh *KnownHosts) *Dialer {
	return &Dialer{KnownHosts: kh}
}

func (d *Dialer) logger() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

func (d *Dialer) entry(ep Endpoint) *connEntry {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.entries == nil {
		d.entries = map[string]*connEntry{}
	}
	e := d.entries[ep.key()]
	if e == nil {
		n := d.MaxSessions
		if n <= 0 {
			n = 8
		}
		e = &connEntry{sem: make(chan struct{}, n)}
		d.entries[ep.key()] = e
	}
	return e
}

// slot waits for a free session slot on ep's connection; the caller runs
// release when its session is closed.
func (d *Dialer) slot(ctx context.Context, ep Endpoint) (release func(), err error) {
	e := d.entry(ep)
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// alive says whether the cached connection to ep is still up.
func (d *Dialer) alive(ep Endpoint) bool {
	e := d.entry(ep)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client == nil {
		return false
	}
	select {
	case <-e.done:
		return false
	default:
		return true
	}
}

// Client returns the cached connection to ep, dialling when there is none
// or the cached one died.
func (d *Dialer) Client(ctx context.Context, ep Endpoint) (*gossh.Client, error) {
	e := d.entry(ep)

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		select {
		case <-e.done:
			e.client = nil
		default:
			return e.client, nil
		}
	}
	c, err := d.dial(ctx, ep)
	if err != nil {
		return nil, err
	}
	e.client, e.done = c, make(chan struct{})
	go d.watch(ep, c, e.done)
	return c, nil
}

// Forget closes and drops the cached connection to ep (after a failure
// that suggests it is broken).
func (d *Dialer) Forget(ep Endpoint) {
	d.mu.Lock()
	e := d.entries[ep.key()]
	d.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	if e.client != nil {
		e.client.Close()
		e.client = nil
	}
	e.mu.Unlock()
}

// Close closes every cached connection.
func (d *Dialer) Close() error {
	d.mu.Lock()
	entries := d.entries
	d.entries = nil
	d.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		if e.client != nil {
			e.client.Close()
			e.client = nil
		}
		e.mu.Unlock()
	}
	return nil
}

// watch sends keepalives until the connection ends, and closes it after
// KeepAliveMax unanswered ones so that callers stop waiting on a dead
// peer.
func (d *Dialer) watch(ep Endpoint, c *gossh.Client, done chan struct{}) {
	ended := make(chan struct{})
	go func() { c.Wait(); close(ended) }()
	interval := d.KeepAlive
	if interval <= 0 {
		interval = 3 * time.Second
	}
	maxMissed := d.KeepAliveMax
	if maxMissed <= 0 {
		maxMissed = 3
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-ended:
			close(done)
			return
		case <-t.C:
			reply := make(chan error, 1)
			go func() {
				_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
				reply <- err
			}()
			select {
			case err := <-reply:
				if err != nil {
					missed = maxMissed
				} else {
					missed = 0
				}
			case <-time.After(interval):
				missed++
			case <-ended:
			}
			if missed >= maxMissed {
				d.logger().Warn("ssh connection lost", "host", ep.String(), "missed_keepalives", missed)
				c.Close()
			}
		}
	}
}

func (d *Dialer) dial(ctx context.Context, ep Endpoint) (*gossh.Client, error) {
	timeout := d.ConnectTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	auth, err := authMethods(ep)
	if err != nil {
		return nil, &DialError{Host: ep.String(), Kind: BadCredentials, Err: err}
	}
	cfg := &gossh.ClientConfig{
		User:    ep.User,
		Auth:    auth,
		Timeout: timeout,
	}
	if d.KnownHosts != nil {
		cfg.HostKeyCallback = d.KnownHosts.Callback()
		cfg.HostKeyAlgorithms = d.KnownHosts.Algorithms(ep.HostPort())
	} else {
		return nil, &DialError{Host: ep.String(), Kind: BadCredentials, Err: errors.New("no known_hosts configured (refusing to skip host key checks)")}
	}

	var conn net.Conn
	if len(ep.Jumps) > 0 {
		last := len(ep.Jumps) - 1
		hop := ep.Jumps[last]
		hop.Jumps = ep.Jumps[:last]
		jc, err := d.Client(ctx, hop)
		if err != nil {
			return nil, fmt.Errorf("reaching %s through jump host: %w", ep.Name, err)
		}
		conn, err = jc.DialContext(ctx, "tcp", ep.HostPort())
		if err != nil {
			return nil, d.classify(ctx, ep, err)
		}
	} else if ep.ProxyCommand != "" {
		conn, err = dialProxyCommand(ep)
		if err != nil {
			return nil, &DialError{Host: ep.String(), Kind: Unreachable, Err: err}
		}
	} else {
		var nd net.Dialer
		conn, err = nd.DialContext(ctx, "tcp", ep.HostPort())
		if err != nil {
			return nil, d.classify(ctx, ep, err)
		}
	}
	// The handshake has no context: bound it with a deadline, and close
	// the socket if ctx ends first.
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	sc, chans, reqs, err := gossh.NewClientConn(conn, ep.HostPort(), cfg)
	stop()
	if err != nil {
		conn.Close()
		return nil, d.classify(ctx, ep, err)
	}
	conn.SetDeadline(time.Time{})
	return gossh.NewClient(sc, chans, reqs), nil
}

func (d *Dialer) classify(ctx context.Context, ep Endpoint, err error) error {
	var hk *HostKeyChangedError
	var ne net.Error
	switch {
	case errors.As(err, &hk):
		return &DialError{Host: ep.String(), Kind: HostKeyChanged, Err: hk}
	case strings.Contains(err.Error(), "unable to authenticate"):
		return &DialError{Host: ep.String(), Kind: AuthFailed, Err: err}
	case ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return &DialError{Host: ep.String(), Kind: Timeout, Err: err}
	default:
		return &DialError{Host: ep.String(), Kind: Unreachable, Err: err}
	}
}

// authMethods builds the client's auth from key files and password.
// Passphrase-protected keys are skipped with an error only if nothing
// else is usable: we never prompt.
func authMethods(ep Endpoint) ([]gossh.AuthMethod, error) {
	var signers []gossh.Signer
	var problems []string
	for _, f := range ep.IdentityFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			problems = append(problems, fmt.Sprintf("identity file %s: %v", f, err))
			continue
		}
		s, err := gossh.ParsePrivateKey(b)
		if err != nil {
			var pp *gossh.PassphraseMissingError
			if errors.As(err, &pp) {
				problems = append(problems, fmt.Sprintf("identity file %s is passphrase-protected; use a key without passphrase or a password", f))
			} else {
				problems = append(problems, fmt.Sprintf("identity file %s: %v", f, err))
			}
			continue
		}
		signers = append(signers, s)
	}
	var methods []gossh.AuthMethod
	if len(signers) > 0 {
		methods = append(methods, gossh.PublicKeys(signers...))
	}
	if ep.Password != "" {
		pw := ep.Password
		methods = append(methods, gossh.Password(pw),
			gossh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range answers {
					answers[i] = pw
				}
				return answers, nil
			}))
	}
	if len(methods) == 0 {
		if len(problems) == 0 {
			problems = append(problems, "no identity_file or password given and no ~/.ssh/id_* key found")
		}
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return methods, nil
}
