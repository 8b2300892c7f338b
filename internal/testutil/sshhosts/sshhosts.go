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
	N      int    // number of hosts; 0: only the bridge (ec2hosts adds hosts at given addresses)
	Options

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

// Options are the start-ssh-hosts.sh modes a set of hosts may ask for.
type Options struct {
	// SharedHome: /home is the machine's /home on every host, as an NFS
	// home on a cluster (SSH_HOSTS_SHARED_HOME=1).
	SharedHome bool
	// SetEnv are NAME=VALUE pairs every ssh session on the hosts gets
	// (sshd SetEnv; SSH_HOSTS_SETENV), e.g. a login node's SLURM_CONF.
	SetEnv []string
}

func stateGlob(name string) string { return "/var/tmp/skygo-sshhosts-" + name + "-*" }

// Env is the environment the testinfra scripts run with for hosts named
// name on subnet prefix, with state dir state.
func Env(state, name, prefix string, o Options) []string {
	shared := "0"
	if o.SharedHome {
		shared = "1"
	}
	return append(os.Environ(), "TESTINFRA_STATE="+state, "SSH_HOSTS_NAME="+name,
		"SSH_HOSTS_PREFIX="+prefix, "SSH_HOSTS_KEEP_STATE=0", "SSH_HOSTS_SHARED_HOME="+shared,
		"SSH_HOSTS_SETENV="+strings.Join(o.SetEnv, " "))
}

func (s *Set) scriptEnv(state string) []string { return Env(state, s.name, s.prefix, s.Options) }

// Script is one of the project's testinfra scripts.
func Script(name string) string {
	return filepath.Join(testutil.Root(), "testinfra", name)
}

// RunScripts runs testinfra scripts in turn with env, each with its
// output on stderr when it fails; for stop scripts, which must all run.
func RunScripts(env []string, names ...string) {
	for _, name := range names {
		c := exec.Command("bash", Script(name))
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n%s", name, err, out)
		}
	}
}

// stop stops the hosts and loopback sshd of one state dir.
func (s *Set) stop(state string) {
	RunScripts(s.scriptEnv(state), "stop-ssh-hosts.sh", "stop-sshd.sh")
}

// FreePort is a TCP port free on 127.0.0.1 now (for the loopback sshd
// that start-ssh-hosts.sh also starts).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	c := exec.Command("bash", Script("start-ssh-hosts.sh"), fmt.Sprint(s.N))
	c.Env = append(s.scriptEnv(s.state), fmt.Sprintf("SSHD_PORT=%d", port))
	s.started = true
	if out, err := c.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("start-ssh-hosts.sh %d failed (%v):\n%s", s.N, err, out)
	}
	h, err := ReadInfo(s.state, s.N)
	if err != nil {
		return nil, err
	}
	h.State, h.Name, h.Prefix = s.state, s.name, s.prefix
	return h, nil
}

// ReadEnvFile reads an info.env the testinfra scripts write
// (KEY=VALUE or KEY="VALUE" lines).
func ReadEnvFile(path string) (map[string]string, error) {
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
	return kv, sc.Err()
}

// ReadInfo reads the hosts that start-ssh-hosts.sh started in state dir
// state, which must be n. State is filled in; Name and Prefix are not.
func ReadInfo(state string, n int) (*Hosts, error) {
	path := filepath.Join(state, "ssh-hosts", "info.env")
	kv, err := ReadEnvFile(path)
	if err != nil {
		return nil, err
	}
	h := &Hosts{IPs: strings.Fields(kv["SSH_HOSTS"]), Names: strings.Fields(kv["SSH_HOST_NAMES"]),
		Key: kv["SSH_KEY"], User: kv["SSH_USER"], KnownHosts: kv["SSH_KNOWN_HOSTS"], State: state}
	if len(h.IPs) != n || len(h.Names) != n || h.Key == "" {
		return nil, fmt.Errorf("%s: unexpected content %v", path, kv)
	}
	return h, nil
}
