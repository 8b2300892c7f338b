// Package sshhosts gives tests real sshd hosts in network namespaces,
// started by ../shared/testinfra/start-ssh-hosts.sh (root needed; the
// script installs openssh-server, rsync and iproute2 when missing) and
// stopped by the pids the scripts record, never by name.
// SKYGO_SKIP_SSH=1 skips the tests that ask for hosts.
//
// Each Set has its own host name prefix, subnet and state directory, so
// packages whose tests run at the same time do not disturb each other. The
// state directory is under /var/tmp: each host mounts a private /tmp, which
// would hide a state directory there from its own sshd.
package sshhosts

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

	"github.com/skygo/skygo/internal/testutil"
)

// Set is one group of hosts, started at most once per test process.
type Set struct {
	Name   string // host name prefix, e.g. "sgssh" -> sgssh1, sgssh2, ...
	Prefix string // first three octets of the subnet, e.g. "10.200.57"
	N      int    // number of hosts

	once    sync.Once
	hosts   *Hosts
	err     error
	started bool
	state   string
}

// Hosts is what a started Set offers.
type Hosts struct {
	IPs   []string
	Names []string
	Key   string // private key accepted for root and the test user
	User  string
	// KnownHosts is the testinfra file with every host's key.
	KnownHosts string
	State      string // TESTINFRA_STATE of this set
}

func (s *Set) stateGlob() string { return "/var/tmp/skygo-sshhosts-" + s.Name + "-*" }

// ScriptEnv is the environment the testinfra scripts of state dir run with.
func (s *Set) scriptEnv(state string) []string {
	return append(os.Environ(), "TESTINFRA_STATE="+state, "SSH_HOSTS_NAME="+s.Name,
		"SSH_HOSTS_PREFIX="+s.Prefix, "SSH_HOSTS_KEEP_STATE=0", "SSH_HOSTS_SHARED_HOME=0")
}

func script(name string) (string, error) {
	d, ok := testutil.SharedPath()
	if !ok {
		return "", fmt.Errorf("shared folder not found at %s (set SKYGO_SHARED)", d)
	}
	return filepath.Join(d, "testinfra", name), nil
}

// stop stops the hosts and loopback sshd of one state dir.
func (s *Set) stop(state string) {
	for _, name := range []string{"stop-ssh-hosts.sh", "stop-sshd.sh"} {
		path, err := script(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		c := exec.Command("bash", path)
		c.Env = s.scriptEnv(state)
		if out, err := c.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n%s", name, err, out)
		}
	}
}

// Stop stops the set's hosts, if started, and removes its state; call it
// from TestMain after m.Run.
func (s *Set) Stop() {
	if s.started {
		s.stop(s.state)
	}
	if s.state != "" {
		os.RemoveAll(s.state)
	}
}

// Get starts the hosts once and returns them. A run killed before its
// TestMain could clean up (a test timeout) left its state dir behind: its
// hosts are stopped first. The test fails with the script's own message
// when the hosts cannot be started.
func (s *Set) Get(t testing.TB) *Hosts {
	t.Helper()
	if os.Getenv("SKYGO_SKIP_SSH") == "1" {
		t.Skip("SKYGO_SKIP_SSH=1: skipping tests against real sshd hosts")
	}
	s.once.Do(func() { s.hosts, s.err = s.start() })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.hosts
}

func (s *Set) start() (*Hosts, error) {
	stale, _ := filepath.Glob(s.stateGlob())
	for _, d := range stale {
		s.stop(d)
		os.RemoveAll(d)
	}
	var err error
	if s.state, err = os.MkdirTemp("/var/tmp", "skygo-sshhosts-"+s.Name+"-"); err != nil {
		return nil, err
	}
	// start-ssh-hosts.sh also starts a loopback sshd: give it a free port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	path, err := script("start-ssh-hosts.sh")
	if err != nil {
		return nil, err
	}
	c := exec.Command("bash", path, fmt.Sprint(s.N))
	c.Env = append(s.scriptEnv(s.state), fmt.Sprintf("SSHD_PORT=%d", port))
	s.started = true
	if out, err := c.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("start-ssh-hosts.sh %d failed (%v):\n%s", s.N, err, out)
	}
	h, err := s.readInfo(filepath.Join(s.state, "ssh-hosts", "info.env"))
	if err != nil {
		return nil, err
	}
	h.State = s.state
	return h, nil
}

func (s *Set) readInfo(path string) (*Hosts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = strings.Trim(v, `"`)
		}
	}
	h := &Hosts{IPs: strings.Fields(kv["SSH_HOSTS"]), Names: strings.Fields(kv["SSH_HOST_NAMES"]),
		Key: kv["SSH_KEY"], User: kv["SSH_USER"], KnownHosts: kv["SSH_KNOWN_HOSTS"]}
	if len(h.IPs) != s.N || len(h.Names) != s.N || h.Key == "" {
		return nil, fmt.Errorf("%s: unexpected content %v", path, kv)
	}
	return h, nil
}
