package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// A local node may have a network namespace of its own (the local
// infrastructure makes one per node when this machine allows it), so
// that two nodes can both listen on 0.0.0.0:8080. A process joins a
// namespace at its start: the thread that forks it enters the namespace
// first, and the child inherits the thread's namespace. The thread goes
// back to the process's own namespace before any other goroutine may run
// on it.
//
// A locked thread is never simply left to die in a foreign namespace:
// when that thread is the main one, the Go runtime cannot end it and
// parks it for good instead, and /proc/self/ns/net (the main thread's)
// then names the foreign namespace for the rest of the process's life.
// That is how a server once named a throwaway namespace "the host's",
// and every autostop callback went where no server listens.

// NetNSDir is where iproute2 keeps named network namespaces.
const NetNSDir = "/run/netns"

// HostNetNS names the namespace holding the nodes' bridge (the API
// server's), so that the agent of a node with a namespace of its own can
// come back to it for work that must reach the server on this machine's
// loopback (the autostop callback); the local infrastructure makes it
// beside the nodes' own.
const HostNetNS = NetNSDir + "/skygo-host"

// NetNSPath is the path of the named network namespace ("" for "").
func NetNSPath(name string) string {
	if name == "" {
		return ""
	}
	return NetNSDir + "/" + name
}

// ownNetNS holds this process's network namespace as it started: package
// variables are set during initialisation, which the runtime runs on the
// main thread before any goroutine can have moved a thread elsewhere.
var ownNetNS = func() int {
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}()

// OwnNetNS identifies this process's own network namespace (where it
// started), whatever namespace the calling thread is in now.
func OwnNetNS() (dev, ino uint64, err error) {
	if ownNetNS < 0 {
		return 0, 0, fmt.Errorf("this process could not open its own network namespace")
	}
	var st unix.Stat_t
	if err := unix.Fstat(ownNetNS, &st); err != nil {
		return 0, 0, err
	}
	return st.Dev, st.Ino, nil
}

// NameOwnNetNS makes path (a file under NetNSDir) name this process's own
// network namespace, as `ip netns attach` does for a pid: a bind mount of
// the namespace, under a NetNSDir that is a shared mount so the name is
// seen from the mount namespaces made after it.
func NameOwnNetNS(path string) error {
	if ownNetNS < 0 {
		return fmt.Errorf("this process could not open its own network namespace")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err == unix.EINVAL {
		// Not a mount point yet: make it one, as iproute2 does.
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mounting %s on itself: %w", dir, err)
		}
		if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("making %s a shared mount: %w", dir, err)
		}
	} else if err != nil {
		return fmt.Errorf("making %s a shared mount: %w", dir, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	src := fmt.Sprintf("/proc/self/fd/%d", ownNetNS)
	if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
		os.Remove(path)
		return fmt.Errorf("naming the network namespace %s: %w", path, err)
	}
	return nil
}

// InNetNS runs f on an OS thread that has entered the network namespace
// at path (f runs on the caller's thread when path is ""). Sockets f opens
// belong to that namespace for their whole life; processes f starts are
// born in it.
func InNetNS(path string, f func() error) error {
	if path == "" {
		return f()
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("entering network namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still in its own namespace
			done <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		done <- f()
		// Back home, the thread is like any other again. Should that
		// fail, it stays locked and the runtime ends it with this
		// goroutine (or parks it, if it is the main thread: OwnNetNS
		// does not look at the main thread for that reason).
		if ownNetNS >= 0 && unix.Setns(ownNetNS, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-done
}

// StartIn starts c inside the network namespace at path ("" : the
// caller's own).
func StartIn(c *exec.Cmd, path string) error {
	return InNetNS(path, c.Start)
}

// CanMakeNetNS reports whether this process may make network namespaces:
// it starts true in a new one, touching none of its own threads.
func CanMakeNetNS() error {
	c := exec.Command("true")
	c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := c.Run(); err != nil {
		return fmt.Errorf("starting a process in a new network namespace: %w", err)
	}
	return nil
}
