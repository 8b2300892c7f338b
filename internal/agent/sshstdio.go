package agent

import (
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// `sky agent ssh-stdio` serves one SSH connection on stdin/stdout, as
// `sshd -i` does, for the node whose HOME this process has: the sessions
// run as that node's jobs do (see sshd.go). It is the far end of the
// ProxyCommand of `ssh <cluster>` on infrastructures whose nodes can be
// reached by a command but not dialled (ssh to a batch system's login
// node, then into the node's allocation). The node's host key is made on first use
// (--print-host-key prints its public half, for known_hosts).
func sshStdio(home string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sky agent ssh-stdio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	printKey := fs.Bool("print-host-key", false, "print the node's SSH host public key and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	h, err := newHomeSSH(home)
	if err != nil {
		fmt.Fprintf(stderr, "ssh-stdio: %v\n", err)
		return 1
	}
	if *printKey {
		_, _ = stdout.Write(gossh.MarshalAuthorizedKey(h.signer.PublicKey()))
		return 0
	}
	// One connection, so a missing config fails it at once, before the
	// client logs in.
	if _, err := loadConfig(h.p); err != nil {
		fmt.Fprintf(stderr, "ssh-stdio: this node has no agent config (%v); is the cluster up?\n", err)
		return 1
	}
	if err := h.lookUpUser(); err != nil {
		fmt.Fprintf(stderr, "ssh-stdio: %v\n", err)
		return 1
	}
	h.serveConn(&stdioConn{r: stdin, w: stdout})
	return 0
}

// stdioConn is a net.Conn over this process's stdin and stdout.
// Deadlines are accepted and ignored: the far side's ssh client and the
// transport under it (ssh, srun) bound the connection instead.
type stdioConn struct {
	r io.Reader
	w io.Writer
}

func (c *stdioConn) Read(b []byte) (int, error) { return c.r.Read(b) }
func (c *stdioConn) Write(b []byte) (int, error) {
	return c.w.Write(b)
}
func (c *stdioConn) Close() error {
	if cl, ok := c.r.(io.Closer); ok {
		_ = cl.Close()
	}
	if cl, ok := c.w.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

type stdioAddr struct{}

func (stdioAddr) Network() string { return "stdio" }
func (stdioAddr) String() string  { return "stdio" }

func (c *stdioConn) LocalAddr() net.Addr                { return stdioAddr{} }
func (c *stdioConn) RemoteAddr() net.Addr               { return stdioAddr{} }
func (c *stdioConn) SetDeadline(t time.Time) error      { return nil }
func (c *stdioConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *stdioConn) SetWriteDeadline(t time.Time) error { return nil }
