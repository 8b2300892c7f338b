package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A local node's jobs and SSH sessions run in a PID namespace of the
// node's own, with a procfs of that namespace mounted on /proc in their
// mount namespace (enterSandbox): `ls /proc` lists the node's processes
// only, and no /proc/<pid>/environ or /proc/<pid>/root of the API
// server, another node or another user's job is there to read.
//
// The namespace lives as long as its pid 1, `sky agent pid-init`, which
// the first sandboxed command of the node starts (nodePIDNS) and which
// only reaps orphans. Later commands are forked into the namespace by a
// thread that entered it (setns of the thread's pid_for_children), so the
// namespace is per node, not per command: every job and session of the
// node sees the others, as on a machine of its own. pid-init carries the
// node marker, so stopping or tearing the node down ends it with the
// rest, and with it anything left in the namespace.
//
// The agent itself stays outside: the head's agent starts the ranks and
// serves SSH for every node of its cluster, and a process may enter only
// the PID namespaces below its own, never a sibling's. The pids it
// records for ranks are this machine's, which its kills use.
//
// Joining a namespace later needs root (a non-root server's namespaces
// belong to user namespaces, which a multithreaded process cannot
// enter), so without root nodes share this machine's PID namespace, and
// `sky check` says so.

// PIDInitVerb is the `sky agent` verb of a node's pid 1.
const PIDInitVerb = "pid-init"

// PIDInitMain is `sky agent pid-init`: pid 1 of a local node's PID
// namespace. It reaps whatever is orphaned there; on SIGTERM (a stop) it
// exits once nothing else is left, so the node's processes keep the stop's
// grace; a SIGKILL ends it and the kernel kills the rest of the namespace.
func PIDInitMain() int {
	if os.Getpid() != 1 {
		fmt.Fprintf(os.Stderr, "sky agent %s runs as pid 1 of a new PID namespace; it is started by the node's sandbox\n", PIDInitVerb)
		return 2
	}
	sigs := make(chan os.Signal, 8)
	// Handled (not ignored), so they reach pid 1 at all and are reset for
	// any child.
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGUSR1, syscall.SIGUSR2)
	// Ready: whoever started it waits for its stdout to close.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		// Dup3: linux/arm64 has no dup2 system call.
		_ = syscall.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}
	stopping := false
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		reapAll()
		// kill(-1) reaches every process of the namespace but pid 1.
		if stopping && syscall.Kill(-1, 0) == syscall.ESRCH {
			return 0
		}
		select {
		case s := <-sigs:
			if s == syscall.SIGTERM || s == syscall.SIGINT || s == syscall.SIGHUP {
				if !stopping {
					stopping = true
					tick.Reset(20 * time.Millisecond)
				}
			}
		case <-tick.C:
		}
	}
}

func reapAll() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

var (
	pidnsOnce sync.Once
	pidnsErr  error
)

// PIDNamespaceAvailable reports whether local nodes get PID namespaces of
// their own here (computed once per process).
func PIDNamespaceAvailable() error {
	pidnsOnce.Do(func() { pidnsErr = probePIDNS() })
	return pidnsErr
}

func probePIDNS() error {
	if os.Getenv(EnvPIDNS) == "0" {
		return errors.New(EnvPIDNS + "=0 is set")
	}
	if os.Geteuid() != 0 {
		return errors.New("a PID namespace per node needs the API server to run as root")
	}
	if ownPIDNS < 0 {
		return errors.New("this process could not open its own PID namespace")
	}
	c := exec.Command("true")
	c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := c.Run(); err != nil {
		return fmt.Errorf("starting a process in a new PID namespace: %w", err)
	}
	return nil
}

// EnvPIDNS turns per-node PID namespaces off when "0" (the server's
// environment), as SKYGO_LOCAL_NETNS does for networks.
const EnvPIDNS = "SKYGO_LOCAL_PIDNS"

// DescribePIDNS is the line `sky check -v local` shows about processes.
func DescribePIDNS() string {
	if err := PIDNamespaceAvailable(); err != nil {
		return "jobs see every process of this machine in /proc, the API server's included (" + err.Error() + ")"
	}
	return "each node has its own PID namespace (a job's /proc lists only its node's processes)"
}

// ownPIDNS holds this process's PID namespace, for a thread that entered
// a node's to come back.
var ownPIDNS = func() int {
	fd, err := unix.Open("/proc/thread-self/ns/pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}()

// NodeInitFile records the host pid of the pid-init of the local node at
// home. It sits beside the cluster's directory, inside the ~/.sky the
// sandbox hides, so a job can neither read nor replace it.
func NodeInitFile(home string) string {
	home = filepath.Clean(home)
	return filepath.Dir(home) + ".pid1-" + filepath.Base(home)
}

// RemoveSandboxFiles removes what the sandbox keeps beside the directory
// of a local cluster being torn down.
func RemoveSandboxFiles(clusterDir string) {
	_ = os.Remove(SandboxVolumesFile(clusterDir))
	inits, _ := filepath.Glob(filepath.Clean(clusterDir) + ".pid1-*")
	for _, f := range inits {
		_ = os.Remove(f)
	}
}

// StartNode starts c, a command of the local node at home, in the
// node's network namespace at netns ("": the caller's) and, when c is
// the node's sandbox (SandboxCommand) and this machine allows it, in the
// node's PID namespace, which is made on first use.
func StartNode(c *exec.Cmd, home, netns string) error {
	if !isSandboxCommand(c) || PIDNamespaceAvailable() != nil {
		return StartIn(c, netns)
	}
	for attempt := 0; ; attempt++ {
		ns, err := nodePIDNS(c.Path, home)
		if err != nil {
			return fmt.Errorf("the PID namespace of node %s: %w", home, err)
		}
		err = inNamespaces(netns, ns, c.Start)
		ns.Close()
		// ENOMEM: the namespace's pid 1 died after it was looked up (a
		// stop); the next lookup starts a new one.
		if err == nil || attempt > 0 || !errors.Is(err, syscall.ENOMEM) {
			return err
		}
	}
}

func isSandboxCommand(c *exec.Cmd) bool {
	return len(c.Args) > 4 && c.Args[1] == "agent" && c.Args[2] == SandboxVerb
}

// inNamespaces runs f on a thread of its own whose new children are
// born in the network namespace at netns (unless "") and the PID
// namespace pidns. The thread is handed back to the runtime only once it
// is back in this process's namespaces; otherwise it stays locked and
// ends with its goroutine (see InNetNS).
func inNamespaces(netns string, pidns *os.File, f func() error) error {
	var netFD = -1
	if netns != "" {
		fd, err := unix.Open(netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("entering network namespace %s: %w", netns, err)
		}
		defer unix.Close(fd)
		netFD = fd
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if netFD >= 0 {
			if err := unix.Setns(netFD, unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				done <- fmt.Errorf("entering network namespace %s: %w", netns, err)
				return
			}
		}
		if err := unix.Setns(int(pidns.Fd()), unix.CLONE_NEWPID); err != nil {
			done <- fmt.Errorf("entering the node's PID namespace: %w", err)
			if netFD < 0 || (ownNetNS >= 0 && unix.Setns(ownNetNS, unix.CLONE_NEWNET) == nil) {
				runtime.UnlockOSThread()
			}
			return
		}
		done <- f()
		if unix.Setns(ownPIDNS, unix.CLONE_NEWPID) != nil {
			return
		}
		if netFD >= 0 && (ownNetNS < 0 || unix.Setns(ownNetNS, unix.CLONE_NEWNET) != nil) {
			return
		}
		runtime.UnlockOSThread()
	}()
	return <-done
}

var pidnsMu sync.Mutex

// nodePIDNS opens the PID namespace of the node at home, starting its
// pid-init (exe agent pid-init) when none runs. The file lock keeps the
// node's agent and its ranks' helpers from starting two.
func nodePIDNS(exe, home string) (*os.File, error) {
	pidnsMu.Lock()
	defer pidnsMu.Unlock()
	// A node torn down meanwhile (its directory gone) gets no new pid 1,
	// which nothing would end.
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the node's directory %s is gone (torn down?)", home)
	}
	path := NodeInitFile(home)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(f)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
		if ns, ok := openNodeInit(pid, home); ok {
			return ns, nil
		}
	}
	// pid-init is in the node's sandbox too: a job reads /proc/1/root,
	// which must not be this machine's root with the server's ~/.sky.
	c := SandboxCommand(exe, home, []string{exe, "agent", PIDInitVerb})
	c.Dir = "/"
	// The marker makes it one of the node's processes for stop and
	// teardown; nothing else of the server's environment goes in.
	c.Env = []string{EnvNode + "=" + filepath.Clean(home)}
	c.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
	// pid-init closes its stdout once it handles SIGTERM: a stop's
	// SIGTERM that came earlier, to a pid 1 without a handler, would be
	// dropped, and the node would wait for the SIGKILL.
	ready, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ready.Close()
	c.Stdout = w
	err = c.Start()
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("starting its pid 1: %w", err)
	}
	pid := c.Process.Pid
	go func() { _ = c.Wait() }()
	_ = ready.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.Copy(io.Discard, ready)
	ns, ok := openNodeInit(pid, home)
	if !ok {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return nil, fmt.Errorf("its pid 1 (%s agent %s) did not come up", exe, PIDInitVerb)
	}
	if _, err := f.Seek(0, io.SeekStart); err == nil {
		_ = f.Truncate(0)
		_, _ = f.WriteString(strconv.Itoa(pid) + "\n")
	}
	return ns, nil
}

// openNodeInit opens the PID namespace of pid when pid is the pid-init
// of the node at home: it carries the node's marker and is pid 1 of a
// namespace below this one. Checked again after the open, so a pid reused
// in between is not taken.
func openNodeInit(pid int, home string) (*os.File, bool) {
	if !isNodeInit(pid, home) {
		return nil, false
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return nil, false
	}
	if !isNodeInit(pid, home) {
		ns.Close()
		return nil, false
	}
	return ns, true
}

func isNodeInit(pid int, home string) bool {
	if pid <= 1 || !HasEnv(pid, EnvNode+"="+filepath.Clean(home)) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) == 2 && f[1] == "1"
		}
	}
	return false
}

// HasEnv reports whether process pid's environment holds the exact entry
// kv ("NAME=value"); false when it cannot be read (gone, or not ours).
func HasEnv(pid int, kv string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, e := range strings.Split(string(b), "\x00") {
		if e == kv {
			return true
		}
	}
	return false
}

// inChildPIDNS reports whether this process runs in a PID namespace below
// the one of the procfs on /proc: there its own pid differs from the one
// /proc/self names.
func inChildPIDNS() bool {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return false
	}
	return self != strconv.Itoa(os.Getpid())
}

// mountOwnProc replaces /proc, in this mount namespace, by a procfs of
// this process's PID namespace. The machine's procfs is detached first
// rather than covered, so that unmounting /proc uncovers nothing.
func mountOwnProc() error {
	if err := syscall.Unmount("/proc", syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching this machine's /proc: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the node's /proc: %w", err)
	}
	return nil
}

// RaiseOpenFiles raises this process's soft limit of open files to what a
// SkyPilot node gives its jobs, 1048576, or to the hard limit when that is
// lower; the processes it starts inherit it. Setting it explicitly also
// stops Go from handing children the limit this process started with.
func RaiseOpenFiles() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return
	}
	lim.Cur = min(uint64(1<<20), lim.Max)
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}
