package agent

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// `sky agent ssh-serve --listen HOST:PORT [--detach]` serves SSH for the
// node whose HOME this process has on a TCP listener: ssh-stdio's
// sessions, for nodes that can dial each other but have no sshd and no
// ssh client (containers: the head's agent reaches each worker's server
// with transport agent-ssh). The backend starts it with the node,
// before `sky agent start` has written the node's config, so the config
// is read for every connection (homeSSH.node). One server runs per node
// HOME (a lock in the agent directory), and it stops when that directory
// is removed, so a torn-down node keeps no server.

func (p paths) sshServeLock() string      { return filepath.Join(p.dir(), "ssh-serve.lock") }
func (p paths) sshServePid() string       { return filepath.Join(p.dir(), "ssh-serve.pid") }
func (p paths) sshServeLog() string       { return filepath.Join(p.dir(), "ssh-serve.log") }
func (p paths) sshServeStartLock() string { return filepath.Join(p.dir(), "ssh-serve.start.lock") }

// envServeLockFD names, in the environment of a server that --detach
// started, the descriptor of the server lock its starter took and handed
// on: the lock is never free while a server starts, so a concurrent start
// cannot start a second one.
const envServeLockFD = "SKYGO_SSH_SERVE_LOCK_FD"

// sshServeStartWait bounds how long --detach waits for its server to
// listen.
const sshServeStartWait = 15 * time.Second

func sshServe(ctx context.Context, home string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sky agent ssh-serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "HOST:PORT to serve SSH on (the node's IP and a port)")
	detach := fs.Bool("detach", false, "start a background server unless one runs, wait until it listens, and exit")
	printKey := fs.Bool("print-host-key", false, "print the node's SSH host public key and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ssh-serve: unexpected arguments %q\n", fs.Args())
		return 2
	}
	h, err := newHomeSSH(home)
	if err != nil {
		fmt.Fprintf(stderr, "ssh-serve: %v\n", err)
		return 1
	}
	if *printKey {
		_, _ = stdout.Write(gossh.MarshalAuthorizedKey(h.signer.PublicKey()))
		return 0
	}
	if *listen == "" {
		fmt.Fprintln(stderr, "ssh-serve: --listen HOST:PORT is required (the node's IP and a free port)")
		return 2
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		fmt.Fprintf(stderr, "ssh-serve: --listen %q: want HOST:PORT, e.g. the node's IP and a free port (%v)\n", *listen, err)
		return 2
	}
	if *detach {
		err = detachSSHServe(h.p, *listen)
	} else {
		err = h.listenAndServe(ctx, *listen, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ssh-serve: %v\n", err)
		return 1
	}
	return 0
}

// detachSSHServe starts a server in its own session unless one runs, and
// returns once it listens. Starts are serialized by the start lock, so a
// start that finds the server lock held finds a server that listens.
func detachSSHServe(p paths, addr string) error {
	start, err := lockPath(p.sshServeStartLock(), syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer start.Close()
	lock, err := os.OpenFile(p.sshServeLock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil // a server runs
	}
	// No server holds the lock, so a pid file is a dead one's.
	_ = os.Remove(p.sshServePid())
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(p.sshServeLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(exe, "agent", "ssh-serve", "--listen", addr)
	cmd.Dir = p.home
	cmd.Env = append(withoutKeys(os.Environ(), "HOME", envServeLockFD), "HOME="+p.home, envServeLockFD+"=3")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{lock} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the SSH server: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(sshServeStartWait); time.Now().Before(deadline); {
		if readPid(p.sshServePid()) == pid {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the SSH server exited at start (%v); see %s:\n%s", err, p.sshServeLog(), lastLines(p.sshServeLog(), 10))
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("the SSH server (pid %d) did not listen on %s within %s; see %s", pid, addr, sshServeStartWait, p.sshServeLog())
}

// listenAndServe serves on addr until ctx ends, a signal comes, or the
// node's agent directory is removed; it logs to logw.
func (h *homeSSH) listenAndServe(ctx context.Context, addr string, logw io.Writer) error {
	if err := h.lookUpUser(); err != nil {
		return err
	}
	lock, started, err := h.serveLock()
	if err != nil {
		return err
	}
	defer lock.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		started()
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	defer l.Close()
	err = writeFileAtomic(h.p.sshServePid(), []byte(strconv.Itoa(os.Getpid())), 0o600)
	started()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logw, nil)).With("component", "ssh-serve")
	log.Info("serving SSH", "addr", l.Addr().String(), "pid", os.Getpid(), "home", h.p.home)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	var gone atomic.Bool
	go watchReplaced(ctx, h.p.sshServeLock(), lock, func() {
		log.Info("the node's agent directory was removed or replaced; stopping", "lock", h.p.sshServeLock())
		gone.Store(true)
		stop()
	})
	go func() {
		<-ctx.Done()
		l.Close()
	}()

	var mu sync.Mutex
	var wg sync.WaitGroup
	conns := map[net.Conn]bool{}
	acceptLoop(l, func(c net.Conn) {
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.serveConn(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		}()
	})
	// The listener is closed: end the connections, whose sessions hang up
	// their programs as they would on a dropped connection.
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	if !gone.Load() {
		// The pid file is this server's only while its directory is.
		_ = os.Remove(h.p.sshServePid())
	}
	log.Info("stopped")
	return nil
}

// serveLock is this server's hold on the server lock, and started, to
// call once it listens (or failed to). A server --detach started was
// handed the lock (envServeLockFD); one started in the foreground takes
// it under the start lock, so that a --detach meanwhile waits until it
// listens instead of taking it for ready before then.
func (h *homeSSH) serveLock() (lock *os.File, started func(), err error) {
	if s := os.Getenv(envServeLockFD); s != "" {
		_ = os.Unsetenv(envServeLockFD)
		fd, err := strconv.Atoi(s)
		if err != nil {
			return nil, nil, fmt.Errorf("%s=%q is not a descriptor", envServeLockFD, s)
		}
		// The sessions' programs must not inherit it: one left running
		// would keep the node "served" after this server died.
		syscall.CloseOnExec(fd)
		lock := os.NewFile(uintptr(fd), h.p.sshServeLock())
		// Locking again what the descriptor holds succeeds at once; any
		// other answer means it is not the lock.
		if lock == nil || syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			return nil, nil, fmt.Errorf("descriptor %d handed over in %s is not the server lock %s", fd, envServeLockFD, h.p.sshServeLock())
		}
		return lock, func() {}, nil
	}
	if err := os.MkdirAll(h.p.dir(), 0o700); err != nil {
		return nil, nil, err
	}
	start, err := lockPath(h.p.sshServeStartLock(), syscall.LOCK_EX)
	if err != nil {
		return nil, nil, err
	}
	lock, err = os.OpenFile(h.p.sshServeLock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		start.Close()
		return nil, nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		start.Close()
		return nil, nil, fmt.Errorf("another SSH server (pid %d, see %s) serves this node already; it stops when %s is removed", readPid(h.p.sshServePid()), h.p.sshServePid(), h.p.dir())
	}
	return lock, func() { start.Close() }, nil
}

// lockPath opens (making it) and flocks the file at path; closing the
// file releases the lock.
func lockPath(path string, how int) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// readPid is the pid in a pid file, 0 when there is none.
func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}
