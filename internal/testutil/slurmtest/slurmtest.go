// Package slurmtest gives tests a real Slurm cluster: 3 compute nodes, each
// a network namespace of internal/testutil/sshhosts running a slurmd, with
// 4 CPUs, 4096 MB and 4 fake GPUs of type h100, partitions "cpu" (default)
// and "gpu", and accounting (MariaDB + slurmdbd), started by the project's
// testinfra/start-slurm.sh and stopped by the pids it records. Host 1 is
// the login node: it is reached over ssh as the unprivileged user "sky",
// /home is one directory every node shares (the cluster's own, fresh each
// run), and every ssh session there has SLURM_CONF.
//
// Slurm's ports and munge are machine-wide, so one cluster serves the whole
// machine: a test process takes a machine-wide lock before it starts one,
// and waits (saying so in the test log) while another live process holds
// it. Root is needed; SKYGO_SKIP_SLURM=1 skips the tests that ask for it.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		slurmtest.Stop()
//		os.Exit(code)
//	}
package slurmtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/testutil/sshhosts"
)

// The shape every test can count on.
const (
	numNodes     = 3
	cpusPerNode  = 4
	memMBPerNode = 4096
	gpusPerNode  = 4
	gpuType      = "h100"

	hostName = "sgslurm"   // nodes sgslurm1..3
	prefix   = "10.200.59" // beside sshhosts' 10.200.57 (sgssh) and .58 (sge2e)

	lockPath  = "/var/lock/skygo-slurm.lock"
	stateBase = "skygo-slurm-" // under /var/tmp: the nodes mount a private /tmp
	testUser  = "sky"          // start-sshd.sh's unprivileged user
	tempBase  = "slurmtest"    // TempDirs, under the shared home
)

// lockWait is how long Get waits for another test process's cluster.
var lockWait = 10 * time.Minute

// Cluster is a started Slurm cluster.
type Cluster struct {
	LoginAddr  string // the login node's ssh address (node 1)
	LoginPort  int
	User       string // the unprivileged test user, "sky"
	Key        string // private key accepted for User (and root) on every node
	KnownHosts string // host keys of every node
	Nodes      []string
	NodeAddrs  []string
	SlurmConf  string // the SLURM_CONF every ssh session on the nodes has
	// Home is User's home on the nodes, one directory all of them share
	// (the set's own, not the machine's /home); LocalHome is the same
	// directory as this process sees it.
	Home, LocalHome string
	State           string // TESTINFRA_STATE of the cluster

	Partitions       []string
	DefaultPartition string
	GPUType          string
	GPUsPerNode      int
	CPUsPerNode      int
	MemMBPerNode     int
}

var (
	mu       sync.Mutex
	once     sync.Once
	cluster  *Cluster
	startErr error
	lock     *os.File
	state    string
	started  bool
)

// Get starts the cluster once per test process and returns it. The test
// fails with the script's own message when the cluster cannot start.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv("SKYGO_SKIP_SLURM") == "1" {
		t.Skip("SKYGO_SKIP_SLURM=1: skipping tests against a real Slurm cluster")
	}
	if os.Geteuid() != 0 {
		t.Skip("the Slurm test cluster needs root (network namespaces, slurmd); run the tests as root or set SKYGO_SKIP_SLURM=1")
	}
	once.Do(func() {
		mu.Lock()
		defer mu.Unlock()
		cluster, startErr = start(t)
	})
	if startErr != nil {
		t.Fatal(startErr)
	}
	return cluster
}

// Stop stops the cluster, if this process started it, removes its state
// and releases the machine-wide lock; call it from TestMain after m.Run.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if started {
		stopState(state)
		started = false
	}
	if state != "" {
		os.RemoveAll(state)
		state = ""
	}
	if lock != nil {
		lock.Truncate(0)
		lock.Close() // releases the flock
		lock = nil
	}
}

// env is the environment of the testinfra scripts for state dir dir.
func env(dir string) []string {
	return sshhosts.Env(dir, hostName, prefix, sshhosts.Options{SharedHome: true})
}

func stopState(dir string) {
	sshhosts.RunScripts(env(dir), "stop-slurm.sh", "stop-ssh-hosts.sh", "stop-sshd.sh")
}

// acquire takes the machine-wide lock, waiting while another live process
// holds it. The kernel drops a flock when its process dies, so a killed
// run frees the machine by itself.
func acquire(t testing.TB) error {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(lockWait)
	var said time.Time
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("slurmtest: locking %s: %v", lockPath, err)
		}
		holder, _ := os.ReadFile(lockPath)
		if time.Now().After(deadline) {
			f.Close()
			return fmt.Errorf("slurmtest: the machine's Slurm test cluster is still held by pid %s after %v (%s); Slurm's ports are machine-wide, so only one test process may run it at a time",
				strings.TrimSpace(string(holder)), lockWait, lockPath)
		}
		if time.Since(said) > 30*time.Second {
			t.Logf("slurmtest: waiting for the machine's Slurm test cluster: %s is held by pid %s (another test process)", lockPath, strings.TrimSpace(string(holder)))
			said = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	lock = f
	return nil
}

func start(t testing.TB) (*Cluster, error) {
	if err := acquire(t); err != nil {
		return nil, err
	}
	// The lock is ours, so any state dir left is a killed run's: its
	// daemons and hosts are stopped by the pids it recorded.
	stale, _ := filepath.Glob(filepath.Join("/var/tmp", stateBase+"*"))
	for _, d := range stale {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		t.Logf("slurmtest: stopping the cluster a previous run left in %s", d)
		stopState(d)
		os.RemoveAll(d)
	}
	dir, err := os.MkdirTemp("/var/tmp", stateBase)
	if err != nil {
		return nil, err
	}
	state = dir
	// sky's sinfo/sbatch read slurm.conf under it
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := sshhosts.FreePort()
	if err != nil {
		return nil, err
	}
	c := exec.Command("bash", sshhosts.Script("start-slurm.sh"), strconv.Itoa(numNodes))
	c.Env = append(env(dir), fmt.Sprintf("SSHD_PORT=%d", port),
		"SLURM_ACCOUNTING=1", "SLURM_GPU_TYPE="+gpuType,
		fmt.Sprintf("SLURM_CPUS_PER_NODE=%d", cpusPerNode),
		fmt.Sprintf("SLURM_MEM_PER_NODE_MB=%d", memMBPerNode),
		fmt.Sprintf("SLURM_GPUS_PER_NODE=%d", gpusPerNode))
	started = true
	t0 := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("start-slurm.sh %d failed (%v):\n%s", numNodes, err, out)
	}
	t.Logf("slurmtest: %d-node Slurm cluster up in %.1fs (state %s)", numNodes, time.Since(t0).Seconds(), dir)
	return readCluster(dir)
}

func readCluster(dir string) (*Cluster, error) {
	h, err := sshhosts.ReadInfo(dir, numNodes)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "slurm", "info.env")
	kv, err := sshhosts.ReadEnvFile(path)
	if err != nil {
		return nil, err
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(kv[k]); return n }
	hkv, err := sshhosts.ReadEnvFile(filepath.Join(dir, "ssh-hosts", "info.env"))
	if err != nil {
		return nil, err
	}
	u, err := user.Lookup(testUser)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		LoginAddr: kv["SLURM_LOGIN_ADDR"], LoginPort: 22, User: testUser, Key: h.Key, KnownHosts: h.KnownHosts,
		Nodes: strings.Fields(kv["SLURM_NODES"]), NodeAddrs: strings.Fields(kv["SLURM_NODE_ADDRS"]),
		SlurmConf: kv["SLURM_CONF"], State: dir,
		Home: u.HomeDir, LocalHome: filepath.Join(hkv["SSH_SHARED_HOME_DIR"], testUser),
		Partitions: strings.Fields(kv["SLURM_PARTITIONS"]), DefaultPartition: kv["SLURM_DEFAULT_PARTITION"],
		GPUType: kv["SLURM_GPU_TYPE"], GPUsPerNode: atoi("SLURM_GPUS_PER_NODE"),
		CPUsPerNode: atoi("SLURM_CPUS_PER_NODE"), MemMBPerNode: atoi("SLURM_MEM_PER_NODE_MB"),
	}
	if len(c.Nodes) != numNodes || len(c.NodeAddrs) != numNodes || c.LoginAddr == "" || c.SlurmConf == "" || hkv["SSH_SHARED_HOME_DIR"] == "" {
		return nil, fmt.Errorf("%s: unexpected content %v", path, kv)
	}
	return c, nil
}

// Exec runs cmd (a bash script) on the login node as User over ssh and
// returns its stdout; a failure carries its stderr. cmd gets no stdin.
func (c *Cluster) Exec(cmd string) (string, error) {
	return c.sshExec(c.User, c.LoginAddr, cmd)
}

// RunOn runs cmd as root on node i (0-based, in Nodes' order) over ssh,
// e.g. to look at what a job left in that node's own /tmp; it fails the
// test on error.
func (c *Cluster) RunOn(t testing.TB, i int, cmd string) string {
	t.Helper()
	out, err := c.sshExec("root", c.NodeAddrs[i], cmd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sshExec hands cmd to a remote `bash -s` on stdin rather than on the
// command line: the nodes share the machine's process table, so a command
// in an argv (of the local ssh, or of the remote shell) would show up in
// the very `pgrep -af` a test runs to look for leftover processes. So cmd
// cannot read this stdin itself.
func (c *Cluster) sshExec(user, addr, cmd string) (string, error) {
	x := exec.Command("ssh", "-i", c.Key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "UserKnownHostsFile="+c.KnownHosts, "-o", "StrictHostKeyChecking=yes",
		"-o", "ConnectTimeout=10", "-p", strconv.Itoa(c.LoginPort), user+"@"+addr, "--", "bash", "-s")
	var stdout, stderr bytes.Buffer
	x.Stdin, x.Stdout, x.Stderr = strings.NewReader(cmd), &stdout, &stderr
	if err := x.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%q as %s on %s: %v\nstdout: %s\nstderr: %s", cmd, user, addr, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// Run is Exec that fails the test on error.
func (c *Cluster) Run(t testing.TB, cmd string) string {
	t.Helper()
	out, err := c.Exec(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TempDir is a new directory in User's home, which every node shares,
// owned by User and removed when the test ends: a place for job scripts
// and output files. The path is the nodes' one; under LocalHome instead of
// Home, this process reaches the same directory.
func (c *Cluster) TempDir(t testing.TB) string {
	t.Helper()
	u, err := user.Lookup(c.User)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base := filepath.Join(c.LocalHome, tempBase)
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(base, uid, gid); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(c.Home, tempBase, filepath.Base(dir))
}

// WriteSlurmConfig makes the cluster known to a SkyGo client whose HOME is
// home: home/.slurm/config gets a Host entry alias for the login node, and
// SkyGo's own known_hosts (under ~/.sky) the login node's host key, so the
// first connection needs no accept-new.
func (c *Cluster) WriteSlurmConfig(home, alias string) error {
	dir := filepath.Join(home, ".slurm")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cfg := fmt.Sprintf("Host %s\n  HostName %s\n  User %s\n  Port %d\n  IdentityFile %s\n",
		alias, c.LoginAddr, c.User, c.LoginPort, c.Key)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o600); err != nil {
		return err
	}
	known, err := os.ReadFile(c.KnownHosts)
	if err != nil {
		return err
	}
	var line string
	for _, l := range strings.Split(string(known), "\n") {
		if hosts, key, ok := strings.Cut(l, " "); ok && strings.Split(hosts, ",")[0] == c.LoginAddr {
			line = c.LoginAddr + " " + key + "\n"
		}
	}
	if line == "" {
		return fmt.Errorf("%s has no key for %s", c.KnownHosts, c.LoginAddr)
	}
	kh := paths.KnownHosts(home)
	if err := os.MkdirAll(filepath.Dir(kh), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(kh, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CancelAll cancels every job of User and waits until none is left, so
// that a test's allocations do not hold nodes the next test needs.
func (c *Cluster) CancelAll(t testing.TB) {
	t.Helper()
	c.Run(t, "scancel -u "+c.User)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if strings.TrimSpace(c.Run(t, "squeue -h -u "+c.User+" -o %i")) == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs of %s still queued 30s after scancel:\n%s", c.User, c.Run(t, "squeue -u "+c.User))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
