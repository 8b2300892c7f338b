// Package k8stest gives tests a real Kubernetes control plane (etcd,
// kube-apiserver, controller-manager, scheduler v1.37.2) with kwok fake
// nodes, and on request a real kubelet node whose containers really run,
// started by the project's testinfra/start-k8s.sh and start-k8s-node.sh and
// stopped by the pids they record.
//
// One control plane serves a test process, started on first use. Its ports
// are picked free and its state is its own directory under /var/tmp, so
// several test processes (packages run by one go test) may each run one.
// The real node's bridge and subnet (10.201.0.0/24) are machine-wide, so
// only one process at a time runs it: it takes a machine-wide lock and
// waits, saying so in the test log, while another live process holds it.
//
// The binaries are built once per machine into a shared directory
// (DefaultBinDir; SKYGO_K8S_BIN overrides it) by testinfra/build-k8s.sh
// under a machine-wide lock. When they are missing the tests skip, unless
// SKYGO_REQUIRE_K8S=1: then the harness builds them (or waits for the build
// that holds the lock) and fails, rather than skips, when anything is
// missing. Root is needed; SKYGO_SKIP_K8S=1 skips the tests that ask.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		k8stest.Stop()
//		os.Exit(code)
//	}
package k8stest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The shape every test can count on. The cluster is shared by the tests of
// a process, so it does not change with what one test asks for: Options
// that the shape does not meet fail the test instead.
const (
	CPUNodes    = 1 // kwok-cpu-1: 32 CPUs, 256Gi, no GPU
	GPUNodes    = 2 // kwok-gpu-1, kwok-gpu-2: as the CPU node plus GPUsPerNode GPUs
	GPUsPerNode = 8
	NodeGPUs    = 2 // fake nvidia.com/gpu on the real node

	GPUResource   = "nvidia.com/gpu"
	GPUProduct    = "NVIDIA-H100-80GB-HBM3" // label nvidia.com/gpu.product
	GPUAccel      = "h100"                  // label skypilot.co/accelerator
	GPUAccelLabel = "skypilot.co/accelerator"

	Context   = "testinfra" // the admin kubeconfig's only context
	NodeName  = "testinfra-node"
	NodeIP    = "10.201.0.1"
	NodeImage = "testinfra.local/base:bookworm" // bash, coreutils, procps, rsync, iproute2, ping
	// NodeSubnet holds the real node's pod IPs; the host reaches them
	// directly, nothing else routes there.
	NodeSubnet = "10.201.0.0/24"
	nodeLabel  = "testinfra/real-node"
	nodeBridge = "tik8sbr0"
)

// DefaultBinDir holds the built binaries every test process shares.
const DefaultBinDir = "/var/lib/testinfra/k8s/bin"

// Options say what a test needs. A zero field means "whatever the shape
// has"; a non-zero one must match the shape's constant.
type Options struct {
	CPUNodes, GPUNodes, GPUsPerNode int
	// RealNode adds the real kubelet node (NodeName), started when the
	// first test asks for it and kept until Stop.
	RealNode bool
	NodeGPUs int // needs RealNode
}

// Cluster is a started control plane.
type Cluster struct {
	Kubeconfig string // admin (system:masters), token auth, namespace default
	Context    string
	Client     *kubernetes.Clientset
	REST       *rest.Config
	APIURL     string
	State      string // TESTINFRA_STATE of this cluster
	Bin        string // the binaries, kubectl among them
	Kubectl    string

	// The real node's, filled in once a test asked for RealNode.
	NodeName     string
	NodeIP       string
	NodeImage    string            // pods on the node use it with imagePullPolicy Never or IfNotPresent
	NodeSelector map[string]string // puts a pod on the real node rather than a kwok one
}

var (
	mu       sync.Mutex
	cpOnce   sync.Once
	cluster  *Cluster
	cpErr    error
	cpSkip   string
	nodeUp   bool
	nodeErr  error
	nodeSkip string
	run      *runState // what Stop undoes
)

// Start returns the process's control plane, starting it on first use,
// and adds the real node when o asks for it. It skips the test when
// Kubernetes cannot run here (not root, no binaries) unless
// SKYGO_REQUIRE_K8S=1, and fails it when a start fails.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	required := os.Getenv("SKYGO_REQUIRE_K8S") == "1"
	if os.Getenv("SKYGO_SKIP_K8S") == "1" && !required {
		t.Skip("SKYGO_SKIP_K8S=1: skipping tests against a real Kubernetes control plane")
	}
	if os.Geteuid() != 0 {
		msg := "the Kubernetes test cluster needs root (its real node uses cgroups, a bridge and containerd); run the tests as root"
		if required {
			t.Fatal(msg + " (SKYGO_REQUIRE_K8S=1 is set)")
		}
		t.Skip(msg + " or set SKYGO_SKIP_K8S=1")
	}
	if err := checkShape(o); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	cpOnce.Do(func() { cluster, cpSkip, cpErr = startControlPlane(t, required) })
	if cpErr != nil {
		t.Fatal(cpErr)
	}
	if cpSkip != "" {
		t.Skip(cpSkip)
	}
	if o.RealNode && !nodeUp {
		// a failed or skipped node start is not retried: the next test
		// would wait as long again for the same outcome
		if nodeErr == nil && nodeSkip == "" {
			nodeSkip, nodeErr = startNode(t, cluster, required)
			nodeUp = nodeErr == nil && nodeSkip == ""
		}
		if nodeErr != nil {
			t.Fatal(nodeErr)
		}
		if nodeSkip != "" {
			t.Skip(nodeSkip)
		}
	}
	return cluster
}

func checkShape(o Options) error {
	check := func(name string, got, want int) error {
		if got != 0 && got != want {
			return fmt.Errorf("k8stest: Options.%s = %d, but the shared test cluster has %d (the k8stest.%s constant): every test of a process uses one cluster of a fixed shape", name, got, want, name)
		}
		return nil
	}
	if o.NodeGPUs != 0 && !o.RealNode {
		return fmt.Errorf("k8stest: Options.NodeGPUs needs RealNode")
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{{"CPUNodes", o.CPUNodes, CPUNodes}, {"GPUNodes", o.GPUNodes, GPUNodes}, {"GPUsPerNode", o.GPUsPerNode, GPUsPerNode}, {"NodeGPUs", o.NodeGPUs, NodeGPUs}} {
		if err := check(c.name, c.got, c.want); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops the real node and the control plane, if this process started
// them, removes their state and releases the locks; call it from TestMain
// after m.Run. What the stop scripts left behind (a live pid, a port still
// served, a mount, the bridge) is reported on stderr.
func Stop() {
	for _, p := range stop() {
		fmt.Fprintln(os.Stderr, "k8stest: left after stop:", p)
	}
}

// stop is Stop returning what was left behind.
func stop() []string {
	mu.Lock()
	defer mu.Unlock()
	if run == nil {
		return nil
	}
	left := run.stop()
	run = nil
	return left
}
