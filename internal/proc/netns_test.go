package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// testNetNS makes a named network namespace for one test, or skips.
func testNetNS(t *testing.T) (path string, ino uint64) {
	t.Helper()
	if err := CanMakeNetNS(); err != nil {
		t.Skipf("this machine does not let the test make network namespaces: %v", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) is not installed")
	}
	name := fmt.Sprintf("skygo-test-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	var st syscall.Stat_t
	if err := syscall.Stat(NetNSPath(name), &st); err != nil {
		t.Fatal(err)
	}
	return NetNSPath(name), st.Ino
}

func nsLink(ino uint64) string { return fmt.Sprintf("net:[%d]", ino) }

// TestInNetNSThreadsComeHome: work done in a node's namespace happens
// there, children are born there, and afterwards no thread of this
// process is left in it — the main thread included, which the runtime
// cannot end and would otherwise park there for good.
func TestInNetNSThreadsComeHome(t *testing.T) {
	path, ino := testNetNS(t)
	_, own, err := OwnNetNS()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				err := InNetNS(path, func() error {
					l, err := os.Readlink("/proc/thread-self/ns/net")
					if err == nil && l != nsLink(ino) {
						err = fmt.Errorf("inside InNetNS the thread is in %s, want %s", l, nsLink(ino))
					}
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	var out strings.Builder
	c := exec.Command("readlink", "/proc/self/ns/net")
	c.Stdout = &out
	if err := StartIn(c, path); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil || strings.TrimSpace(out.String()) != nsLink(ino) {
		t.Errorf("a child started in the namespace is in %q (%v), want %s", out.String(), err, nsLink(ino))
	}

	tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
	for _, p := range tasks {
		if l, err := os.Readlink(p); err == nil && l != nsLink(own) {
			t.Errorf("thread %s stayed in %s after InNetNS returned; the process's own is %s", p, l, nsLink(own))
		}
	}
	if l, _ := os.Readlink("/proc/self/ns/net"); l != nsLink(own) {
		t.Errorf("/proc/self/ns/net is %s, want the process's own %s", l, nsLink(own))
	}
}

// TestNameOwnNetNS: the name made for this process's namespace is the
// one it started in, and iproute2 sees it as a named namespace.
func TestNameOwnNetNS(t *testing.T) {
	testNetNS(t) // the same preconditions
	path := filepath.Join(NetNSDir, fmt.Sprintf("skygo-test-own-%d", os.Getpid()))
	if err := NameOwnNetNS(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", filepath.Base(path)).Run() })
	_, own, _ := OwnNetNS()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil || st.Ino != own {
		t.Fatalf("%s is namespace %d (%v), want the process's own %d", path, st.Ino, err, own)
	}
	out, err := exec.Command("ip", "netns", "exec", filepath.Base(path), "readlink", "/proc/self/ns/net").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != nsLink(own) {
		t.Errorf("ip netns exec %s runs in %q (%v), want %s", filepath.Base(path), out, err, nsLink(own))
	}
}
