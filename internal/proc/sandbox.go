package proc

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// A local node's HOME lives inside the server's own ~/.sky
// (~/.sky/skygo/local/clusters/<c>/node-N), next to the state database,
// the API tokens and config.yaml with its credentials. A job on a local
// node runs as the same Unix user as the server, so file permissions do
// not keep it out; a mount namespace does. Sandboxed, a job's process
// sees an empty read-only tmpfs over that ~/.sky with only its cluster's
// directory (its node's HOME and its sibling nodes') bound back in place,
// so paths inside the cluster stay the same. The siblings stay visible
// because nodes of one local cluster share this machine's filesystem
// everywhere else too, and jobs use that to meet across nodes.
//
// As root the namespace is a plain CLONE_NEWNS. Otherwise a user namespace
// that maps the user to itself goes with it: the job keeps its uid, and
// the helper holds CAP_SYS_ADMIN in that namespace only until it executes
// the job, which then has no capability.

// SandboxVerb is the `sky agent` verb that enters the sandbox and then
// executes the job: `sky agent sandbox-exec HIDE KEEP PROG ARGS...`.
const SandboxVerb = "sandbox-exec"

// localInfraMark is where a local node's HOME sits below the ~/.sky that
// holds it (paths.LocalInfra); proc cannot import the infrastructure that
// builds the path, and the two are kept equal by the e2e sandbox test.
const localInfraMark = "/.sky/skygo/local/"

// HiddenDir is the directory a job on the local node at home must not
// see: the ~/.sky that holds the node ("" when home is not a local node's
// HOME, e.g. a test's temporary directory or a remote node).
func HiddenDir(home string) string {
	home = filepath.Clean(home)
	i := strings.LastIndex(home+"/", localInfraMark)
	if i < 0 {
		return ""
	}
	return home[:i] + "/.sky"
}

// SandboxCommand returns the command that runs argv on the local node at
// home inside its sandbox, with the SysProcAttr the sandbox needs (setsid
// so a rank is a process group of its own). exe is the node runtime (the agent's own executable).
func SandboxCommand(exe, home string, argv []string) *exec.Cmd {
	args := append([]string{"agent", SandboxVerb, HiddenDir(home), filepath.Dir(filepath.Clean(home))}, argv...)
	c := exec.Command(exe, args...)
	c.SysProcAttr = sandboxAttr()
	return c
}

func sandboxAttr() *syscall.SysProcAttr {
	if os.Geteuid() == 0 {
		return &syscall.SysProcAttr{Setsid: true, Unshareflags: syscall.CLONE_NEWNS}
	}
	uid, gid := os.Geteuid(), os.Getegid()
	return &syscall.SysProcAttr{
		Setsid:      true,
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		// The mapped uid is not 0 in the namespace, so exec would drop
		// the capability the mounts need; ambient keeps it for the helper.
		AmbientCaps: []uintptr{capSysAdmin},
	}
}

const (
	capSysAdmin          = 21
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
)

// SandboxMain is `sky agent sandbox-exec HIDE KEEP PROG ARGS...`: hide
// HIDE behind an empty tmpfs, bind KEEP back, drop the capabilities and
// execute PROG. It returns only on failure (exit code 126, as a shell
// does for a command it cannot execute).
func SandboxMain(args []string) int {
	if len(args) < 3 || args[0] == "" || !filepath.IsAbs(args[0]) || !strings.HasPrefix(args[1], args[0]+"/") {
		fmt.Fprintf(os.Stderr, "usage: sky agent %s HIDE KEEP PROG [ARGS...] (KEEP inside HIDE)\n", SandboxVerb)
		return 2
	}
	// Capabilities belong to a thread; the one that drops them must be
	// the one that executes the job.
	runtime.LockOSThread()
	RaiseOpenFiles()
	if err := enterSandbox(args[0], args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "sky: cannot hide %s from the job: %v\n", args[0], err)
		return 126
	}
	prog, err := exec.LookPath(args[2])
	if err == nil {
		err = syscall.Exec(prog, args[2:], os.Environ())
	}
	fmt.Fprintf(os.Stderr, "sky: %s: %v\n", args[2], err)
	return 126
}

func enterSandbox(hide, keep string) error {
	// Mounts made here must not propagate back to the server's namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	// The copies of the nodes' network namespace handles this mount
	// namespace got would keep a torn-down node's namespace alive for as
	// long as the job runs; the job has no use for them. Nothing is
	// mounted there when nodes share this machine's network.
	inNode := inNodeNetNS()
	_ = syscall.Unmount(NetNSDir, syscall.MNT_DETACH)
	if inNode {
		nodeResolvConf()
	}
	cwd, _ := os.Getwd()
	// The cluster's directory is reached through this descriptor once the
	// tmpfs covers its path.
	fd, err := syscall.Open(keep, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	vols, err := openVolumeBinds(hide, keep)
	if err != nil {
		return err
	}
	defer func() {
		for _, v := range vols {
			syscall.Close(v.fd)
		}
	}()
	const flags = syscall.MS_NOSUID | syscall.MS_NODEV
	if err := syscall.Mount("tmpfs", hide, "tmpfs", flags, "mode=0755,size=16k"); err != nil {
		return fmt.Errorf("mounting a tmpfs: %w", err)
	}
	for _, v := range vols {
		if err := os.MkdirAll(v.path, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(fmt.Sprintf("/proc/self/fd/%d", v.fd), v.path, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("binding volume directory %s back: %w", v.path, err)
		}
	}
	if err := os.MkdirAll(keep, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), keep, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("binding the cluster's directory back: %w", err)
	}
	if err := syscall.Mount("", hide, "", syscall.MS_REMOUNT|syscall.MS_RDONLY|flags, ""); err != nil {
		return fmt.Errorf("making the tmpfs read-only: %w", err)
	}
	// The old working directory is in the covered tree, where ".." would
	// lead back to the hidden files; enter it again through the new one.
	if cwd == "" || os.Chdir(cwd) != nil {
		if err := os.Chdir(keep); err != nil {
			return err
		}
	}
	// Forked into the node's PID namespace (StartNode): /proc becomes that
	// namespace's, the last step, since the binds above went through the
	// machine's /proc/self.
	if inChildPIDNS() {
		if err := mountOwnProc(); err != nil {
			return err
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("dropping ambient capabilities: %w", e)
	}
	return nil
}

// SandboxVolumesFile lists, one absolute path a line, the volume
// directories (under the hidden ~/.sky/volumes) that the jobs of the
// local cluster whose directory is clusterDir see through the sandbox:
// the directories its mount paths link to. It sits beside the cluster's
// directory, inside the hidden tree, so a job can neither read nor
// extend it.
func SandboxVolumesFile(clusterDir string) string { return filepath.Clean(clusterDir) + ".volumes" }

type volumeBind struct {
	path string
	fd   int
}

// openVolumeBinds opens the volume directories listed for the cluster
// at keep, before the tmpfs covers them. Only directories under
// HIDE/volumes/ are taken; a listed directory that is gone (a volume
// deleted with --purge) is skipped.
func openVolumeBinds(hide, keep string) ([]volumeBind, error) {
	b, err := os.ReadFile(SandboxVolumesFile(keep))
	if err != nil {
		return nil, nil
	}
	var out []volumeBind
	for _, line := range strings.Split(string(b), "\n") {
		p := filepath.Clean(strings.TrimSpace(line))
		if line == "" || !strings.HasPrefix(p, hide+"/volumes/") {
			continue
		}
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		out = append(out, volumeBind{path: p, fd: fd})
	}
	return out, nil
}

var (
	probeOnce sync.Once
	probeErr  error
)

// SandboxAvailable reports whether this machine lets SandboxCommand build
// a node sandbox; the answer is computed once per process. It runs no sky
// binary (a test binary standing in for one would run its tests again):
// as root it mounts a tmpfs in a new mount namespace (mount(8) in a
// child); otherwise it starts true in the user and mount namespaces
// with the capability the helper keeps, which fails where unprivileged
// user namespaces are not allowed.
func SandboxAvailable() error {
	probeOnce.Do(func() { probeErr = probe() })
	return probeErr
}

func probe() error {
	if os.Geteuid() != 0 {
		c := exec.Command("/bin/true")
		c.SysProcAttr = sandboxAttr()
		if err := c.Run(); err != nil {
			return fmt.Errorf("starting a process in new user and mount namespaces: %w", err)
		}
		return nil
	}
	dir, err := os.MkdirTemp("", "skygo-sandbox-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	// In a child, not on a thread of this process: a thread left to die
	// in another namespace may be the main one, which the runtime parks
	// instead (see netns.go). Go makes the child's mounts private.
	c := exec.Command("mount", "-t", "tmpfs", "-o", "size=4k,nosuid,nodev", "tmpfs", dir)
	c.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("mounting a tmpfs in a new mount namespace: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// inNodeNetNS reports whether this process is in a node's own network
// namespace rather than in the one of the server and its bridge.
func inNodeNetNS() bool {
	var self, host syscall.Stat_t
	if syscall.Stat(HostNetNS, &host) != nil || syscall.Stat("/proc/self/ns/net", &self) != nil {
		return false
	}
	return self.Dev != host.Dev || self.Ino != host.Ino
}

// Where systemd-resolved lists the upstream servers its loopback stub
// forwards to.
const resolvedUpstream = "/run/systemd/resolve/resolv.conf"

// nodeResolvConf gives a job in a node's own network namespace a resolver
// it can reach: a machine whose /etc/resolv.conf names only a loopback
// stub (systemd-resolved's 127.0.0.53) has no resolver on the node's
// loopback, so the stub's upstream list is bound over it in the job's
// mount namespace. Anything else is left as it is.
func nodeResolvConf() {
	cur, err := os.ReadFile("/etc/resolv.conf")
	if err != nil || !onlyLoopbackNameservers(cur) {
		return
	}
	up, err := os.ReadFile(resolvedUpstream)
	if err != nil || onlyLoopbackNameservers(up) {
		return
	}
	_ = syscall.Mount(resolvedUpstream, "/etc/resolv.conf", "", syscall.MS_BIND, "")
}

// onlyLoopbackNameservers reports whether a resolv.conf names at least
// one nameserver and every one is a loopback address.
func onlyLoopbackNameservers(conf []byte) bool {
	n := 0
	for _, line := range strings.Split(string(conf), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		ip, err := netip.ParseAddr(f[1])
		if err != nil || !ip.IsLoopback() {
			return false
		}
		n++
	}
	return n > 0
}
