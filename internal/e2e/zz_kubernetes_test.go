package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/testutil"
	"github.com/skygo/skygo/internal/testutil/k8stest"
)

// Kubernetes end to end, against a real control plane (kube-apiserver,
// scheduler, controller-manager) with kwok's fake GPU nodes and one real
// kubelet node whose containers really run (internal/testutil/k8stest).
// The server reaches the API with the test's kubeconfig only; pods on the
// real node run the local base image, are dialled by pod IP, and reach
// each other the same way.
//
// The file's name puts these tests last in the package (go test runs a
// package's tests in file order): on a fresh machine CI builds the
// Kubernetes binaries in the background while the other tests run, and
// these wait for that build.

// k8sEnv is a server whose kubeconfig is the test cluster's, with its own
// namespace, and pods of the cluster on the real node through
// kubernetes.pod_config (plus extra config lines).
func k8sEnv(t testing.TB, realNode bool, extraConfig string) (*skyEnv, *k8stest.Cluster, string) {
	t.Helper()
	c := k8stest.Start(t, k8stest.Options{RealNode: realNode})
	ns := c.Namespace(t)
	e := newEnv(t)
	e.env = append(e.env, "KUBECONFIG="+c.Kubeconfig)
	cfg := "kubernetes:\n  namespace: " + ns + "\n"
	if realNode {
		cfg += `  pod_config:
    spec:
      nodeSelector:
        testinfra/real-node: "true"
      containers:
        - name: ray-node
          imagePullPolicy: Never
`
	}
	e.writeConfig(t, cfg+extraConfig)
	return e, c, ns
}

// clusterPods are the cluster's pods by the SkyPilot label, by name.
func clusterPods(t testing.TB, c *k8stest.Cluster, ns, cluster string) []corev1.Pod {
	t.Helper()
	pl, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "parent=skypilot"})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pl.Items {
		if strings.HasPrefix(p.Labels["skypilot-cluster-name"], cluster+"-") {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TestK8sCluster walks a 2-node GPU cluster on the real node through a
// user's story: check and gpus list reach the API, the launch makes two
// SkyPilot-shaped pods (requests, labels, GPU affinity, pod_config from
// the server's config and from the task's), setup and run on both with
// the pod IPs, exec, logs, cancel leaving no process, ssh through the
// exec stream, a pod deleted behind SkyGo's back seen by status -r, and
// down leaving no object.
func TestK8sCluster(t *testing.T) {
	// One at a time with the other Kubernetes tests: one control plane and node per machine (k8stest).
	k8sHarness.parallel(t)
	e, c, ns := k8sEnv(t, true, "")

	r := e.must("check", "kubernetes", "-v")
	if !strings.Contains(r.out(), "Kubernetes: enabled") || !strings.Contains(r.out(), k8stest.Context+": ") || !strings.Contains(r.out(), "H100") {
		t.Fatalf("sky check kubernetes -v did not reach the context and list its GPUs:\n%s", r)
	}
	g := e.must("gpus", "list", "--infra", "k8s")
	if !strings.Contains(g.out(), "H100") || !strings.Contains(g.out(), k8stest.NodeName) {
		t.Errorf("sky gpus list --infra k8s lacks the H100 nodes:\n%s", g)
	}

	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "code.txt"), []byte("from-workdir"), 0o644); err != nil {
		t.Fatal(err)
	}
	task := e.writeYAML(t, "k8s.yaml", `num_nodes: 2
resources:
  infra: k8s
  accelerators: H100:1
  cpus: 0.2
  memory: 0.25
  image_id: docker:`+k8stest.NodeImage+`
  labels:
    project: e2e
config:
  kubernetes:
    pod_config:
      metadata:
        labels:
          team: ml
      spec:
        tolerations:
          - key: example.com/e2e
            operator: Exists
workdir: `+wd+`
file_mounts:
  ~/mounted/code.txt: `+filepath.Join(wd, "code.txt")+`
setup: echo setup-on-$(hostname)
run: |
  echo "W rank=$SKYPILOT_NODE_RANK $(cat code.txt) $(cat ~/mounted/code.txt)"
  echo "R rank=$SKYPILOT_NODE_RANK ips=$(echo $SKYPILOT_NODE_IPS | tr ' ' ,) user=$(whoami) gpus=$SKYPILOT_NUM_GPUS_PER_NODE"
`)
	r = e.launchOK(t, "-c", "kc", task)
	pods := clusterPods(t, c, ns, "kc")
	if len(pods) != 2 {
		t.Fatalf("want 2 pods, got %d", len(pods))
	}
	var ips []string
	for i, p := range pods {
		ips = append(ips, p.Status.PodIP)
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != k8stest.NodeName {
			t.Errorf("pod %s: phase %s on node %q, want Running on %s", p.Name, p.Status.Phase, p.Spec.NodeName, k8stest.NodeName)
		}
		wantType := map[bool]string{true: "head", false: "worker"}[i == 0]
		for k, v := range map[string]string{"parent": "skypilot", "ray-node-type": wantType, "skypilot-user": p.Labels["skypilot-user"],
			"project": "e2e", "team": "ml", "skypilot-binpack": "gpu"} {
			if p.Labels[k] != v || v == "" {
				t.Errorf("pod %s: label %s=%q, want %q", p.Name, k, p.Labels[k], v)
			}
		}
		if p.Annotations["skypilot-cluster-name"] != "kc" {
			t.Errorf("pod %s: annotation skypilot-cluster-name=%q", p.Name, p.Annotations["skypilot-cluster-name"])
		}
		ctr := p.Spec.Containers[0]
		if q := ctr.Resources.Requests[corev1.ResourceName(k8stest.GPUResource)]; q.Value() != 1 {
			t.Errorf("pod %s: requests %v, want %s: 1", p.Name, ctr.Resources.Requests, k8stest.GPUResource)
		}
		if q := ctr.Resources.Limits[corev1.ResourceName(k8stest.GPUResource)]; q.Value() != 1 {
			t.Errorf("pod %s: limits %v, want %s: 1", p.Name, ctr.Resources.Limits, k8stest.GPUResource)
		}
		if q := ctr.Resources.Requests[corev1.ResourceCPU]; q.MilliValue() != 200 {
			t.Errorf("pod %s: cpu request %s, want 200m", p.Name, q.String())
		}
		if ctr.Name != "ray-node" || ctr.ImagePullPolicy != corev1.PullNever || ctr.Image != k8stest.NodeImage {
			t.Errorf("pod %s: container %s image %s pull %s", p.Name, ctr.Name, ctr.Image, ctr.ImagePullPolicy)
		}
		if p.Spec.NodeSelector["testinfra/real-node"] != "true" {
			t.Errorf("pod %s: the server's pod_config nodeSelector is missing: %v", p.Name, p.Spec.NodeSelector)
		}
		if !hasToleration(p, "example.com/e2e") || !hasToleration(p, k8stest.GPUResource) {
			t.Errorf("pod %s: tolerations %v lack the task's and the GPU's", p.Name, p.Spec.Tolerations)
		}
		if !requiresLabel(p, k8stest.GPUAccelLabel, k8stest.GPUAccel) {
			t.Errorf("pod %s: no required node affinity %s In [%s]: %+v", p.Name, k8stest.GPUAccelLabel, k8stest.GPUAccel, p.Spec.Affinity)
		}
	}
	for _, want := range []string{"W rank=0 from-workdir from-workdir", "W rank=1 from-workdir from-workdir", "R rank=0", "R rank=1",
		"ips=" + ips[0] + "," + ips[1], "user=root", "gpus=1", "setup-on-"} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("the launch's output lacks %q:\n%s", want, r.out())
		}
	}

	st := e.status(false)
	if len(st) != 1 || st["kc"].Status != "UP" {
		t.Fatalf("sky status after the launch: %+v", st)
	}
	if x := e.must("exec", "--num-nodes", "2", "kc", "--", "echo exec-on-$SKYPILOT_NODE_RANK"); !strings.Contains(x.out(), "exec-on-0") || !strings.Contains(x.out(), "exec-on-1") {
		t.Errorf("sky exec:\n%s", x)
	}
	if l := e.must("logs", "kc", "1", "--no-follow"); !strings.Contains(l.out(), "R rank=1") {
		t.Errorf("sky logs kc 1:\n%s", l)
	}
	// A long job is cancelled: nothing of it is left in the pods.
	e.must("exec", "-d", "--num-nodes", "2", "kc", "--", "exec -a k8s-cancel-me sleep 300")
	if !waitFor(30*time.Second, func() bool {
		return strings.TrimSpace(c.Exec(t, ns, pods[1].Name, "pgrep -f k8s-cancel-[m]e || true")) != ""
	}) {
		t.Errorf("the job never started on the worker pod")
	}
	e.must("cancel", "-y", "kc", "3")
	for _, p := range pods {
		if !waitFor(15*time.Second, func() bool { return strings.TrimSpace(c.Exec(t, ns, p.Name, "pgrep -f k8s-cancel-[m]e || true")) == "" }) {
			t.Errorf("pod %s after sky cancel still runs: %s", p.Name, c.Exec(t, ns, p.Name, "ps -ef"))
		}
	}
	// ssh <cluster> goes through the exec stream to the pod's agent.
	gen := filepath.Join(paths.GeneratedSSH(e.home), "kc")
	for _, alias := range []string{"kc", "kc-worker1"} {
		sr := runCmd(t, 60*time.Second, e.env, "ssh", "-F", gen, "-o", "BatchMode=yes", alias, "echo ssh-$(whoami)-$SKYPILOT_NODE_RANK")
		if sr.code != 0 || !strings.Contains(sr.stdout, "ssh-root-") {
			t.Errorf("ssh %s: %s", alias, sr)
		}
	}

	// A pod deleted behind SkyGo's back: status -r sees it.
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), pods[1].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	c.WaitPodsGone(t, ns, "component="+pods[1].Name, 30*time.Second)
	if st := e.status(true); len(st) != 1 || st["kc"].Status != "INIT" {
		t.Errorf("sky status -r after a pod was deleted behind SkyGo's back: %+v", st)
	}
	e.must("down", "-y", "kc")
	sel := "skypilot-cluster-name=" + pods[0].Labels["skypilot-cluster-name"]
	if left := c.ListAll(t, ns, sel); !left.Empty() {
		t.Errorf("objects left after sky down: %+v", left)
	}
	if st := e.status(false); len(st) != 0 {
		t.Errorf("sky status after down: %+v", st)
	}
}

func hasToleration(p corev1.Pod, key string) bool {
	for _, tl := range p.Spec.Tolerations {
		if tl.Key == key {
			return true
		}
	}
	return false
}

func requiresLabel(p corev1.Pod, key, value string) bool {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, ex := range term.MatchExpressions {
			if ex.Key == key && ex.Operator == corev1.NodeSelectorOpIn {
				for _, v := range ex.Values {
					if v == value {
						return true
					}
				}
			}
		}
	}
	return false
}

// TestK8sFailover: more GPUs than free makes the scheduler refuse a pod;
// after the provision timeout the launch fails over to the next
// candidate with the scheduler's reason, and leaves no pod behind. More
// GPUs per node than any node has is refused by the optimizer at once.
// Without another candidate, the launch fails with the reason.
func TestK8sFailover(t *testing.T) {
	// One at a time with the other Kubernetes tests: one control plane and node per machine (k8stest).
	k8sHarness.parallel(t)
	e, c, ns := k8sEnv(t, false, "")
	// Three pods of 8 H100: the two kwok GPU nodes take one each, the
	// third fits nowhere.
	task := e.writeYAML(t, "fo.yaml", `num_nodes: 3
resources:
  ordered:
    - infra: k8s
      accelerators: H100:8
      cpus: 1
      memory: 1
    - infra: local
run: echo ran-on-$(echo $SKYPILOT_CLUSTER_INFO | tr -d ' ' | grep -o '"cloud":"[A-Za-z]*"')
`)
	start := time.Now()
	r := e.launchOK(t, "-c", "fo", task)
	for _, want := range []string{"Insufficient " + k8stest.GPUResource, `"cloud":"Local"`} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("the failover's output lacks %q:\n%s", want, r.out())
		}
	}
	t.Logf("failed over from Kubernetes to local in %.1fs", time.Since(start).Seconds())
	if left := clusterPods(t, c, ns, "fo"); len(left) != 0 {
		t.Errorf("%d pods left on Kubernetes after the failover", len(left))
	}
	e.must("down", "-y", "fo")

	// 16 per node: no node has that many, so Kubernetes is not tried.
	t16 := e.writeYAML(t, "fo16.yaml", `resources:
  ordered:
    - infra: k8s
      accelerators: H100:16
    - infra: local
run: echo sixteen
`)
	r = e.launchOK(t, "-c", "fo16", t16)
	if !strings.Contains(r.out(), "sixteen") {
		t.Errorf("the 16-GPU task did not run locally:\n%s", r)
	}
	e.must("down", "-y", "fo16")

	// Kubernetes only: the launch fails with the scheduler's reason.
	only := e.writeYAML(t, "only.yaml", `num_nodes: 3
resources:
  infra: k8s
  accelerators: H100:8
  cpus: 1
  memory: 1
run: echo never
`)
	f := e.exec(3*time.Minute, nil, "launch", "-y", "-c", "only", only)
	if f.code == 0 || !strings.Contains(f.out(), "Insufficient "+k8stest.GPUResource) {
		t.Errorf("a Kubernetes-only launch that cannot be scheduled: want a failure naming the scheduler's reason:\n%s", f)
	}
	if left := clusterPods(t, c, ns, "only"); len(left) != 0 {
		t.Errorf("%d pods left after the failed launch", len(left))
	}
}

// TestK8sManagedJobRecovers: a managed job on the real node whose pod is
// deleted behind SkyGo's back is recovered onto a new pod and succeeds.
func TestK8sManagedJobRecovers(t *testing.T) {
	// One at a time with the other Kubernetes tests: one control plane and node per machine (k8stest).
	k8sHarness.parallel(t)
	e, c, ns := k8sEnv(t, true, "")
	e.env = append(e.env, "SKYGO_JOBS_RETRY_GAP=1s")
	e.must("jobs", "launch", "-y", "-d", "-n", "k8srec", "--infra", "k8s", "--cpus", "0.2", "--memory", "0.25",
		"--image-id", "docker:"+k8stest.NodeImage, "--", "sleep 15; echo done-$SKYPILOT_TASK_ID")
	var q map[int]mjob
	if !waitFor(90*time.Second, func() bool { q = e.queueByID(); return q[1].Status == "RUNNING" }) {
		t.Fatalf("job 1 not RUNNING after 90s: %v\n%s", q[1], e.controllerLog(1))
	}
	var orig []corev1.Pod
	if !waitFor(10*time.Second, func() bool { orig = clusterPods(t, c, ns, "k8srec"); return len(orig) == 1 }) {
		t.Fatalf("want the job's one pod, got %d", len(orig))
	}
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), orig[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if !waitFor(120*time.Second, func() bool {
		p := clusterPods(t, c, ns, "k8srec")
		return len(p) == 1 && p[0].UID != orig[0].UID && p[0].Status.Phase == corev1.PodRunning
	}) {
		t.Fatalf("no new pod 120s after the deletion: %v\n%s", e.queueByID()[1], e.controllerLog(1))
	}
	if !waitFor(120*time.Second, func() bool { q = e.queueByID(); return ended(q[1]) }) {
		t.Fatalf("job 1 did not end after its recovery: %v\n%s", q[1], e.controllerLog(1))
	}
	if q[1].Status != "SUCCEEDED" || q[1].RecoveryCount != 1 {
		t.Errorf("want SUCCEEDED with 1 recovery, got %v\n%s", q[1], e.controllerLog(1))
	}
	if !waitFor(60*time.Second, func() bool { return len(clusterPods(t, c, ns, "k8srec")) == 0 }) {
		t.Errorf("pods left after the managed job ended")
	}
}

// TestK8sGPUsLabel: `sky gpus label` labels a GPU node that only GPU
// Feature Discovery's product label describes, names the GPU node it
// cannot label and why, and the labelled node's GPUs then show in `sky
// gpus list`. The nodes are kwok's, made for this test.
func TestK8sGPUsLabel(t *testing.T) {
	// One at a time with the other Kubernetes tests: one control plane and node per machine (k8stest).
	k8sHarness.parallel(t)
	e, c, _ := k8sEnv(t, false, "")
	ctx := context.Background()
	suffix := strings.ToLower(strings.TrimPrefix(filepath.Base(e.home), "skye2e-"))
	mk := func(name string, labels map[string]string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{"cpu": resourceQty("8"), "memory": resourceQty("64Gi"), "pods": resourceQty("110"), k8stest.GPUResource: resourceQty("4")}}}
		n.Status.Allocatable = n.Status.Capacity
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	gfd, bare := "kwok-gfd-"+suffix, "kwok-bare-"+suffix
	mk(gfd, map[string]string{"type": "kwok-label-test", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
	mk(bare, map[string]string{"type": "kwok-label-test"})

	r := e.must("gpus", "label", "--context", k8stest.Context)
	if !strings.Contains(r.out(), gfd+": labelled skypilot.co/accelerator=a100-80gb") {
		t.Errorf("sky gpus label did not label the GFD node:\n%s", r)
	}
	if !strings.Contains(r.out(), bare+": not labelled") {
		t.Errorf("sky gpus label did not name the node it cannot label:\n%s", r)
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, gfd, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[k8stest.GPUAccelLabel] != "a100-80gb" || n.Labels["nvidia.com/gpu.product"] == "" {
		t.Errorf("node labels after sky gpus label: %v", n.Labels)
	}
	if g := e.must("gpus", "list", "--infra", "k8s"); !strings.Contains(g.out(), "A100-80GB") || !strings.Contains(g.out(), gfd) {
		t.Errorf("sky gpus list after labelling lacks the A100 node:\n%s", g)
	}
	if r := e.must("gpus", "label", "--cleanup"); !strings.Contains(r.out(), "Nothing to clean up") {
		t.Errorf("sky gpus label --cleanup:\n%s", r)
	}

	// The Python SDK's node and GPU availability calls see the same.
	probe := `import json, sky
info = sky.get(sky.kubernetes_node_info())
n = info['node_info_dict']['` + gfd + `']
avail = sky.get(sky.realtime_kubernetes_gpu_availability(name_filter='A100-80GB'))
print(json.dumps([n['accelerator_type'], n['total']['accelerator_count'], n['free']['accelerators_available'], avail]))`
	py := runCmd(t, 60*time.Second, append(append([]string{}, e.env...), "PYTHONPATH="+filepath.Join(testutil.RepoRoot(t), "python")), "/usr/bin/python3", "-c", probe)
	want := `["A100-80GB", 4, 4, [["` + k8stest.Context + `", [["A100-80GB", [1, 2, 4], 4, 4]]]]]`
	if py.code != 0 || strings.TrimSpace(py.stdout) != want {
		t.Errorf("the SDK's kubernetes_node_info / realtime_kubernetes_gpu_availability: want %s\n%s", want, py)
	}
}

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }

// TestK8sVolumes: a k8s-pvc volume made by `sky volumes apply` (at a ~/
// path: a link to its mount) and an ephemeral one made with the cluster
// (at an absolute path, listed first) are mounted in both pods of a
// cluster on the real node; what the task writes to the named volume is
// read back by a new cluster after `sky down`, while the ephemeral claim
// and its record go with the first cluster. The claims bind to static
// PersistentVolumes (this control plane has no provisioner).
func TestK8sVolumes(t *testing.T) {
	// One at a time with the other Kubernetes tests: one control plane and node per machine (k8stest).
	k8sHarness.parallel(t)
	e, c, ns := k8sEnv(t, true, "")
	hostDir := t.TempDir()
	class := c.StaticStorage(t, ns, hostDir, 2)
	vol := e.writeYAML(t, "vol.yaml", "name: data\ntype: k8s-pvc\ninfra: k8s\nsize: 1Gi\nconfig:\n  storage_class_name: "+class+"\n  access_mode: ReadWriteMany\n")
	if r := e.must("volumes", "apply", "-y", vol); !strings.Contains(r.out(), "Created volume data") {
		t.Fatalf("volumes apply: %s", r)
	}
	var recs []map[string]any
	e.mustJSON(&recs, "volumes", "ls", "-o", "json")
	if len(recs) != 1 || recs[0]["status"] != "READY" || recs[0]["region"] != k8stest.Context {
		t.Fatalf("volumes ls after apply: %v", recs)
	}
	claim, _ := recs[0]["name_on_cloud"].(string)
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), claim, metav1.GetOptions{}); err != nil {
		t.Fatalf("the volume's claim %q: %v", claim, err)
	}

	resources := "resources:\n  infra: k8s\n  cpus: 0.2\n  memory: 0.25\n  image_id: docker:" + k8stest.NodeImage + "\n"
	writer := e.writeYAML(t, "write.yaml", "num_nodes: 2\n"+resources+`volumes:
  ~/data: data
  /scratch:
    size: 1Gi
    config:
      storage_class_name: `+class+`
      access_mode: ReadWriteMany
run: |
  echo "from-rank-$SKYPILOT_NODE_RANK" > ~/data/rank$SKYPILOT_NODE_RANK.txt
  echo scratch > /scratch/s.txt && echo "scratch-ok-$SKYPILOT_NODE_RANK"
`)
	r := e.launchOK(t, "-c", "kv", writer)
	for _, want := range []string{"scratch-ok-0", "scratch-ok-1"} {
		if !strings.Contains(r.out(), want) {
			t.Errorf("launch output lacks %q:\n%s", want, r)
		}
	}
	recs = nil
	e.mustJSON(&recs, "volumes", "ls", "-o", "json")
	byName := map[string]map[string]any{}
	for _, rec := range recs {
		byName[rec["name"].(string)] = rec
	}
	ephName := ""
	for n, rec := range byName {
		if rec["is_ephemeral"] == true {
			ephName = n
		}
	}
	if byName["data"]["status"] != "IN_USE" || ephName == "" || !strings.HasPrefix(ephName, "kv-") {
		t.Errorf("volumes ls while kv runs: %v", recs)
	}
	pods := clusterPods(t, c, ns, "kv")
	sel := "skypilot-cluster-name=" + pods[0].Labels["skypilot-cluster-name"]
	if got := c.ListAll(t, ns, sel).PVCs; len(got) != 1 {
		t.Errorf("the cluster's ephemeral claims: %v", got)
	}
	e.must("down", "-y", "kv")
	if left := c.ListAll(t, ns, sel); !left.Empty() {
		t.Errorf("objects left after sky down: %+v", left)
	}
	recs = nil
	e.mustJSON(&recs, "volumes", "ls", "-o", "json")
	if len(recs) != 1 || recs[0]["name"] != "data" || recs[0]["status"] != "READY" {
		t.Errorf("volumes ls after down: want data READY alone, got %v", recs)
	}

	// A new cluster reads what the first one wrote.
	reader := e.writeYAML(t, "read.yaml", resources+"volumes:\n  ~/d: data\nrun: cat ~/d/rank0.txt ~/d/rank1.txt\n")
	r = e.launchOK(t, "-c", "kv2", reader)
	if !strings.Contains(r.out(), "from-rank-0") || !strings.Contains(r.out(), "from-rank-1") {
		t.Errorf("the second cluster did not read the volume's data back:\n%s", r)
	}
	e.must("down", "-y", "kv2")

	// A pod of somebody else's that mounts the claim: ls -r shows it, and
	// delete refuses while it is there.
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"type": "kwok"},
		Containers:   []corev1.Container{{Name: "c", Image: "example/none"}},
		Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	recs = nil
	e.mustJSON(&recs, "volumes", "ls", "-r", "-o", "json")
	if len(recs) != 1 || recs[0]["status"] != "IN_USE" || fmt.Sprint(recs[0]["usedby_pods"]) != "[foreign]" {
		t.Errorf("volumes ls -r with a foreign pod: %v", recs)
	}
	if r := e.exec(cmdTimeout, nil, "volumes", "delete", "-y", "data"); r.code == 0 || !strings.Contains(r.out(), "Volume data is used by pod(s) foreign.") {
		t.Errorf("delete while a foreign pod mounts it: %s", r)
	}
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), "foreign", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	c.WaitPodsGone(t, ns, "", 30*time.Second)
	if r := e.must("volumes", "delete", "-y", "data"); !strings.Contains(r.out(), "Volume data deleted.") {
		t.Errorf("volumes delete: %s", r)
	}
	if !waitFor(30*time.Second, func() bool {
		_, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}) {
		t.Errorf("claim %s left after volumes delete", claim)
	}
}

// TestK8sServe: a 2-replica service whose replicas are pods on the real
// node (`kubernetes.ports: podip`, as there is no load-balancer
// controller): the replica fixture goes to the pods as the workdir, each
// replica serves at its pod IP, both answer through the load balancer on
// this machine, and `sky serve down` leaves no pod.
func TestK8sServe(t *testing.T) {
	// One at a time with the other Kubernetes tests: one control plane and node per machine (k8stest).
	k8sHarness.parallel(t)
	e, c, ns := k8sEnv(t, true, "  ports: podip\n")
	e.env = append(e.env, "SKYGO_SERVE_DECISION_INTERVAL=1s", "SKYGO_SERVE_QPS_WINDOW=10s", "SKYGO_SERVE_RETRY_GAP=1s")
	e.requireServe()
	wd := t.TempDir()
	buildReplica(t, wd)
	yaml := svcYAML("k8s", "./replica", 8080, 1, fastProbe(60)+"replicas: 2\n")
	yaml = strings.Replace(yaml, "  ports: 8080\n", "  ports: 8080\n  cpus: 0.2\n  memory: 0.25\n  image_id: docker:"+k8stest.NodeImage+"\n", 1)
	yaml = strings.Replace(yaml, "run:", "workdir: "+wd+"\nrun:", 1)
	p := e.writeYAML(t, "svc.yaml", yaml)
	began := time.Now()
	e.serveUp("k8ssvc", p)
	s := e.waitService("k8ssvc", 150*time.Second, "2 READY", readyN(2, 1))
	t.Logf("2 replicas READY in pods %.1fs after serve up: %v", time.Since(began).Seconds(), s)
	var podIPs []string
	for _, r := range s.Replicas {
		for _, pod := range clusterPods(t, c, ns, r.Name) {
			podIPs = append(podIPs, pod.Status.PodIP)
		}
	}
	for _, r := range s.Replicas {
		inPod := false
		for _, ip := range podIPs {
			inPod = inPod || strings.Contains(r.Endpoint, ip+":8080")
		}
		if !inPod {
			t.Errorf("replica %d endpoint %q is not a pod IP of the replicas (%v) at the service port", r.ID, r.Endpoint, podIPs)
		}
	}
	ep := e.endpoint("k8ssvc")
	reachesReplicas(t, ep, 2, 1)
	e.must("serve", "down", "-y", "k8ssvc")
	if !waitFor(90*time.Second, func() bool {
		pl, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "parent=skypilot"})
		return err == nil && len(pl.Items) == 0
	}) {
		t.Errorf("replica pods left 90s after sky serve down")
	}
}

// TestK8sPool: a managed-jobs pool of 2 workers in pods on the real node
// runs its setup once in each; an array of 2 jobs on it succeeds on the
// workers (each job checks the setup ran where it runs); `sky jobs pool
// down` leaves no pod.
func TestK8sPool(t *testing.T) {
	// One at a time with the other Kubernetes tests: one control plane and node per machine (k8stest).
	k8sHarness.parallel(t)
	e, c, ns := k8sEnv(t, true, "")
	e.env = append(e.env, "SKYGO_JOBS_RETRY_GAP=1s")
	poolYAML := e.writeYAML(t, "pool.yaml", `pool:
  workers: 2
resources:
  infra: k8s
  cpus: 0.2
  memory: 0.25
  image_id: docker:`+k8stest.NodeImage+`
setup: echo v1 >> ~/setup_marker
run: echo the pool task's run is not run
`)
	jobYAML := e.writeYAML(t, "job.yaml", `name: kpj
run: |
  test "$(cat ~/setup_marker)" = v1
  echo "rank $SKYPILOT_JOB_RANK on $(hostname)"
`)
	e.must("jobs", "pool", "apply", "-y", "-p", "kp", poolYAML)
	e.waitPool("kp", 120*time.Second, "2 READY workers", allReady(2, 1))
	for _, w := range []string{"kp-1", "kp-2"} {
		if pods := clusterPods(t, c, ns, w); len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning {
			t.Errorf("worker %s: want one Running pod, got %d", w, len(pods))
		}
	}
	ids := submittedIDs(t, e.must("jobs", "launch", "-y", "-o", "id", "-p", "kp", "--num-jobs", "2", jobYAML))
	js := e.waitPoolJobs(ids, 120*time.Second, "SUCCEEDED")
	for _, id := range ids {
		if j := js[id]; j.Worker == nil || (*j.Worker != "kp-1" && *j.Worker != "kp-2") {
			t.Errorf("job %d: worker %v, want a worker of kp", id, j.Worker)
		}
	}
	e.must("jobs", "pool", "down", "-y", "kp")
	if !waitFor(90*time.Second, func() bool {
		pl, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "parent=skypilot"})
		return err == nil && len(pl.Items) == 0
	}) {
		t.Errorf("worker pods left 90s after sky jobs pool down")
	}
}

// TestK8sPostProvision: kubernetes.post_provision_runcmd runs in each pod
// once, before setup (both entry forms), and not again when the cluster
// is launched on again.
func TestK8sPostProvision(t *testing.T) {
	// One at a time with the other Kubernetes tests: one control plane and node per machine (k8stest).
	k8sHarness.parallel(t)
	e, c, ns := k8sEnv(t, true, "  post_provision_runcmd:\n    - echo ran >> /tmp/ppr\n    - [touch, /tmp/ppr list]\n")
	task := e.writeYAML(t, "ppr.yaml", "num_nodes: 2\nresources:\n  infra: k8s\n  cpus: 0.2\n  memory: 0.25\n  image_id: docker:"+k8stest.NodeImage+
		"\nsetup: test -e '/tmp/ppr list'\nrun: echo ppr-$(wc -l < /tmp/ppr)\n")
	e.launchOK(t, "-c", "kppr", task)
	r := e.launchOK(t, "-c", "kppr", task)
	if strings.Count(r.out(), "ppr-1") != 2 {
		t.Errorf("want each of the 2 pods to have run the commands once:\n%s", r)
	}
	for _, p := range clusterPods(t, c, ns, "kppr") {
		if got := strings.TrimSpace(c.Exec(t, ns, p.Name, "cat /tmp/ppr")); got != "ran" {
			t.Errorf("pod %s: /tmp/ppr %q, want one line", p.Name, got)
		}
	}
	e.must("down", "-y", "kppr")
}
