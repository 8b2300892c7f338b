package proc

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// A local node may have a network namespace of its own (the local
// infrastructure makes one per node when this machine allows it), so
// that two nodes can both listen on 0.0.0.0:8080. A process joins a
// namespace at its start: the thread that forks it enters the namespace
// first, and the child inherits the thread's namespace. The thread is
// then thrown away (a goroutine that returns while locked ends its
// thread), so no other goroutine ever runs in the node's network.

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

// InNetNS runs f on an OS thread that has entered the network namespace
// at path (f runs on the caller's thread when path is ""). Sockets f opens
// belong to that namespace for their whole life; processes f starts are
// born in it.
func InNetNS(path string, f func() error) error {
	if path == "" {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread carries the namespace and must die
		// with this goroutine rather than go back to the scheduler.
		runtime.LockOSThread()
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			done <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		done <- f()
	}()
	return <-done
}

// StartIn starts c inside the network namespace at path ("" : the
// caller's own).
func StartIn(c *exec.Cmd, path string) error {
	return InNetNS(path, c.Start)
}
