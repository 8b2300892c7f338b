package k8stest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestMain fails the run when the teardown left anything: a process of
// the run (by its recorded pid, or any process naming the state dir), a
// port, a mount, the bridge or the node's cgroup.
func TestMain(m *testing.M) {
	code := m.Run()
	var dir string
	if run != nil {
		dir = run.dir
	}
	left := stop()
	if dir != "" {
		left = append(left, processesNaming(dir)...)
		if _, err := os.Stat(dir); err == nil {
			left = append(left, "state dir "+dir)
		}
	}
	for _, l := range left {
		fmt.Fprintln(os.Stderr, "FAIL: k8stest teardown left", l)
		code = 1
	}
	os.Exit(code)
}

// processesNaming is every live process whose command line mentions dir.
func processesNaming(dir string) []string {
	var left []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd := strings.ReplaceAll(readFile(p), "\x00", " ")
		var pid int
		fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
		if strings.Contains(cmd, dir) && pid != os.Getpid() && alive(pid) {
			left = append(left, fmt.Sprintf("pid %d: %s", pid, cmd))
		}
	}
	return left
}

func TestCheckShape(t *testing.T) {
	for _, o := range []Options{{}, {CPUNodes: CPUNodes, GPUNodes: GPUNodes, GPUsPerNode: GPUsPerNode}, {RealNode: true, NodeGPUs: NodeGPUs}} {
		if err := checkShape(o); err != nil {
			t.Errorf("checkShape(%+v) = %v", o, err)
		}
	}
	for _, o := range []Options{{GPUsPerNode: 4}, {CPUNodes: 3}, {RealNode: true, NodeGPUs: 1}, {NodeGPUs: NodeGPUs}} {
		if err := checkShape(o); err == nil {
			t.Errorf("checkShape(%+v) accepted a shape the shared cluster does not have", o)
		}
	}
}

// TestControlPlane checks the kwok side of the cluster as SkyGo's
// Kubernetes tests use it: the version, the fake nodes' capacity and
// labels, real scheduling of GPU pods (and a FailedScheduling event for an
// impossible one), and the helpers that list and wait for objects.
func TestControlPlane(t *testing.T) {
	c := Start(t, Options{CPUNodes: CPUNodes, GPUNodes: GPUNodes, GPUsPerNode: GPUsPerNode})
	if c2 := Start(t, Options{}); c2 != c {
		t.Fatal("a second Start in the process gave another cluster")
	}
	ctx := context.Background()
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version %s, want v1.37.2", v.GitVersion)
	}

	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
		gpus := n.Status.Allocatable[GPUResource]
		want := int64(0)
		if strings.HasPrefix(n.Name, "kwok-gpu-") {
			want = GPUsPerNode
			if n.Labels[GPUAccelLabel] != GPUAccel || n.Labels["nvidia.com/gpu.product"] != GPUProduct {
				t.Errorf("node %s labels %v, want %s=%s and the product %s", n.Name, n.Labels, GPUAccelLabel, GPUAccel, GPUProduct)
			}
		}
		if gpus.Value() != want {
			t.Errorf("node %s allocatable %s = %s, want %d", n.Name, GPUResource, gpus.String(), want)
		}
	}
	slices.Sort(names)
	if want := []string{"kwok-cpu-1", "kwok-gpu-1", "kwok-gpu-2"}; !slices.Equal(names, want) {
		t.Fatalf("kwok nodes %v, want %v", names, want)
	}

	ns := c.Namespace(t)
	labels := map[string]string{"app": "k8stest"}
	gpuPod := func(name string, gpus int64) *corev1.Pod {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{GPUAccelLabel: GPUAccel},
				Containers: []corev1.Container{{Name: "main", Image: "unused", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{GPUResource: q}, Limits: corev1.ResourceList{GPUResource: q}}}},
			},
		}
	}
	for _, p := range []*corev1.Pod{gpuPod("gpu2", 2), gpuPod("gpu16", 16)} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if p := c.WaitPodRunning(t, ns, "gpu2", 30*time.Second); !strings.HasPrefix(p.Spec.NodeName, "kwok-gpu-") {
		t.Errorf("pod gpu2 asking for 2 GPUs runs on %q, want a kwok GPU node", p.Spec.NodeName)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		evs := c.PodEvents(t, ns, "gpu16")
		if slices.ContainsFunc(evs, func(e string) bool {
			return strings.HasPrefix(e, "Warning FailedScheduling: ") && strings.Contains(e, "Insufficient "+GPUResource)
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod gpu16 asking for 16 GPUs: no FailedScheduling event for %s; events %q", GPUResource, evs)
		}
		time.Sleep(200 * time.Millisecond)
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Labels: labels},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Port: 22}}}}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pvc", Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := c.ListAll(t, ns, "app=k8stest")
	want := Objects{Pods: []string{"gpu16", "gpu2"}, Services: []string{"svc"}, PVCs: []string{"pvc"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ListAll = %+v, want %+v", got, want)
	}
	if other := c.ListAll(t, ns, "app=other"); !other.Empty() {
		t.Errorf("ListAll of another label = %+v", other)
	}

	zero := int64(0)
	sel := metav1.ListOptions{LabelSelector: "app=k8stest"}
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Services(ns).Delete(ctx, "svc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "pvc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPodsGone(t, ns, "app=k8stest", 30*time.Second)
	// the PVC's protection finalizer goes once no pod uses it
	for deadline := time.Now().Add(30 * time.Second); ; {
		left := c.ListAll(t, ns, "app=k8stest")
		if left.Empty() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after deleting everything: %+v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestKubeconfigWithContext checks that a client reaches the cluster
// through a copy of the kubeconfig whose context has a SkyPilot-style name.
func TestKubeconfigWithContext(t *testing.T) {
	c := Start(t, Options{})
	const name = "gke_proj/us-central1:a"
	path := c.KubeconfigWithContext(t, name)
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("through context %q of %s: %v", name, path, err)
	}
}

// TestRealNode runs a container for real on the kubelet node and talks to
// it through the exec API: stdout, stderr, stdin and the exit code come
// back, and the pod gets an IP on the node's subnet.
func TestRealNode(t *testing.T) {
	c := Start(t, Options{RealNode: true, NodeGPUs: NodeGPUs})
	ctx := context.Background()
	n, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if !nodeReady(n) || ip != NodeIP || n.Labels[nodeLabel] != "true" || n.Labels[GPUAccelLabel] != GPUAccel {
		t.Fatalf("node %s: Ready %v, InternalIP %q (want %s), labels %v", n.Name, nodeReady(n), ip, NodeIP, n.Labels)
	}

	ns := c.Namespace(t)
	one := resource.MustParse("1")
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "real", Labels: map[string]string{"app": "k8stest-real"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  c.NodeSelector,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "main", Image: c.NodeImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), GPUResource: one},
					Limits:   corev1.ResourceList{GPUResource: one}}}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := c.WaitPodRunning(t, ns, "real", 2*time.Minute)
	_, subnet, _ := net.ParseCIDR(NodeSubnet)
	if p.Spec.NodeName != c.NodeName || !subnet.Contains(net.ParseIP(p.Status.PodIP)) {
		t.Errorf("pod on node %q with IP %q, want %s and an IP in %s", p.Spec.NodeName, p.Status.PodIP, c.NodeName, NodeSubnet)
	}

	res, err := c.ExecInPod(ctx, ns, "real", "main", nil, "echo", "hello from the pod")
	if err != nil {
		t.Fatal(err)
	}
	if res != (ExecResult{Stdout: "hello from the pod\n"}) {
		t.Errorf("exec echo = %+v", res)
	}
	res, err = c.ExecInPod(ctx, ns, "real", "main", strings.NewReader("through stdin"),
		"/bin/bash", "-c", "cat; echo; echo to-stderr >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if res != (ExecResult{Stdout: "through stdin\n", Stderr: "to-stderr\n", ExitCode: 3}) {
		t.Errorf("exec with stdin and exit 3 = %+v", res)
	}
	if got := strings.TrimSpace(c.Exec(t, ns, "real", "hostname")); got != "real" {
		t.Errorf("hostname in the pod = %q", got)
	}

	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "real", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	c.WaitPodsGone(t, ns, "app=k8stest-real", time.Minute)
}
