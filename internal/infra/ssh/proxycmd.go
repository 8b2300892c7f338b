package ssh

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dialProxyCommand starts ep.ProxyCommand with sh, as OpenSSH does, and
// returns a connection over its stdin and stdout. Closing the connection
// ends the command.
func dialProxyCommand(ep Endpoint) (net.Conn, error) {
	cmdline := expandProxyTokens(ep.ProxyCommand, ep)
	c := exec.Command("/bin/sh", "-c", "exec "+cmdline)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr tail
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("starting ProxyCommand: %w", err)
	}
	pc := &proxyConn{cmd: c, r: stdout, w: stdin, stderr: &stderr, done: make(chan struct{})}
	go func() { _ = c.Wait(); close(pc.done) }()
	return pc, nil
}

// expandProxyTokens replaces %h, %p, %r and %% as OpenSSH does.
func expandProxyTokens(s string, ep Endpoint) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'h':
			b.WriteString(ep.Addr)
		case 'p':
			b.WriteString(strconv.Itoa(ep.Port))
		case 'r':
			b.WriteString(ep.User)
		case 'n':
			b.WriteString(ep.Name)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// tail keeps the last bytes a ProxyCommand wrote to stderr, for errors.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

// proxyConn is a net.Conn over a command's pipes. Deadlines are not
// supported by pipes of a child; the handshake is bounded by closing the
// connection instead (see Dialer.dial).
type proxyConn struct {
	cmd    *exec.Cmd
	r      io.ReadCloser
	w      io.WriteCloser
	stderr *tail
	done   chan struct{}
}

func (p *proxyConn) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err == io.EOF {
		select {
		case <-p.done:
			if msg := strings.TrimSpace(string(p.stderr.b)); msg != "" {
				return n, fmt.Errorf("ProxyCommand ended: %s", msg)
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	return n, err
}

func (p *proxyConn) Write(b []byte) (int, error) { return p.w.Write(b) }

func (p *proxyConn) Close() error {
	p.w.Close()
	p.r.Close()
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	return nil
}

type proxyAddr string

func (a proxyAddr) Network() string { return "proxycommand" }
func (a proxyAddr) String() string  { return string(a) }

func (p *proxyConn) LocalAddr() net.Addr              { return proxyAddr("local") }
func (p *proxyConn) RemoteAddr() net.Addr             { return proxyAddr(p.cmd.String()) }
func (p *proxyConn) SetDeadline(time.Time) error      { return nil }
func (p *proxyConn) SetReadDeadline(time.Time) error  { return nil }
func (p *proxyConn) SetWriteDeadline(time.Time) error { return nil }
