package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/testutil/k8stest"
)

func rawJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// asProvisioned is a stored volume as the backend hands it to a
// provisioner.
func asProvisioned(t *testing.T, v *state.Volume, path string) provision.Volume {
	t.Helper()
	pv := provision.Volume{Name: v.Name, Type: v.Type, NameOnCloud: v.NameOnCloud, Path: path, Ephemeral: v.IsEphemeral, SizeGi: v.SizeGi}
	if err := json.Unmarshal(v.Config, &pv.Config); err != nil {
		t.Fatal(err)
	}
	return pv
}

// TestVolumesOnKwok: a k8s-pvc volume is a claim that binds; a 2-node
// cluster's pods mount it and an ephemeral claim made with the cluster
// (absolute paths as they are, ~/ paths at their staging directory), and
// the ephemeral claim goes with the cluster while the named one stays
// until `sky volumes delete`. A missing class, a claim of another
// namespace and a cluster made without the volume are refused.
func TestVolumesOnKwok(t *testing.T) {
	in, c, ns := kwokInfra(t, "")
	ctx := context.Background()
	class := c.StaticStorage(t, ns, t.TempDir(), 2)

	missing := &state.Volume{Name: "nope", Type: TypePVC, SizeGi: 1, NameOnCloud: "nope-1",
		Config: rawJSON(t, map[string]any{"storage_class_name": "no-such-class"})}
	if err := in.ApplyVolume(ctx, missing, false); err == nil || !strings.Contains(err.Error(), `no StorageClass "no-such-class"`) {
		t.Errorf("apply with a missing class: %v", err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "nope-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused apply made its claim: %v", err)
	}

	data := &state.Volume{Name: "data", Type: TypePVC, SizeGi: 1, NameOnCloud: "data-2ab3",
		Config: rawJSON(t, map[string]any{"storage_class_name": class, "access_mode": "ReadWriteMany", "labels": map[string]any{"team": "ml"}})}
	if err := in.ApplyVolume(ctx, data, false); err != nil {
		t.Fatal(err)
	}
	if data.Region != k8stest.Context || !strings.Contains(string(data.Config), `"namespace":"`+ns+`"`) {
		t.Errorf("applied volume: region %q config %s", data.Region, data.Config)
	}
	pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-2ab3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Labels[labelVolumeName] != "data" || pvc.Labels["team"] != "ml" || pvc.Labels[labelParent] != labelParentValue ||
		*pvc.Spec.StorageClassName != class || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("claim: labels %v class %v modes %v", pvc.Labels, pvc.Spec.StorageClassName, pvc.Spec.AccessModes)
	}
	if err := in.ProbeVolume(ctx, data); err != nil {
		t.Errorf("probe of a fresh claim: %v", err)
	}
	// --use-existing finds it by its volume-name label too.
	adopted := &state.Volume{Name: "data", Type: TypePVC, Region: k8stest.Context, Config: rawJSON(t, map[string]any{})}
	if err := in.ApplyVolume(ctx, adopted, true); err != nil || adopted.NameOnCloud != "data-2ab3" || adopted.SizeGi != 1 ||
		!strings.Contains(string(adopted.Config), `"storage_class_name":"`+class+`"`) {
		t.Errorf("use-existing: %+v %v", adopted, err)
	}

	eph, err := in.EphemeralVolume("vols", api.VolumeMount{Path: "~/scratch",
		Ephemeral: &api.EphemeralVolume{SizeGi: 1, Config: map[string]any{"storage_class_name": class, "access_mode": "ReadWriteMany"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.CheckVolume(eph, 2); err != nil {
		t.Errorf("a ReadWriteMany claim on 2 nodes: %v", err)
	}
	p, err := in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
	if err != nil {
		t.Fatal(err)
	}
	spec := provision.ClusterSpec{Name: "vols", NumNodes: 2, Resources: provision.Resources{CPUs: 1, MemoryGB: 1},
		Volumes: []provision.Volume{asProvisioned(t, data, "/data"), asProvisioned(t, eph, "~/scratch")}}
	info, err := p.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	selector := clusterSelector(in.nameOnCloud("vols"))
	if got := c.ListAll(t, ns, selector).PVCs; len(got) != 1 || got[0] != eph.NameOnCloud {
		t.Errorf("the cluster's own claims: %v, want the ephemeral %s", got, eph.NameOnCloud)
	}
	for _, node := range info.Nodes {
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, node.ID, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claims := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims[v.Name] = v.PersistentVolumeClaim.ClaimName
			}
		}
		if claims[podVolumeName("/data")] != "data-2ab3" || claims[podVolumeName("~/scratch")] != eph.NameOnCloud {
			t.Errorf("pod %s claims %v", pod.Name, claims)
		}
		mounts := map[string]string{}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		if mounts[podVolumeName("/data")] != "/data" || mounts[podVolumeName("~/scratch")] != stagingDir("~/scratch") {
			t.Errorf("pod %s mounts %v", pod.Name, mounts)
		}
		if sc := pod.Spec.SecurityContext; sc == nil || sc.FSGroup == nil || *sc.FSGroup != 1000 {
			t.Errorf("pod %s security context %+v, want fsGroup 1000", pod.Name, sc)
		}
		if pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is %s", pod.Name, pod.Status.Phase)
		}
	}
	if pods, err := in.VolumePods(ctx, data); err != nil || len(pods) != 2 {
		t.Errorf("pods mounting the named volume: %v %v, want the cluster's 2", pods, err)
	}
	// An absolute path needs nothing more on the nodes.
	if _, err := in.AttachVolume(ctx, data, api.VolumeMount{Path: "/data", Name: "data"}, info, nil); err != nil {
		t.Errorf("attach of a volume the pods mount: %v", err)
	}
	if _, err := in.AttachVolume(ctx, data, api.VolumeMount{Path: "/elsewhere", Name: "data"}, info, nil); err == nil ||
		!strings.Contains(err.Error(), "a pod cannot take a volume later") {
		t.Errorf("attach at a path the pods were made without: %v", err)
	}

	// A claim of another namespace cannot be mounted.
	other := asProvisioned(t, data, "/data")
	other.Config["namespace"] = "elsewhere"
	var ce *provision.ConfigError
	if _, err := p.Provision(ctx, provision.ClusterSpec{Name: "otherns", NumNodes: 1, Resources: provision.Resources{CPUs: 1, MemoryGB: 1},
		Volumes: []provision.Volume{other}}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "namespace elsewhere") {
		t.Errorf("a volume of another namespace: %v", err)
	}
	if left := c.ListAll(t, ns, clusterSelector(in.nameOnCloud("otherns"))); !left.Empty() {
		t.Errorf("left after the refused launch: %+v", left)
	}

	// Down: the cluster's pods and its ephemeral claim go; the named
	// volume stays until it is deleted.
	if err := p.Terminate(ctx, "vols"); err != nil {
		t.Fatal(err)
	}
	if left := c.ListAll(t, ns, selector); !left.Empty() {
		t.Errorf("left after Terminate: %+v", left)
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-2ab3", metav1.GetOptions{}); err != nil {
		t.Errorf("Terminate took the named volume's claim: %v", err)
	}
	if pods, err := in.VolumePods(ctx, data); err != nil || len(pods) != 0 {
		t.Errorf("pods mounting the named volume after Terminate: %v %v", pods, err)
	}
	if err := in.DeleteVolume(ctx, data); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for in.ProbeVolume(ctx, data) == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if err := in.ProbeVolume(ctx, data); err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Errorf("probe after delete: %v", err)
	}
}

// TestVolumeChecks: the refusals that need no API server.
func TestVolumeChecks(t *testing.T) {
	in := &Infra{}
	rwo := &state.Volume{Name: "v", Type: TypePVC, Config: json.RawMessage(`{"access_mode":"ReadWriteOnce"}`)}
	if err := in.CheckVolume(rwo, 2); err == nil || !strings.Contains(err.Error(), "only one node can mount it") {
		t.Errorf("RWO on 2 nodes: %v", err)
	}
	if err := in.CheckVolume(rwo, 1); err != nil {
		t.Errorf("RWO on 1 node: %v", err)
	}
	if err := in.CheckVolume(&state.Volume{Name: "d", Type: TypePVC}, 2); err == nil {
		t.Errorf("a claim of the default mode (ReadWriteOnce) on 2 nodes was accepted")
	}
	if _, err := in.EphemeralVolume("c", api.VolumeMount{Path: "/x", Ephemeral: &api.EphemeralVolume{SizeGi: 0.5}}); err == nil {
		t.Errorf("an ephemeral volume under 1Gi was accepted")
	}
	if _, err := in.EphemeralVolume("c", api.VolumeMount{Path: "/x", Ephemeral: &api.EphemeralVolume{SizeGi: 2, Config: map[string]any{"access_mode": "RWX"}}}); err == nil ||
		!strings.Contains(err.Error(), "ReadWriteMany") {
		t.Errorf("a bad access mode: %v", err)
	}
	v, err := in.EphemeralVolume("train", api.VolumeMount{Path: "/scratch", Ephemeral: &api.EphemeralVolume{SizeGi: 2, Labels: map[string]string{"a": "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "train-"+pathHash("/scratch") || !v.IsEphemeral || v.SizeGi != 2 || !strings.Contains(string(v.Config), `"labels":{"a":"b"}`) {
		t.Errorf("ephemeral record: %+v", v)
	}
	for _, cfg := range []map[string]any{{}, {"host_path": "relative"}, {"host_path": "/"}, {"host_path": "/data", "cleanup_on_deletion": true}} {
		vc := volumeConfig{raw: cfg}
		_ = vc.parse()
		if err := checkHostPath(vc); err == nil {
			t.Errorf("host path config %v accepted", cfg)
		}
	}
	if err := checkHostPath(volumeConfig{raw: map[string]any{}, hostPath: "/data"}); err != nil {
		t.Errorf("host_path /data: %v", err)
	}
}

// TestUnboundClaimOnKwok: a claim nothing can bind keeps the pods
// unschedulable; the launch fails saying so, not as a capacity error
// another context could fix, and leaves no pod.
func TestUnboundClaimOnKwok(t *testing.T) {
	in, c, ns := kwokInfra(t, "  provision_timeout: 3\n")
	ctx := context.Background()
	class := c.StaticStorage(t, ns, t.TempDir(), 0) // a class with no volume in it
	v := &state.Volume{Name: "empty", Type: TypePVC, SizeGi: 1, NameOnCloud: "empty-1", Config: rawJSON(t, map[string]any{"storage_class_name": class})}
	if err := in.ApplyVolume(ctx, v, false); err != nil {
		t.Fatal(err)
	}
	p, _ := in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
	_, err := p.Provision(ctx, provision.ClusterSpec{Name: "unbound", NumNodes: 1, Resources: provision.Resources{CPUs: 1, MemoryGB: 1},
		Volumes: []provision.Volume{asProvisioned(t, v, "/data")}})
	var ce *provision.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "not bound") {
		t.Errorf("launch with an unbindable claim: %v", err)
	}
	if left := c.ListAll(t, ns, clusterSelector(in.nameOnCloud("unbound"))); len(left.Pods) != 0 {
		t.Errorf("pods left: %+v", left)
	}
}

func TestScheduleTimeout(t *testing.T) {
	rwx := []provision.Volume{{Type: TypePVC, Config: map[string]any{"access_mode": "ReadWriteMany"}}}
	for _, tc := range []struct {
		s    settings
		n    int
		vols []provision.Volume
		want time.Duration
	}{
		{settings{}, 1, nil, 10 * time.Second},
		{settings{}, 1000, nil, 60 * time.Second},
		{settings{}, 6, rwx, 181 * time.Second},
		{settings{}, 1000, rwx, 240 * time.Second},
		{settings{autoscaler: "gke"}, 1, nil, 60 * time.Second},
		{settings{timeoutSet: true, timeout: 5 * time.Second}, 1, rwx, 5 * time.Second},
	} {
		if got := tc.s.scheduleTimeout(tc.n, tc.vols); got != tc.want {
			t.Errorf("%+v n=%d vols=%v: %v, want %v", tc.s, tc.n, tc.vols, got, tc.want)
		}
	}
}
