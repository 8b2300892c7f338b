// Package sshhosts gives tests real sshd hosts in network namespaces,
// started by the project's testinfra/start-ssh-hosts.sh (root needed; the
// script installs openssh-server, rsync and iproute2 when missing) and
// stopped by the pids the scripts record, never by name.
// SKYGO_SKIP_SSH=1 skips the tests that ask for hosts.
//
// Each Set has its own host name prefix, subnet and state directory, so
// packages whose tests run at the same time do not disturb each other. A
// test process also takes a lock for the name it uses: when another live
// process (the same tests run from another checkout) holds it, the set
// moves to the next slot, a name with a letter appended and a subnet 16
// higher, instead of tearing the other run's hosts down. The state
// directory is under /var/tmp: each host mounts a private /tmp, which
// would hide a state directory there from its own sshd.
package sshhosts

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/skygo/skygo/internal/testutil"
)

// maxSlots bounds how many runs of one Set may share the machine.
const maxSlots = 6

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
	lock    *os.File
	name    string // Name, or Name plus a letter in a later slot
	prefix  string // Prefix, or a higher subnet in a later slot
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
	// Name is the host name prefix in use (the veth of host i is Name+"v"+i),
	// Prefix the subnet's first three octets.
	Name, Prefix string
}

func stateGlob(name string) string { return "/var/tmp/skygo-sshhosts-" + name + "-*" }

// scriptEnv is the environment the testinfra scripts of state dir run with.
func (s *Set) scriptEnv(state string) []string {
	return append(os.Environ(), "TESTINFRA_STATE="+state, "SSH_HOSTS_NAME="+s.name,
		"SSH_HOSTS_PREFIX="+s.prefix, "SSH_HOSTS_KEEP_STATE=0", "SSH_HOSTS_SHARED_HOME=0")
}

// script is one of the project's testinfra scripts.
func script(name string) string {
	return filepath.Join(testutil.Root(), "testinfra", name)
}

// stop stops the hosts and loopback sshd of one state dir.
func (s *Set) stop(state string) {
	for _, name := range []string{"stop-ssh-hosts.sh", "stop-sshd.sh"} {
		c := exec.Command("bash", script(name))
		c.Env = s.scriptEnv(state)
		if out, err := c.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n%s", name, err, out)
		}
	}
}

// Stop stops the set's hosts, if started, removes its state and releases
// its slot; call it from TestMain after m.Run.
func (s *Set) Stop() {
	if s.started {
		s.stop(s.state)
	}
	if s.state != "" {
		os.RemoveAll(s.state)
	}
	if s.lock != nil {
		s.lock.Close() // releases the flock
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

// slot is the name and subnet of slot k.
func (s *Set) slot(k int) (name, prefix string, err error) {
	if k == 0 {
		return s.Name, s.Prefix, nil
	}
	i := strings.LastIndex(s.Prefix, ".")
	third, err := strconv.Atoi(s.Prefix[i+1:])
	if i < 0 || err != nil || third+16*k > 254 {
		return "", "", fmt.Errorf("sshhosts: no subnet for slot %d of %s", k, s.Prefix)
	}
	return s.Name + string(rune('a'+k)), fmt.Sprintf("%s.%d", s.Prefix[:i], third+16*k), nil
}

// claimSlot takes the first slot whose lock no live process holds. The
// kernel drops a flock when its process dies, so a killed run frees its
// slot by itself.
func (s *Set) claimSlot() error {
	for k := range maxSlots {
		name, prefix, err := s.slot(k)
		if err != nil {
			return err
		}
		f, err := os.OpenFile("/var/tmp/skygo-sshhosts-"+name+".lock", os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue // another test process is using this slot
		}
		s.lock, s.name, s.prefix = f, name, prefix
		return nil
	}
	return fmt.Errorf("sshhosts: all %d slots of %s are taken by other test processes", maxSlots, s.Name)
}

func (s *Set) start() (*Hosts, error) {
	if err := s.claimSlot(); err != nil {
		return nil, err
	}
	// The slot is ours, so any state dir of its name is a dead run's.
	stale, _ := filepath.Glob(stateGlob(s.name))
	for _, d := range stale {
		s.stop(d)
		os.RemoveAll(d)
	}
	var err error
	if s.state, err = os.MkdirTemp("/var/tmp", "skygo-sshhosts-"+s.name+"-"); err != nil {
		return nil, err
	}
	// start-ssh-hosts.sh also starts a loopback sshd: give it a free port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := exec.Command("bash", script("start-ssh-hosts.sh"), fmt.Sprint(s.N))
	c.Env = append(s.scriptEnv(s.state), fmt.Sprintf("SSHD_PORT=%d", port))
	s.started = true
	if out, err := c.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("start-ssh-hosts.sh %d failed (%v):\n%s", s.N, err, out)
	}
	h, err := s.readInfo(filepath.Join(s.state, "ssh-hosts", "info.env"))
	if err != nil {
		return nil, err
	}
	h.State, h.Name, h.Prefix = s.state, s.name, s.prefix
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
