package agent

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/proc"
)

// The head daemon's SSH server, for nodes that have no sshd of their own
// (the local infrastructure's: directories on this machine). A node with
// AgentSSHPort gets a listener on its own address; a session there runs
// as that node's jobs do: in its HOME, with its clean environment and
// SKYPILOT_* variables, inside its sandbox, carrying its marker (so
// `sky stop` and `sky down` end it with the node). Plain OpenSSH clients
// use it through the generated `ssh <cluster>` entries: shells with a
// pty, commands (scp -O, rsync), the sftp subsystem when this machine has
// sftp-server, and -L forwarding.
//
// Logins need the node's user name and a key in the node's
// ~/.ssh/authorized_keys, read at every attempt as sshd does; the host
// key is the cluster's, made on the daemon's first start.

// sshServer is the daemon's listeners, one per served node.
type sshServer struct {
	mu        sync.Mutex
	listeners []net.Listener
}

// sshNode is one served node.
type sshNode struct {
	d     *daemon
	index int
	node  agentapi.Node
	user  string
	conf  *gossh.ServerConfig
	// forSession, when set, is the node a session is served as, or why
	// it is refused: ssh-serve reads the node's config for each session,
	// since it may start before there is one (see homeSSH).
	forSession func() (*sshNode, string)
	// sessions are the session channels being served, so that a server
	// going away can let them hang up their programs first.
	sessions sync.WaitGroup
}

// newSSHNode serves node index of d's cluster to logins as user, with
// signer as the host key.
func newSSHNode(d *daemon, index int, node agentapi.Node, user string, signer gossh.Signer) *sshNode {
	sn := &sshNode{d: d, index: index, node: node, user: user}
	sn.conf = &gossh.ServerConfig{PublicKeyCallback: sn.authorize, ServerVersion: "SSH-2.0-SkyGo_agent"}
	sn.conf.AddHostKey(signer)
	return sn
}

// servedSSHNodes are the nodes this daemon serves SSH for: those with a
// port that run on this machine.
func servedSSHNodes(c *agentapi.Config) []int {
	var out []int
	for i, n := range c.Nodes {
		if n.AgentSSHPort > 0 && (i == c.NodeIndex || n.Transport == "" || n.Transport == agentapi.TransportLocal) {
			out = append(out, i)
		}
	}
	return out
}

// startSSH opens the listeners. A node whose port cannot be had is
// skipped with the error returned; the others are served.
func (d *daemon) startSSH() error {
	nodes := servedSSHNodes(d.cfg)
	if len(nodes) == 0 {
		return nil
	}
	signer, err := loadHostKey(d.p, true)
	if err != nil {
		return fmt.Errorf("ssh host key: %w", err)
	}
	u, err := user.Current()
	if err != nil {
		return fmt.Errorf("ssh: who runs this node: %w", err)
	}
	var errs []error
	for _, i := range nodes {
		n := d.cfg.Nodes[i]
		addr := net.JoinHostPort(n.IP, strconv.Itoa(n.AgentSSHPort))
		// A node with a network namespace of its own has its address
		// there only; the socket made inside stays there.
		var l net.Listener
		err := proc.InNetNS(proc.NetNSPath(n.NetNS), func() (err error) {
			l, err = net.Listen("tcp", addr)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("ssh for node %d: %w", i, err))
			continue
		}
		sn := newSSHNode(d, i, n, u.Username, signer)
		d.ssh.mu.Lock()
		d.ssh.listeners = append(d.ssh.listeners, l)
		d.ssh.mu.Unlock()
		go acceptLoop(l, func(c net.Conn) { go sn.serveConn(c) })
	}
	return errors.Join(errs...)
}

func (s *sshServer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.listeners {
		l.Close()
	}
	s.listeners = nil
}

// hostKeyPath is the cluster's SSH host key, in the head's agent
// directory; the public key is beside it (.pub), for the known_hosts of
// the generated entries.
func (p paths) hostKeyPath() string { return filepath.Join(p.dir(), "ssh_host_ed25519_key") }

// loadHostKey reads the host key, making it first when create is set and
// there is none. Several processes of one node may make it at once (the
// daemon and concurrent `ssh-serve` starts): each writes its key to a
// file of its own and links it into place, so exactly one key wins and
// every process, winner or not, serves that one.
func loadHostKey(p paths, create bool) (gossh.Signer, error) {
	b, err := os.ReadFile(p.hostKeyPath())
	if err == nil {
		return gossh.ParsePrivateKey(b)
	}
	if !errors.Is(err, os.ErrNotExist) || !create {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}
	tmp, err := writeTemp(p.hostKeyPath(), pem.EncodeToMemory(block), 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p.hostKeyPath()); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	// Ours or the one that was linked first: the file decides.
	if b, err = os.ReadFile(p.hostKeyPath()); err != nil {
		return nil, err
	}
	signer, err := gossh.ParsePrivateKey(b)
	if err != nil {
		return nil, err
	}
	// The public half beside it, for readers that want only that; the
	// same bytes whoever writes them.
	if err := writeFileAtomic(p.hostKeyPath()+".pub", gossh.MarshalAuthorizedKey(signer.PublicKey()), 0o600); err != nil {
		return nil, err
	}
	return signer, nil
}

// HostPublicKey is the SSH host key of the daemon at the head whose HOME
// is home, in authorized_keys form ("ssh-ed25519 AAAA..."), or an error
// when the daemon has not made one yet.
func HostPublicKey(home string) (string, error) {
	// From the private key, not the .pub beside it: the key is linked into
	// place before its public half is written.
	signer, err := loadHostKey(paths{home}, false)
	if err != nil {
		return "", fmt.Errorf("the node agent has no SSH host key yet: %w", err)
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(signer.PublicKey()))), nil
}

func (n *sshNode) authorize(meta gossh.ConnMetadata, key gossh.PublicKey) (*gossh.Permissions, error) {
	if meta.User() != n.user {
		return nil, fmt.Errorf("user %q: this node's user is %s", meta.User(), n.user)
	}
	b, err := os.ReadFile(filepath.Join(n.node.Home, ".ssh", "authorized_keys"))
	if err != nil {
		return nil, err
	}
	want := key.Marshal()
	for len(b) > 0 {
		k, _, opts, rest, err := gossh.ParseAuthorizedKey(b)
		if err != nil {
			break
		}
		// A key with options (command=, from=, ...) would need them
		// enforced; it is not one SkyGo wrote, so it does not log in.
		if len(opts) == 0 && bytes.Equal(k.Marshal(), want) {
			return &gossh.Permissions{}, nil
		}
		b = rest
	}
	return nil, errors.New("public key not in the node's authorized_keys")
}

// acceptLoop hands each connection l accepts to handle, until l is
// closed.
func acceptLoop(l net.Listener, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		handle(c)
	}
}

func (n *sshNode) serveConn(c net.Conn) {
	// A client that never finishes the handshake must not hold a goroutine.
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	sc, chans, reqs, err := gossh.NewServerConn(c, n.conf)
	if err != nil {
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	defer sc.Close()
	go gossh.DiscardRequests(reqs)
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			sn := n
			if n.forSession != nil {
				var why string
				if sn, why = n.forSession(); why != "" {
					_ = nc.Reject(gossh.Prohibited, why)
					continue
				}
			}
			n.sessions.Add(1)
			go func() {
				defer n.sessions.Done()
				sn.session(sc, nc)
			}()
		case "direct-tcpip":
			go directTCPIP(nc)
		default:
			_ = nc.Reject(gossh.UnknownChannelType, "only session and direct-tcpip channels are served")
		}
	}
}

// Request payloads (RFC 4254).
type (
	ptyRequest struct {
		Term          string
		Cols, Rows    uint32
		Width, Height uint32
		Modes         string
	}
	windowChange struct {
		Cols, Rows    uint32
		Width, Height uint32
	}
	execRequest      struct{ Command string }
	subsystemRequest struct{ Name string }
	signalRequest    struct{ Signal string }
	exitStatus       struct{ Status uint32 }
	exitSignal       struct {
		Signal     string
		CoreDumped bool
		Message    string
		Lang       string
	}
	directTCPIPRequest struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
)

// session is one session channel: at most one program, with or without
// a pty.
type session struct {
	n    *sshNode
	conn *gossh.ServerConn
	ch   gossh.Channel

	mu      sync.Mutex
	pty     *ptyRequest
	master  *os.File
	cmd     *exec.Cmd
	started bool
	done    chan struct{}
	// replied is closed once the request that started the program was
	// answered. A program that ends at once (`kill -9 $$`) must not have
	// its exit status sent and the channel closed before that answer:
	// the client would see the channel close instead of the reply.
	replied chan struct{}
}

func (n *sshNode) session(conn *gossh.ServerConn, nc gossh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	n.d.sshSessionStarted()
	defer n.d.sshSessionEnded()
	s := &session{n: n, conn: conn, ch: ch, done: make(chan struct{}), replied: make(chan struct{})}
	var replied sync.Once
	defer replied.Do(func() { close(s.replied) })
	for req := range reqs {
		ok := false
		switch req.Type {
		case "pty-req":
			var p ptyRequest
			if gossh.Unmarshal(req.Payload, &p) == nil {
				s.mu.Lock()
				if !s.started {
					s.pty, ok = &p, true
				}
				s.mu.Unlock()
			}
		case "window-change":
			var w windowChange
			if gossh.Unmarshal(req.Payload, &w) == nil {
				s.mu.Lock()
				if s.master != nil {
					ok = setWinsize(s.master, w.Cols, w.Rows) == nil
				} else if s.pty != nil {
					s.pty.Cols, s.pty.Rows, ok = w.Cols, w.Rows, true
				}
				s.mu.Unlock()
			}
		case "shell":
			ok = s.start([]string{"/bin/bash", "-l"}) == nil
		case "exec":
			var e execRequest
			if gossh.Unmarshal(req.Payload, &e) == nil {
				ok = s.start([]string{"/bin/bash", "-c", e.Command}) == nil
			}
		case "subsystem":
			var sub subsystemRequest
			if gossh.Unmarshal(req.Payload, &sub) == nil && sub.Name == "sftp" {
				if path := sftpServer(); path != "" {
					ok = s.start([]string{path}) == nil
				}
			}
		case "signal":
			var sig signalRequest
			if gossh.Unmarshal(req.Payload, &sig) == nil {
				ok = s.signal(sig.Signal)
			}
		}
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if started {
			replied.Do(func() { close(s.replied) })
		}
	}
	// The client closed the channel: a program still running is hung up
	// on, as sshd does when a connection drops.
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started {
		select {
		case <-s.done:
		default:
			s.signal("HUP")
		}
	}
	ch.Close()
}

// sftpServer is OpenSSH's sftp-server on this machine, "" when there is
// none (then `sftp` and the sftp mode of scp are refused, and `scp -O`
// still works over exec).
func sftpServer() string {
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server", "/usr/lib/ssh/sftp-server"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// env is the session's environment: the node's clean environment and
// the SKYPILOT_* variables its jobs see, plus what sshd sets.
func (s *session) env() []string {
	d, n := s.n.d, s.n.node
	env := proc.NodeEnv(os.Environ(), n.Home, n.IP)
	if base, _, ok := rankBase(n.Home, os.Environ()); ok {
		// On a node inside an infrastructure's own unit (a batch job's
		// step serving ssh-stdio) a session sees what ranks see: the
		// node's environment as the infrastructure adapts it for ranks.
		env = append(withoutKeys(base, "HOME", "PWD", "OLDPWD"), "HOME="+n.Home)
	}
	ips := make([]string, len(d.cfg.Nodes))
	for i, node := range d.cfg.Nodes {
		ips[i] = node.IP
	}
	gpus := 0.0
	for _, c := range n.GPUs {
		gpus += c
	}
	env = append(env,
		"SHELL=/bin/bash",
		"SKYPILOT_CLUSTER_INFO="+clusterInfoJSON(d.cfg),
		"SKYPILOT_NODE_RANK="+strconv.Itoa(s.n.index),
		"SKYPILOT_NODE_IPS="+strings.Join(ips, "\n"),
		"SKYPILOT_NUM_NODES="+strconv.Itoa(len(d.cfg.Nodes)),
		"SKYPILOT_NUM_GPUS_PER_NODE="+strconv.Itoa(int(gpus)),
	)
	// sshd's variables; bash sources ~/.bashrc for `ssh host cmd` when it
	// sees SSH_CLIENT, as on any machine.
	if ra, ok := s.conn.RemoteAddr().(*net.TCPAddr); ok {
		if la, ok := s.conn.LocalAddr().(*net.TCPAddr); ok {
			env = append(env,
				fmt.Sprintf("SSH_CLIENT=%s %d %d", ra.IP, ra.Port, la.Port),
				fmt.Sprintf("SSH_CONNECTION=%s %d %s %d", ra.IP, ra.Port, la.IP, la.Port))
		}
	}
	return env
}

// start runs argv for the session; the session's channel carries its
// input and output and, once it ends, its exit status.
func (s *session) start(argv []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("a program already runs in this session")
	}
	home := s.n.node.Home
	cmd := nodeCommand(home, argv)
	cmd.Dir = home
	cmd.Env = s.env()
	var outs []*os.File // what the session copies to the client, stdout first
	var closeAfterStart []*os.File
	if s.pty != nil {
		master, slave, err := openPty()
		if err != nil {
			return err
		}
		_ = setWinsize(master, s.pty.Cols, s.pty.Rows)
		term := s.pty.Term
		if term == "" {
			term = "xterm"
		}
		cmd.Env = append(cmd.Env, "TERM="+term, "SSH_TTY="+slave.Name())
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, 0
		closeAfterStart = append(closeAfterStart, slave)
		s.master = master
		outs = append(outs, master)
	} else {
		inR, inW, err := os.Pipe()
		if err != nil {
			return err
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			inR.Close()
			inW.Close()
			return err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			for _, f := range []*os.File{inR, inW, outR, outW} {
				f.Close()
			}
			return err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		closeAfterStart = append(closeAfterStart, inR, outW, errW)
		outs = append(outs, outR, errR)
		go func() {
			_, _ = io.Copy(inW, s.ch)
			inW.Close()
		}()
	}
	err := proc.StartNode(cmd, home, proc.NetNSPath(s.n.node.NetNS))
	for _, f := range closeAfterStart {
		f.Close()
	}
	if err != nil {
		for _, f := range outs {
			f.Close()
		}
		s.master = nil
		return err
	}
	s.started, s.cmd = true, cmd
	if s.master != nil {
		go func() { _, _ = io.Copy(s.master, s.ch) }()
	}
	go s.wait(outs)
	return nil
}

// outputGrace is how long a session's output is still read once its
// program exited while something it left in the background keeps the
// output open; sshd would wait for that forever.
const outputGrace = time.Second

func (s *session) wait(outs []*os.File) {
	exited := make(chan struct{})
	var wg sync.WaitGroup
	for i, f := range outs {
		var w io.Writer = s.ch
		if i == 1 {
			w = s.ch.Stderr()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			drainOutput(w, f, exited)
		}()
	}
	err := s.cmd.Wait()
	close(exited)
	for _, f := range outs {
		_ = f.SetReadDeadline(time.Now().Add(outputGrace))
	}
	wg.Wait()
	for _, f := range outs {
		f.Close()
	}
	close(s.done)
	<-s.replied
	_ = s.ch.CloseWrite()
	st := s.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		_, _ = s.ch.SendRequest("exit-signal", false, gossh.Marshal(exitSignal{Signal: signalName(ws.Signal()), CoreDumped: ws.CoreDump()}))
	} else {
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = 255
		}
		_, _ = s.ch.SendRequest("exit-status", false, gossh.Marshal(exitStatus{Status: uint32(code)}))
	}
	_ = s.ch.Close()
}

// drainOutput copies src to dst until EOF (for a pty: EIO, once every
// holder of the terminal is gone). Once exited is closed, every read gets
// outputGrace: data still flowing is copied, a pipe that stays open and
// silent is given up on.
func drainOutput(dst io.Writer, src *os.File, exited <-chan struct{}) {
	buf := make([]byte, 32<<10)
	after := false
	for {
		if !after {
			select {
			case <-exited:
				after = true
			default:
			}
		}
		if after {
			_ = src.SetReadDeadline(time.Now().Add(outputGrace))
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !after {
				continue // the deadline the waiter set at exit; count from now
			}
			return
		}
	}
}

var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

func signalName(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return name
		}
	}
	return "KILL"
}

// signal delivers a client's signal to the session's process group.
func (s *session) signal(name string) bool {
	sig, ok := signals[name]
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if !ok || cmd == nil || cmd.Process == nil {
		return false
	}
	return syscall.Kill(-cmd.Process.Pid, sig) == nil
}

// directTCPIP is `ssh -L`: a connection from the client to an address the
// node reaches (VS Code's remote server, a notebook).
func directTCPIP(nc gossh.NewChannel) {
	var r directTCPIPRequest
	if err := gossh.Unmarshal(nc.ExtraData(), &r); err != nil {
		_ = nc.Reject(gossh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port))), 10*time.Second)
	if err != nil {
		_ = nc.Reject(gossh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		c.Close()
		return
	}
	go gossh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(c, ch)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(ch, c)
		_ = ch.CloseWrite()
	}()
	wg.Wait()
	c.Close()
	ch.Close()
}

// sshSessionStarted and sshSessionEnded keep autostop's jobs_and_ssh
// idle timer from running while someone is logged in.
func (d *daemon) sshSessionStarted() {
	d.mu.Lock()
	d.sshSessions++
	d.lastActivity = time.Now()
	d.mu.Unlock()
}

func (d *daemon) sshSessionEnded() {
	d.mu.Lock()
	d.sshSessions--
	d.lastActivity = time.Now()
	d.mu.Unlock()
}

// withoutKeys is env without the named variables.
func withoutKeys(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(keys, k) {
			out = append(out, kv)
		}
	}
	return out
}
