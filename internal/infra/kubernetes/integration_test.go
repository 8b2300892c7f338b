package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil/k8stest"
)

// These tests drive the provisioner against a real API server and
// scheduler (internal/testutil/k8stest) on kwok's fake nodes, where pods
// are scheduled and become Running but no container runs: what is
// checked is the objects, the scheduling, the failure reasons and the
// cleanup. Commands in pods are tested end to end on the real node
// (internal/e2e).

func TestMain(m *testing.M) {
	code := m.Run()
	k8stest.Stop()
	os.Exit(code)
}

// kwokInfra is the infrastructure of a server whose kubeconfig is the
// test cluster's, in a namespace of the test's own, with pods kept on
// the kwok nodes.
func kwokInfra(t testing.TB, extra string) (*Infra, *k8stest.Cluster, string) {
	t.Helper()
	c := k8stest.Start(t, k8stest.Options{})
	ns := c.Namespace(t)
	home := t.TempDir()
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	cfg := "kubernetes:\n  namespace: " + ns + "\n  pod_config:\n    spec:\n      nodeSelector:\n        type: kwok\n" + extra
	if err := os.MkdirAll(filepath.Join(home, ".sky"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".sky", "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := Open(infra.Env{Home: home, Sky: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	return in.(*Infra), c, ns
}

func TestProvisionGPUPodsOnKwok(t *testing.T) {
	in, c, ns := kwokInfra(t, "")
	p, err := in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := provision.ClusterSpec{Name: "gpu2", NumNodes: 2, Resources: provision.Resources{CPUs: 2, MemoryGB: 4, GPUs: map[string]float64{"H100": 1}},
		Labels: map[string]string{"project": "unit"}, ImageID: "docker:example/image:1",
		Config: map[string]any{"kubernetes": map[string]any{"pod_config": map[string]any{"metadata": map[string]any{"labels": map[string]any{"from-task": "yes"}}}}}}
	info, err := p.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Nodes) != 2 || info.Nodes[0].ID != in.nameOnCloud("gpu2")+"-head" || info.Nodes[1].ID != in.nameOnCloud("gpu2")+"-worker1" {
		t.Fatalf("nodes: %+v", info.Nodes)
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: clusterSelector(in.nameOnCloud("gpu2"))})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("want 2 pods, got %d", len(pods.Items))
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodRunning || !strings.HasPrefix(pod.Spec.NodeName, "kwok-gpu-") {
			t.Errorf("pod %s: %s on %q", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
		}
		req := pod.Spec.Containers[0].Resources.Requests
		if g := req[corev1.ResourceName(k8stest.GPUResource)]; g.Value() != 1 {
			t.Errorf("pod %s: GPU request %v", pod.Name, req)
		}
		if cpu := req[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("2")) != 0 {
			t.Errorf("pod %s: cpu request %s", pod.Name, cpu.String())
		}
		if pod.Labels["project"] != "unit" || pod.Labels["from-task"] != "yes" || pod.Spec.NodeSelector["type"] != "kwok" {
			t.Errorf("pod %s: labels %v nodeSelector %v", pod.Name, pod.Labels, pod.Spec.NodeSelector)
		}
		if pod.Spec.Containers[0].Image != "example/image:1" {
			t.Errorf("pod %s: image %s", pod.Name, pod.Spec.Containers[0].Image)
		}
	}
	// Query sees both; one deleted behind our back is terminated, the
	// other still up.
	st, err := p.Query(ctx, "gpu2")
	if err != nil || len(st) != 2 || st[0].Status != provision.NodeUp || st[1].Status != provision.NodeUp {
		t.Fatalf("Query: %+v %v", st, err)
	}
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, info.Nodes[1].ID, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	c.WaitPodsGone(t, ns, "component="+info.Nodes[1].ID, 30*time.Second)
	if st, err = p.Query(ctx, "gpu2"); err != nil || len(st) != 2 || st[1].Status != provision.NodeTerminated {
		t.Errorf("Query after a pod was deleted: %+v %v", st, err)
	}
	// Provision again adopts the head and makes the missing worker.
	if _, err := p.Provision(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if st, err = p.Query(ctx, "gpu2"); err != nil || len(st) != 2 || st[1].Status != provision.NodeUp {
		t.Errorf("Query after re-provisioning: %+v %v", st, err)
	}
	if err := p.Terminate(ctx, "gpu2"); err != nil {
		t.Fatal(err)
	}
	if left := c.ListAll(t, ns, clusterSelector(in.nameOnCloud("gpu2"))); !left.Empty() {
		t.Errorf("left after Terminate: %+v", left)
	}
	if st, err = p.Query(ctx, "gpu2"); err != nil || len(st) != 0 {
		t.Errorf("Query after Terminate: %+v %v", st, err)
	}
	if err := p.Stop(ctx, "gpu2"); err == nil {
		t.Errorf("Stop of a Kubernetes cluster succeeded")
	}
}

func TestUnschedulableIsCapacityError(t *testing.T) {
	in, c, ns := kwokInfra(t, "  provision_timeout: 3\n")
	p, _ := in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
	ctx := context.Background()
	_, err := p.Provision(ctx, provision.ClusterSpec{Name: "big", NumNodes: 3,
		Resources: provision.Resources{CPUs: 1, MemoryGB: 1, GPUs: map[string]float64{"H100": 8}}})
	var ce *provision.CapacityError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "Insufficient "+k8stest.GPUResource) || !strings.Contains(err.Error(), "not enough GPUs") {
		t.Fatalf("want a capacity error with the scheduler's reason, got %v", err)
	}
	if left := c.ListAll(t, ns, clusterSelector(in.nameOnCloud("big"))); !left.Empty() {
		t.Errorf("left after the failed launch: %+v", left)
	}
}

func TestFeasibleAndGPUs(t *testing.T) {
	in, _, _ := kwokInfra(t, "")
	cs := in.Capacity()
	cands, why := cs.Feasible(context.Background(), optimizer.Request{AccName: "H100", AccCount: 8}, 1)
	if len(cands) != 1 || cands[0].Region != k8stest.Context || cands[0].InstanceType == "" {
		t.Errorf("8x H100: %+v (%s)", cands, why)
	}
	cands, why = cs.Feasible(context.Background(), optimizer.Request{AccName: "H100", AccCount: 16}, 1)
	if len(cands) != 0 || !strings.Contains(why, "H100") {
		t.Errorf("16x H100: want none with a reason, got %+v (%s)", cands, why)
	}
	rows, err := in.GPUs(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range rows {
		if r.Node == "" && r.GPU == "H100" {
			total += r.Total
		}
	}
	if total < k8stest.GPUNodes*k8stest.GPUsPerNode {
		t.Errorf("GPUs: %d H100 in total, want at least %d: %+v", total, k8stest.GPUNodes*k8stest.GPUsPerNode, rows)
	}
}

// BenchmarkLaunch100 provisions 100 pods on kwok nodes until all are
// Running, against a baseline made in the same run: the same 100 pods
// created straight through client-go and waited for by a watch, which
// is the floor any launch on this API server can reach.
func BenchmarkLaunch100(b *testing.B) {
	const n = 100
	in, c, ns := kwokInfra(b, "")
	ctx := context.Background()
	p, _ := in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
	var ours, raw time.Duration
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench%d", i)
		t0 := time.Now()
		if _, err := p.Provision(ctx, provision.ClusterSpec{Name: name, NumNodes: n, Resources: provision.Resources{CPUs: 0.1, MemoryGB: 0.1}}); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(t0)
		if err := p.Terminate(ctx, name); err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		rawLaunch(b, c, ns, fmt.Sprintf("raw%d", i), n)
		raw += time.Since(t0)
	}
	b.ReportMetric(float64(ours.Milliseconds())/float64(b.N), "ms/launch")
	b.ReportMetric(float64(raw.Milliseconds())/float64(b.N), "baseline-ms")
	b.ReportMetric(float64(ours)/float64(raw), "ratio")
	b.Logf("100-node launch to all pods Running: %.2fs; client-go baseline (create + watch): %.2fs; ratio %.2f",
		ours.Seconds()/float64(b.N), raw.Seconds()/float64(b.N), float64(ours)/float64(raw))
}

// rawLaunch creates n minimal pods in parallel and waits until all are
// Running, then deletes them.
func rawLaunch(b *testing.B, c *k8stest.Cluster, ns, name string, n int) {
	ctx := context.Background()
	pods := c.Client.CoreV1().Pods(ns)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{"raw": name}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"type": "kwok"}, Containers: []corev1.Container{{Name: "c", Image: "x",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
			if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "raw=" + name})
	if err != nil {
		b.Fatal(err)
	}
	running := map[string]bool{}
	for ev := range w.ResultChan() {
		if pod, ok := ev.Object.(*corev1.Pod); ok && pod.Status.Phase == corev1.PodRunning {
			running[pod.Name] = true
		}
		if len(running) == n {
			break
		}
	}
	w.Stop()
	zero := int64(0)
	_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: "raw=" + name})
	c.WaitPodsGone(b, ns, "raw="+name, 60*time.Second)
}

// TestPricingOnKwok: kubernetes.pricing prices the candidates, the
// context's own rates over the global ones; without it pods cost nothing.
func TestPricingOnKwok(t *testing.T) {
	in, _, _ := kwokInfra(t, "  pricing:\n    cpu: 0.1\n    memory: 0.01\n    accelerators: {H100: 2}\n"+
		"  context_configs:\n    "+k8stest.Context+":\n      pricing:\n        accelerators: {H100: 2.5}\n")
	ctx := context.Background()
	cands, why := in.Capacity().Feasible(ctx, optimizer.Request{AccName: "H100", AccCount: 2}, 1)
	if len(cands) != 1 || cands[0].HourlyPrice != 5 {
		t.Errorf("2x H100 at the context's 2.5 an hour: %+v (%s)", cands, why)
	}
	cands, why = in.Capacity().Feasible(ctx, optimizer.Request{CPUs: catalog.Bound{Value: 4}, Memory: catalog.Bound{Value: 16}}, 1)
	if len(cands) != 1 || math.Abs(cands[0].HourlyPrice-(cands[0].VCPUs*0.1+cands[0].MemoryGiB*0.01)) > 1e-9 || cands[0].HourlyPrice == 0 {
		t.Errorf("a CPU pod at the global rates: %+v (%s)", cands, why)
	}
}
