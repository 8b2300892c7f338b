package k8stest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skygo/skygo/internal/testutil/sshhosts"
)

// stateBase names the per-run state directories, under /var/tmp rather
// than /tmp, which may be a small tmpfs: containerd unpacks images there.
const stateBase = "skygo-k8s-"

// runState is one process's cluster: what Stop undoes.
type runState struct {
	dir   string
	bin   string
	owner *os.File // flock on dir/owner.lock while this process lives
	ports ports
	// node is the machine-wide real-node lock, held from the node's start
	// until Stop.
	node *os.File
}

type ports struct{ api, etcd, kwok, kubelet, healthz int }

// scriptEnv is this process's environment for a testinfra script with
// state dir state, less the K8S_* settings a developer's shell may hold
// (they would change the cluster's shape or ports under the tests).
func scriptEnv(state string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "K8S_") || k == "TESTINFRA_STATE" || k == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TESTINFRA_STATE="+state)
}

// env is the environment of the start and stop scripts for this run. The
// binaries' directory goes first on PATH: the scripts call kubectl, and
// the one built there matches the server.
func (r *runState) env() []string {
	return append(scriptEnv(r.dir), "K8S_BIN="+r.bin, "PATH="+r.bin+":"+os.Getenv("PATH"), "K8S_SKIP_BUILD=1",
		fmt.Sprintf("K8S_API_PORT=%d", r.ports.api), fmt.Sprintf("K8S_ETCD_PORT=%d", r.ports.etcd),
		fmt.Sprintf("K8S_KWOK_PORT=%d", r.ports.kwok),
		fmt.Sprintf("K8S_NODE_KUBELET_PORT=%d", r.ports.kubelet), fmt.Sprintf("K8S_NODE_HEALTHZ_PORT=%d", r.ports.healthz),
		fmt.Sprintf("K8S_CPU_NODES=%d", CPUNodes), fmt.Sprintf("K8S_GPU_NODES=%d", GPUNodes),
		fmt.Sprintf("K8S_GPUS_PER_NODE=%d", GPUsPerNode), fmt.Sprintf("K8S_NODE_GPUS=%d", NodeGPUs),
		"K8S_GPU_PRODUCT="+GPUProduct, "K8S_GPU_ACCEL="+GPUAccel)
}

// freePorts picks the ports: etcd's peer port is its client port + 1, so
// both must be free.
func freePorts() (ports, error) {
	var p ports
	var err error
	for _, x := range []*int{&p.api, &p.kwok, &p.kubelet, &p.healthz} {
		if *x, err = sshhosts.FreePort(); err != nil {
			return p, err
		}
	}
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return p, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1))
		l.Close()
		if err == nil {
			l2.Close()
			p.etcd = port
			return p, nil
		}
	}
	return p, errors.New("k8stest: found no two free consecutive ports for etcd")
}

// runScript runs a start script, picking new ports and retrying when one
// was taken between the pick and the bind (the picks are in the ephemeral
// range that any outgoing connection may use). A retry of the node keeps
// the control plane, whose ports the Cluster already uses.
func (r *runState) runScript(name string) error {
	for attempt := 1; ; attempt++ {
		c := exec.Command("bash", sshhosts.Script(name))
		c.Env = r.env()
		out, err := c.CombinedOutput()
		if err == nil {
			return nil
		}
		if attempt < 3 && strings.Contains(string(out), "already in use by another program") {
			fresh, perr := freePorts()
			if perr == nil {
				if name == nodeScript {
					sshhosts.RunScripts(r.env(), "stop-k8s-node.sh")
					r.ports.kubelet, r.ports.healthz = fresh.kubelet, fresh.healthz
				} else {
					r.stopScripts(r.node != nil)
					r.ports = fresh
				}
				continue
			}
		}
		return fmt.Errorf("k8stest: %s failed (%v):\n%s%s", name, err, out, logTails(string(out)))
	}
}

var seeLog = regexp.MustCompile(`\(see (/\S+)\)`)

// logTails is the end of every log the scripts' output points to.
func logTails(out string) string {
	var b strings.Builder
	for _, m := range seeLog.FindAllStringSubmatch(out, -1) {
		fmt.Fprintf(&b, "--- end of %s:\n%s\n", m[1], tail(m[1], 25))
	}
	return b.String()
}

// stopScripts stops this run's node (when it has one) and control plane,
// in that order, while the apiserver can still take the node's deletion.
// A run without a node must not run stop-k8s-node.sh: it removes the
// machine's one bridge, which another process's node may be using.
func (r *runState) stopScripts(node bool) {
	if node {
		sshhosts.RunScripts(r.env(), "stop-k8s-node.sh")
	}
	sshhosts.RunScripts(r.env(), "stop-k8s.sh")
}

func startControlPlane(t testing.TB, required bool) (*Cluster, string, error) {
	bin := binDir()
	if skip, err := ensureBins(t, bin, controlPlaneBins, required); skip != "" || err != nil {
		return nil, skip, err
	}
	cleanStale(t, false)
	dir, err := os.MkdirTemp("/var/tmp", stateBase)
	if err != nil {
		return nil, "", err
	}
	owner, err := os.OpenFile(filepath.Join(dir, "owner.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(owner.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("k8stest: locking %s: %v", dir, err)
	}
	r := &runState{dir: dir, bin: bin, owner: owner}
	run = r
	if r.ports, err = freePorts(); err != nil {
		return nil, "", err
	}
	t0 := time.Now()
	if err := r.runScript("start-k8s.sh"); err != nil {
		return nil, "", err
	}
	c, err := newCluster(r)
	if err != nil {
		return nil, "", err
	}
	if err := c.waitNodesReady(CPUNodes+GPUNodes, time.Minute); err != nil {
		return nil, "", err
	}
	t.Logf("k8stest: control plane with %d kwok nodes up in %.1fs (%s, state %s)", CPUNodes+GPUNodes, time.Since(t0).Seconds(), c.APIURL, dir)
	return c, "", nil
}

func newCluster(r *runState) (*Cluster, error) {
	kc := filepath.Join(r.dir, "k8s", "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, fmt.Errorf("k8stest: %s: %v", kc, err)
	}
	// tests poll; client-go's default 5 requests/s would slow them down
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Kubeconfig: kc, Context: Context, Client: cs, REST: cfg, APIURL: cfg.Host,
		State: r.dir, Bin: r.bin, Kubectl: filepath.Join(r.bin, "kubectl")}, nil
}

// waitNodesReady waits until at least n nodes are Ready.
func (c *Cluster) waitNodesReady(n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var ready []string
	for {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			ready = ready[:0]
			for _, n := range nodes.Items {
				if nodeReady(&n) {
					ready = append(ready, n.Name)
				}
			}
			if len(ready) >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("k8stest: %d of %d nodes Ready after %v (%v; ready: %v)", len(ready), n, timeout, err, ready)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}

// cleanStale stops the clusters that killed runs (a test timeout, a ^C)
// left: a state dir whose owner lock no live process holds. A dir with a
// real node is cleaned only by the holder of the node lock (withNode):
// its stop script removes the machine's one bridge, which a live node may
// be using by then.
func cleanStale(t testing.TB, withNode bool) {
	dirs, _ := filepath.Glob(filepath.Join("/var/tmp", stateBase+"*"))
	for _, d := range dirs {
		if run != nil && d == run.dir {
			continue
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue // the build's log beside the state dirs
		}
		f, err := os.OpenFile(filepath.Join(d, "owner.lock"), os.O_RDWR, 0)
		if err != nil {
			// just made by another process, which locks it next; an old
			// one without a lock is a run killed at that very moment
			if st, err := os.Stat(d); err != nil || time.Since(st.ModTime()) < 10*time.Minute {
				continue
			}
		} else if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue // its process is alive
		}
		_, err = os.Stat(filepath.Join(d, "k8s-node"))
		hasNode := err == nil
		if hasNode && !withNode {
			f.Close()
			continue
		}
		t.Logf("k8stest: stopping the cluster a killed run left in %s", d)
		r := &runState{dir: d, bin: binDir()}
		r.stopScripts(hasNode)
		if err := removeState(d); err != nil {
			t.Log(err)
		}
		if f != nil {
			f.Close()
		}
	}
}

// removeState removes a state dir, unless something is still mounted
// under it: RemoveAll would go through a pod's hostPath bind mount.
func removeState(dir string) error {
	if m := mountsUnder(dir); len(m) > 0 {
		return fmt.Errorf("k8stest: not removing %s: still mounted under it: %s", dir, strings.Join(m, " "))
	}
	return os.RemoveAll(dir)
}

func mountsUnder(dir string) []string {
	var m []string
	for _, l := range strings.Split(readFile("/proc/self/mountinfo"), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			m = append(m, f[4])
		}
	}
	return m
}

// stop stops the run and reports what is left: live pids (recorded in the
// pid files or in the node's cgroup before the stop), ports still served,
// mounts, the bridge, the node's cgroup.
func (r *runState) stop() []string {
	pids := r.pids()
	hadNode := r.node != nil
	r.stopScripts(hadNode)
	var left []string
	for _, p := range pids {
		if alive(p) {
			left = append(left, fmt.Sprintf("pid %d (%s)", p, strings.TrimSpace(readFile(fmt.Sprintf("/proc/%d/comm", p)))))
		}
	}
	for _, p := range []int{r.ports.api, r.ports.etcd, r.ports.etcd + 1, r.ports.kwok, r.ports.healthz} {
		if p == 0 {
			continue
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), 200*time.Millisecond); err == nil {
			c.Close()
			left = append(left, fmt.Sprintf("port 127.0.0.1:%d still accepts connections", p))
		}
	}
	if hadNode {
		if _, err := net.InterfaceByName(nodeBridge); err == nil {
			left = append(left, "bridge "+nodeBridge)
		}
		for _, d := range r.cgroupDirs() {
			if _, err := os.Stat(d); err == nil {
				left = append(left, "cgroup "+d)
			}
		}
	}
	if err := removeState(r.dir); err != nil {
		left = append(left, err.Error())
	}
	if r.node != nil {
		release(r.node)
	}
	r.owner.Close()
	return left
}

// cgroupName is the node's cgroup, as start-k8s-node.sh derives it.
func (r *runState) cgroupName() string { return "testinfra-k8s-node-" + filepath.Base(r.dir) }

// cgroupDirs is the node's cgroup in every hierarchy (v1), or the one (v2).
func (r *runState) cgroupDirs() []string {
	d, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", r.cgroupName()))
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", r.cgroupName())); err == nil {
		d = append(d, filepath.Join("/sys/fs/cgroup", r.cgroupName()))
	}
	return d
}

// pids is every process of the run: the pid files' and, for the node,
// those in its cgroup (containerd's shims and the pods' processes).
func (r *runState) pids() []int {
	var pids []int
	files, _ := filepath.Glob(filepath.Join(r.dir, "k8s*", "*.pid"))
	for _, f := range files {
		if p, err := strconv.Atoi(strings.TrimSpace(readFile(f))); err == nil {
			pids = append(pids, p)
		}
	}
	for _, d := range r.cgroupDirs() {
		filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.Name() == "cgroup.procs" {
				for _, f := range strings.Fields(readFile(path)) {
					if p, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, p) {
						pids = append(pids, p)
					}
				}
			}
			return nil
		})
	}
	return pids
}

// alive: the process exists and is no zombie (the machine's pid 1 reaps
// the scripts' orphans only now and then).
func alive(pid int) bool {
	st := readFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(st, ')')
	if i < 0 || i+2 >= len(st) {
		return false
	}
	return st[i+2] != 'Z' && st[i+2] != 'X'
}
