package k8stest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// Namespace is a new namespace for one test, deleted (without waiting)
// when the test ends, so that tests of a process do not see each other's
// objects.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: strings.Trim(name, "-") + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// Objects are names of what ListAll found, each list sorted.
type Objects struct {
	Pods, Services, PVCs []string
}

// Empty: nothing was found.
func (o Objects) Empty() bool { return len(o.Pods)+len(o.Services)+len(o.PVCs) == 0 }

// ListAll lists the pods, services and PersistentVolumeClaims in
// namespace ns that match labelSelector (e.g. "skypilot-cluster-name=x"),
// e.g. to check that a teardown left none.
func (c *Cluster) ListAll(t testing.TB, ns, labelSelector string) Objects {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: labelSelector}
	var o Objects
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		o.Pods = append(o.Pods, p.Name)
	}
	svcs, err := c.Client.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		o.Services = append(o.Services, s.Name)
	}
	pvcs, err := c.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pvcs.Items {
		o.PVCs = append(o.PVCs, p.Name)
	}
	sort.Strings(o.Pods)
	sort.Strings(o.Services)
	sort.Strings(o.PVCs)
	return o
}

// WaitPodsGone waits until no pod in ns matches labelSelector, and fails
// the test with the pods left after timeout.
func (c *Cluster) WaitPodsGone(t testing.TB, ns, labelSelector string, timeout time.Duration) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(timeout); ; {
		pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labelSelector})
		if err != nil {
			t.Fatal(err)
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %q in %s still there after %v: %s", labelSelector, ns, timeout, strings.Join(left, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitPodRunning waits until pod ns/name is Running with every container
// ready, and returns it; it fails the test with the pod's events when the
// pod fails or timeout passes.
func (c *Cluster) WaitPodRunning(t testing.TB, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if err == nil && p.Status.Phase == corev1.PodRunning && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}) {
			return p
		}
		failed := err == nil && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded)
		if failed || time.Now().After(deadline) {
			phase := "absent"
			if err == nil {
				phase = string(p.Status.Phase)
			}
			t.Fatalf("pod %s/%s is %s, not Running and Ready (waited up to %v); events:\n%s", ns, name, phase, timeout, strings.Join(c.PodEvents(t, ns, name), "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PodEvents are the events of pod ns/name, oldest first, each as
// "Type Reason: Message" (e.g. "Warning FailedScheduling: 0/3 nodes are
// available: ...").
func (c *Cluster) PodEvents(t testing.TB, ns, name string) []string {
	t.Helper()
	evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	items := evs.Items
	when := func(e corev1.Event) time.Time {
		for _, ts := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
			if !ts.IsZero() {
				return ts
			}
		}
		return e.CreationTimestamp.Time
	}
	sort.SliceStable(items, func(i, j int) bool { return when(items[i]).Before(when(items[j])) })
	var out []string
	for _, e := range items {
		out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return out
}

// ExecResult is what a command run by ExecInPod printed and its exit code.
type ExecResult struct {
	Stdout, Stderr string
	ExitCode       int
}

// ExecInPod runs cmd in a container of pod ns/pod through the API
// server's exec API, as kubectl exec does: WebSocket, falling back to
// SPDY where the upgrade is refused. stdin may be nil. A non-zero exit is
// ExitCode, not an error; err is a failure to run at all.
func (c *Cluster) ExecInPod(ctx context.Context, ns, pod, container string, stdin io.Reader, cmd ...string) (ExecResult, error) {
	req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.REST, "GET", req.URL().String())
	if err != nil {
		return ExecResult{}, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.REST, "POST", req.URL())
	if err != nil {
		return ExecResult{}, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return ExecResult{}, err
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	res := ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit utilexec.ExitError
	if errors.As(err, &exit) && exit.Exited() {
		res.ExitCode = exit.ExitStatus()
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("exec %q in pod %s/%s: %w (stderr: %s)", cmd, ns, pod, err, res.Stderr)
	}
	return res, nil
}

// Exec runs a bash script in pod ns/pod's first container and returns its
// stdout; it fails the test on any error or a non-zero exit.
func (c *Cluster) Exec(t testing.TB, ns, pod, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.ExecInPod(ctx, ns, pod, "", nil, "/bin/bash", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%q in pod %s/%s exited %d\nstdout: %s\nstderr: %s", script, ns, pod, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// KubeconfigWithContext writes a copy of the admin kubeconfig whose one
// context is called name (SkyPilot's infra names such as k8s/<context>
// allow "/" and ":" in it) into a temporary directory of the test, and
// returns its path.
func (c *Cluster) KubeconfigWithContext(t testing.TB, name string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[c.Context]
	if ctx == nil {
		t.Fatalf("%s has no context %q", c.Kubeconfig, c.Context)
	}
	delete(cfg.Contexts, c.Context)
	cfg.Contexts[name] = ctx
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// StaticStorage makes a StorageClass named for namespace ns with n
// PersistentVolumes of 1Gi in it (ReadWriteOnce and ReadWriteMany, kept
// when released), as an administrator without a volume provisioner does
// (this control plane has none): a claim of that class binds to one at
// once. Each volume is a directory under hostDir of the machine, which a
// container on the real node sees; the directories are open to every
// container user. It returns once the volumes are Available; class and
// volumes are removed when the test ends.
func (c *Cluster) StaticStorage(t testing.TB, ns, hostDir string, n int) string {
	t.Helper()
	ctx := context.Background()
	name := ns + "-static"
	immediate := storagev1.VolumeBindingImmediate
	retain := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "kubernetes.io/no-provisioner",
		VolumeBindingMode: &immediate, ReclaimPolicy: &retain}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	for i := range n {
		pvName := fmt.Sprintf("%s-%d", name, i)
		dir := filepath.Join(hostDir, pvName)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil { // past the umask
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
				StorageClassName:              name,
				PersistentVolumeReclaimPolicy: retain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			}}
		if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
		})
	}
	// Available once the controller-manager's binder has seen them: a
	// claim made before that is offered to a provisioner (there is none,
	// so it gets a ProvisioningFailed event) until the binder's resync.
	for i := range n {
		pvName := fmt.Sprintf("%s-%d", name, i)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			if err == nil && pv.Status.Phase == corev1.VolumeAvailable {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("PersistentVolume %s not Available after 30s (%v)", pvName, err)
			}
		}
	}
	return name
}
