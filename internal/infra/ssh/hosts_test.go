package ssh

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Integration tests run against real sshd hosts in network namespaces,
// started once per test process by ../shared/testinfra/start-ssh-hosts.sh
// (needs root; installs openssh-server, openssh-client, rsync, sudo and
// iproute2 when missing). SKYGO_SKIP_SSH=1 skips them.
//
// The hosts get their own name prefix, subnet and state directory so that
// other packages' tests using the default tihost* hosts are not disturbed.
// The state directory is under /var/tmp, not /tmp: each host mounts a
// private /tmp, which would hide a state directory living there from its
// own sshd.
const (
	testHostName   = "sgssh"
	testHostPrefix = "10.200.57"
	numTestHosts   = 3
)

type testHosts struct {
	IPs   []string
	Names []string
	Key   string
	User  string
	State string // TESTINFRA_STATE
	// KnownHosts is the testinfra file with every host's key.
	KnownHosts string
}

var (
	hostsOnce    sync.Once
	hostsVal     *testHosts
	hostsErr     error
	hostsStarted bool
	stateDir     string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if hostsStarted {
		stopHosts()
	}
	if stateDir != "" {
		os.RemoveAll(stateDir)
	}
	os.Exit(code)
}

func scriptEnv() []string {
	return append(os.Environ(), "TESTINFRA_STATE="+stateDir, "SSH_HOSTS_NAME="+testHostName,
		"SSH_HOSTS_PREFIX="+testHostPrefix, "SSH_HOSTS_KEEP_STATE=0", "SSH_HOSTS_SHARED_HOME=0")
}

func testinfraDir() string {
	if d := os.Getenv("SKYGO_SHARED"); d != "" {
		return filepath.Join(d, "testinfra")
	}
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "..", "..", "shared", "testinfra")
}

func stopHosts() {
	for _, s := range []string{"stop-ssh-hosts.sh", "stop-sshd.sh"} {
		c := exec.Command("bash", filepath.Join(testinfraDir(), s))
		c.Env = scriptEnv()
		if out, err := c.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n%s", s, err, out)
		}
	}
}

// cleanStale stops what an earlier run of these tests left behind when it
// was killed before TestMain could clean up (a test timeout panics past
// it): its hosts and loopback sshd, by the pid files in its state dir.
func cleanStale() {
	dirs, _ := filepath.Glob("/var/tmp/skygo-ssh-test-*")
	for _, d := range dirs {
		for _, s := range []string{"stop-ssh-hosts.sh", "stop-sshd.sh"} {
			c := exec.Command("bash", filepath.Join(testinfraDir(), s))
			c.Env = append(os.Environ(), "TESTINFRA_STATE="+d, "SSH_HOSTS_NAME="+testHostName)
			c.Run()
		}
		os.RemoveAll(d)
	}
}

// sshHosts starts the hosts (once) and returns them; the test fails with
// the script's own message when they cannot be started.
func sshHosts(t testing.TB) *testHosts {
	t.Helper()
	if os.Getenv("SKYGO_SKIP_SSH") == "1" {
		t.Skip("SKYGO_SKIP_SSH=1: skipping tests against real sshd hosts")
	}
	hostsOnce.Do(func() {
		cleanStale()
		var err error
		stateDir, err = os.MkdirTemp("/var/tmp", "skygo-ssh-test-")
		if err != nil {
			hostsErr = err
			return
		}
		// The loopback sshd that start-ssh-hosts.sh also starts needs a
		// port nobody else holds.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			hostsErr = err
			return
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		c := exec.Command("bash", filepath.Join(testinfraDir(), "start-ssh-hosts.sh"), fmt.Sprint(numTestHosts))
		c.Env = append(scriptEnv(), fmt.Sprintf("SSHD_PORT=%d", port))
		hostsStarted = true
		out, err := c.CombinedOutput()
		if err != nil {
			hostsErr = fmt.Errorf("start-ssh-hosts.sh %d failed (%v):\n%s", numTestHosts, err, out)
			return
		}
		hostsVal, hostsErr = readInfo(filepath.Join(stateDir, "ssh-hosts", "info.env"))
		if hostsVal != nil {
			hostsVal.State = stateDir
		}
	})
	if hostsErr != nil {
		t.Fatal(hostsErr)
	}
	return hostsVal
}

func readInfo(path string) (*testHosts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			kv[k] = strings.Trim(v, `"`)
		}
	}
	h := &testHosts{IPs: strings.Fields(kv["SSH_HOSTS"]), Names: strings.Fields(kv["SSH_HOST_NAMES"]),
		Key: kv["SSH_KEY"], User: kv["SSH_USER"], KnownHosts: kv["SSH_KNOWN_HOSTS"]}
	if len(h.IPs) != numTestHosts || h.Key == "" {
		return nil, fmt.Errorf("%s: unexpected content %v", path, kv)
	}
	return h, nil
}

// endpoint is host i (0-based) as root with the test key.
func (h *testHosts) endpoint(i int) Endpoint {
	return Endpoint{Name: h.IPs[i], Addr: h.IPs[i], Port: 22, User: h.User, IdentityFiles: []string{h.Key}}
}

// newTestDialer has a private known_hosts (accept-new from scratch).
func newTestDialer(t testing.TB) *Dialer {
	t.Helper()
	dir := t.TempDir()
	d := NewDialer(&KnownHosts{File: filepath.Join(dir, "known_hosts")})
	t.Cleanup(func() { d.Close() })
	return d
}
