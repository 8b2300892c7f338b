package kubernetes

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// baseParams is a two-node CPU cluster; tests change what they look at.
func baseParams() podParams {
	return podParams{
		NameOnCloud: "dev-1a2b",
		DisplayName: "dev",
		Namespace:   "default",
		User:        "alice",
		Index:       0,
		NumNodes:    2,
		CPUs:        2,
		MemoryGB:    4,
		Image:       "ubuntu:24.04",
	}
}

func gpuParams() podParams {
	p := baseParams()
	p.Accelerator, p.AccCount = "H100", 2
	p.GPUKey = "nvidia.com/gpu"
	p.GPULabelKey, p.GPULabelValues = "skypilot.co/accelerator", []string{"h100"}
	return p
}

func mustPod(t *testing.T, p podParams) *corev1.Pod {
	t.Helper()
	pod, err := buildPod(p)
	if err != nil {
		t.Fatalf("buildPod: %v", err)
	}
	return pod
}

func envMap(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestPodNameAndSelector(t *testing.T) {
	for _, tc := range []struct {
		index int
		want  string
	}{{0, "c-head"}, {1, "c-worker1"}, {12, "c-worker12"}} {
		if got := podName("c", tc.index); got != tc.want {
			t.Errorf("podName(c, %d) = %q, want %q", tc.index, got, tc.want)
		}
	}
	sel, err := labels.Parse(clusterSelector("dev-1a2b"))
	if err != nil {
		t.Fatalf("clusterSelector is not a label selector: %v", err)
	}
	for i := range 3 {
		p := baseParams()
		p.Index, p.NumNodes = i, 3
		pod := mustPod(t, p)
		if !sel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("selector %s does not match pod %s labels %v", sel, pod.Name, pod.Labels)
		}
		for _, svc := range buildServices(p) {
			if !sel.Matches(labels.Set(svc.Labels)) {
				t.Errorf("selector %s does not match service %s", sel, svc.Name)
			}
		}
	}
	if sel.Matches(labels.Set(clusterLabels("dev-1a2b-other", "alice", nil))) {
		t.Error("selector matches another cluster")
	}
}

func TestBuildPodHeadAndWorker(t *testing.T) {
	p := baseParams()
	p.Labels = map[string]string{"team": "ml"}
	p.CustomLabels = map[string]string{"cost-center": "42"}
	p.CustomAnnotations = map[string]string{"example.com/owner": "alice@example.com"}
	p.ManagedJobID, p.ManagedJobName = "7", "train"
	head := mustPod(t, p)

	wantLabels := map[string]string{
		"parent": "skypilot", "skypilot-cluster": "dev-1a2b", "skypilot-cluster-name": "dev-1a2b",
		"skypilot-user": "alice", "ray-cluster-name": "dev-1a2b", "ray-node-type": "head",
		"skypilot-head-node": "1", "component": "dev-1a2b-head", "team": "ml", "cost-center": "42",
	}
	if !maps.Equal(head.Labels, wantLabels) {
		t.Errorf("head labels = %v, want %v", head.Labels, wantLabels)
	}
	wantAnn := map[string]string{
		"skypilot-cluster-name": "dev", "example.com/owner": "alice@example.com",
		"skypilot-managed-job-id": "7", "skypilot-managed-job-name": "train",
	}
	if !maps.Equal(head.Annotations, wantAnn) {
		t.Errorf("head annotations = %v, want %v", head.Annotations, wantAnn)
	}
	if head.Name != "dev-1a2b-head" || head.Namespace != "default" {
		t.Errorf("head is %s/%s", head.Namespace, head.Name)
	}
	spec := head.Spec
	if spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %s", spec.RestartPolicy)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g > 30 {
		t.Errorf("terminationGracePeriodSeconds = %v, want a small value", g)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Name != "ray-node" || c.Image != "ubuntu:24.04" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("container name=%s image=%s pull=%s", c.Name, c.Image, c.ImagePullPolicy)
	}
	if want := []string{"/bin/bash", "-c", keepAliveScript}; !reflect.DeepEqual(c.Command, want) {
		t.Errorf("command = %q, want %q", c.Command, want)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "dshm" || c.VolumeMounts[0].MountPath != "/dev/shm" {
		t.Errorf("volumeMounts = %+v", c.VolumeMounts)
	}
	if len(spec.Volumes) != 1 || spec.Volumes[0].EmptyDir == nil || spec.Volumes[0].EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("volumes = %+v", spec.Volumes)
	}
	env := envMap(c)
	if e := env["SKYPILOT_POD_NODE_TYPE"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
		e.ValueFrom.FieldRef.FieldPath != "metadata.labels['ray-node-type']" {
		t.Errorf("SKYPILOT_POD_NODE_TYPE = %+v", e)
	}
	for name, res := range map[string]string{"SKYPILOT_POD_CPU_CORE_LIMIT": "requests.cpu", "SKYPILOT_POD_MEMORY_BYTES_LIMIT": "requests.memory"} {
		if e := env[name]; e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil ||
			e.ValueFrom.ResourceFieldRef.Resource != res || e.ValueFrom.ResourceFieldRef.ContainerName != "ray-node" {
			t.Errorf("%s = %+v, want resourceFieldRef %s", name, e, res)
		}
	}
	if env["NVIDIA_VISIBLE_DEVICES"].Value != "none" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %+v, want none without GPUs", env["NVIDIA_VISIBLE_DEVICES"])
	}

	p.Index = 1
	p.Command = []string{"/bin/sh", "-c", "exec sleep 1"}
	p.Env = []corev1.EnvVar{{Name: "FOO", Value: "bar"}}
	w := mustPod(t, p)
	if w.Name != "dev-1a2b-worker1" || w.Labels["ray-node-type"] != "worker" || w.Labels["skypilot-head-node"] != "0" ||
		w.Labels["component"] != "dev-1a2b-worker1" {
		t.Errorf("worker %s labels %v", w.Name, w.Labels)
	}
	wc := w.Spec.Containers[0]
	if !reflect.DeepEqual(wc.Command, p.Command) {
		t.Errorf("worker command = %q", wc.Command)
	}
	if last := wc.Env[len(wc.Env)-1]; last.Name != "FOO" || last.Value != "bar" {
		t.Errorf("caller env not appended last: %+v", wc.Env)
	}
}

func TestBuildPodGPU(t *testing.T) {
	pod := mustPod(t, gpuParams())
	if pod.Labels["skypilot-binpack"] != "gpu" {
		t.Errorf("no binpack label: %v", pod.Labels)
	}
	c := pod.Spec.Containers[0]
	if _, ok := envMap(c)["NVIDIA_VISIBLE_DEVICES"]; ok {
		t.Error("NVIDIA_VISIBLE_DEVICES set on a GPU pod")
	}
	for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		if q := l["nvidia.com/gpu"]; q.Value() != 2 {
			t.Errorf("nvidia.com/gpu = %s, want 2 in requests and limits", q.String())
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("CPU limit set without set_pod_resource_limits")
	}
}

func TestPodResources(t *testing.T) {
	for _, tc := range []struct {
		name             string
		cpus, mem, eph   float64
		limits           any
		wantReq, wantLim map[corev1.ResourceName]string
		wantErr          string
	}{
		{name: "whole", cpus: 2, mem: 4, wantReq: map[corev1.ResourceName]string{"cpu": "2", "memory": "4G"}},
		{name: "fractional", cpus: 0.5, mem: 1.5, wantReq: map[corev1.ResourceName]string{"cpu": "500m", "memory": "1500M"}},
		{name: "tiny cpu rounds up", cpus: 0.0001, mem: 1, wantReq: map[corev1.ResourceName]string{"cpu": "1m", "memory": "1G"}},
		{name: "ephemeral", cpus: 4, mem: 16, eph: 50, wantReq: map[corev1.ResourceName]string{"cpu": "4", "memory": "16G", "ephemeral-storage": "50G"}},
		{name: "limits false", cpus: 2, mem: 4, limits: false, wantReq: map[corev1.ResourceName]string{"cpu": "2", "memory": "4G"}},
		{name: "limits true", cpus: 2, mem: 4, eph: 10, limits: true,
			wantReq: map[corev1.ResourceName]string{"cpu": "2", "memory": "4G", "ephemeral-storage": "10G"},
			wantLim: map[corev1.ResourceName]string{"cpu": "2", "memory": "4G", "ephemeral-storage": "10G"}},
		{name: "limits multiplier", cpus: 2, mem: 4, eph: 10, limits: 1.5,
			wantReq: map[corev1.ResourceName]string{"cpu": "2", "memory": "4G", "ephemeral-storage": "10G"},
			wantLim: map[corev1.ResourceName]string{"cpu": "3", "memory": "6G", "ephemeral-storage": "15G"}},
		{name: "limits int multiplier", cpus: 0.5, mem: 1, limits: 2,
			wantReq: map[corev1.ResourceName]string{"cpu": "500m", "memory": "1G"},
			wantLim: map[corev1.ResourceName]string{"cpu": "1", "memory": "2G"}},
		{name: "multiplier below 1", cpus: 2, mem: 4, limits: 0.5, wantErr: "must be a number >= 1"},
		{name: "multiplier wrong type", cpus: 2, mem: 4, limits: "yes", wantErr: "want true, false or a number"},
		{name: "zero cpus", cpus: 0, mem: 4, wantErr: "invalid CPU request"},
		{name: "zero memory", cpus: 1, mem: 0, wantErr: "invalid memory request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := baseParams()
			p.CPUs, p.MemoryGB, p.EphemeralGB, p.ResourceLimits = tc.cpus, tc.mem, tc.eph, tc.limits
			pod, err := buildPod(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := pod.Spec.Containers[0].Resources
			checkList(t, "requests", r.Requests, tc.wantReq)
			checkList(t, "limits", r.Limits, tc.wantLim)
		})
	}
}

func checkList(t *testing.T, what string, got corev1.ResourceList, want map[corev1.ResourceName]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
	for k, w := range want {
		q, ok := got[k]
		if !ok {
			t.Errorf("%s: no %s", what, k)
			continue
		}
		if q.String() != w || q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s[%s] = %s, want %s", what, k, q.String(), w)
		}
	}
}

func TestScheduling(t *testing.T) {
	hasToleration := func(s corev1.PodSpec, want corev1.Toleration) bool {
		for _, tol := range s.Tolerations {
			if tol == want {
				return true
			}
		}
		return false
	}

	t.Run("gpu", func(t *testing.T) {
		p := gpuParams()
		p.NumNodes = 1
		s := mustPod(t, p).Spec
		na := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		want := corev1.NodeSelectorRequirement{Key: "skypilot.co/accelerator", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}}
		if len(na.NodeSelectorTerms) != 1 || !reflect.DeepEqual(na.NodeSelectorTerms[0].MatchExpressions, []corev1.NodeSelectorRequirement{want}) {
			t.Errorf("required node affinity = %+v", na)
		}
		if !hasToleration(s, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}) {
			t.Errorf("tolerations = %+v", s.Tolerations)
		}
		pa := s.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		if len(pa) != 1 || pa[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" ||
			pa[0].PodAffinityTerm.LabelSelector.MatchExpressions[0].Key != "skypilot-binpack" ||
			pa[0].PodAffinityTerm.LabelSelector.MatchExpressions[0].Values[0] != "gpu" {
			t.Errorf("pod affinity = %+v", pa)
		}
		if s.Affinity.PodAntiAffinity != nil {
			t.Error("anti-affinity on a one-node cluster")
		}
	})

	t.Run("tpu", func(t *testing.T) {
		p := baseParams()
		p.NumNodes = 1
		p.Accelerator, p.AccCount, p.GPUKey = "tpu-v5-lite-podslice", 4, "google.com/tpu"
		p.GPULabelKey, p.GPULabelValues = "cloud.google.com/gke-tpu-accelerator", []string{"tpu-v5-lite-podslice"}
		p.TopologyLabelKey, p.TopologyLabelValue = "cloud.google.com/gke-tpu-topology", "2x2"
		s := mustPod(t, p).Spec
		if !maps.Equal(s.NodeSelector, map[string]string{"cloud.google.com/gke-tpu-topology": "2x2"}) {
			t.Errorf("nodeSelector = %v", s.NodeSelector)
		}
		if !hasToleration(s, corev1.Toleration{Key: "google.com/tpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}) {
			t.Errorf("tolerations = %+v", s.Tolerations)
		}
		if q := s.Containers[0].Resources.Limits["google.com/tpu"]; q.Value() != 4 {
			t.Errorf("google.com/tpu limit = %s", q.String())
		}
		if e := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]; e.Key != "cloud.google.com/gke-tpu-accelerator" {
			t.Errorf("node affinity = %+v", e)
		}
	})

	t.Run("cpu avoids gpu nodes", func(t *testing.T) {
		p := baseParams()
		p.NumNodes = 1
		p.GPULabelKeys = []string{"nvidia.com/gpu.product", "skypilot.co/accelerator", "nvidia.com/gpu.product"}
		s := mustPod(t, p).Spec
		pref := s.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		want := []corev1.NodeSelectorRequirement{
			{Key: "nvidia.com/gpu.product", Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: "skypilot.co/accelerator", Operator: corev1.NodeSelectorOpDoesNotExist},
		}
		if len(pref) != 1 || !reflect.DeepEqual(pref[0].Preference.MatchExpressions, want) || pref[0].Weight <= 0 {
			t.Errorf("preferred node affinity = %+v", pref)
		}
		if s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil || len(s.Tolerations) != 0 {
			t.Errorf("CPU pod requires nodes or tolerates taints: %+v %+v", s.Affinity, s.Tolerations)
		}
	})

	t.Run("cpu single node without gpu labels", func(t *testing.T) {
		p := baseParams()
		p.NumNodes = 1
		if s := mustPod(t, p).Spec; s.Affinity != nil || s.NodeSelector != nil || s.Tolerations != nil {
			t.Errorf("unexpected scheduling constraints: %+v %v %v", s.Affinity, s.NodeSelector, s.Tolerations)
		}
	})

	t.Run("multi-node spreads", func(t *testing.T) {
		p := baseParams()
		p.NumNodes, p.Index = 3, 2
		anti := mustPod(t, p).Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		if len(anti) != 1 || anti[0].Weight != 100 || anti[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
			t.Fatalf("anti-affinity = %+v", anti)
		}
		e := anti[0].PodAffinityTerm.LabelSelector.MatchExpressions[0]
		if e.Key != "skypilot-cluster-name" || !reflect.DeepEqual(e.Values, []string{"dev-1a2b"}) {
			t.Errorf("anti-affinity selector = %+v", e)
		}
	})

	t.Run("spot", func(t *testing.T) {
		p := gpuParams()
		p.UseSpot, p.SpotLabelKey, p.SpotLabelValue = true, "cloud.google.com/gke-spot", "true"
		s := mustPod(t, p).Spec
		if s.NodeSelector["cloud.google.com/gke-spot"] != "true" {
			t.Errorf("nodeSelector = %v", s.NodeSelector)
		}
		if !hasToleration(s, corev1.Toleration{Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}) {
			t.Errorf("tolerations = %+v", s.Tolerations)
		}
		if len(s.Tolerations) != 2 {
			t.Errorf("want GPU and spot tolerations, got %+v", s.Tolerations)
		}
		p.SpotLabelKey = ""
		if _, err := buildPod(p); err == nil || !strings.Contains(err.Error(), "spot") {
			t.Errorf("spot without a label: err = %v", err)
		}
	})
}

func TestLabelChecks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		task    map[string]string
		custom  map[string]string
		wantErr string
	}{
		{name: "prefixed key", task: map[string]string{"example.com/team": "ml-1"}},
		{name: "empty value", task: map[string]string{"flag": ""}},
		{name: "bad value", task: map[string]string{"owner": "alice@example.com"}, wantErr: `resources.labels: value "alice@example.com" of label "owner"`},
		{name: "long value", task: map[string]string{"x": strings.Repeat("a", 64)}, wantErr: `label "x"`},
		{name: "bad key", task: map[string]string{"bad key": "v"}, wantErr: `resources.labels: label key "bad key"`},
		{name: "reserved", task: map[string]string{"skypilot-cluster-name": "other"}, wantErr: `label "skypilot-cluster-name" is set by SkyGo`},
		{name: "bad custom", custom: map[string]string{"a": "-x"}, wantErr: `kubernetes.custom_metadata.labels: value "-x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := baseParams()
			p.Labels, p.CustomLabels = tc.task, tc.custom
			_, err := buildPod(p)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	p := baseParams()
	p.CustomAnnotations = map[string]string{"no spaces": "v"}
	if _, err := buildPod(p); err == nil || !strings.Contains(err.Error(), "kubernetes.custom_metadata.annotations") {
		t.Errorf("bad annotation key: err = %v", err)
	}
}

func TestUserLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"alice":                        "alice",
		"Alice.Smith@example.com":      "alicesmithexamplecom",
		"1SkY-PiLot2-":                 "sky-pilot2",
		"user_":                        "user",
		"_-9":                          "",
		"":                             "",
		strings.Repeat("ab", 40):       strings.Repeat("ab", 31) + "a",
		strings.Repeat("a", 62) + "-b": strings.Repeat("a", 62),
	} {
		got := userLabelValue(in)
		if got != want {
			t.Errorf("userLabelValue(%q) = %q, want %q", in, got, want)
		}
		if msgs := content.IsLabelValue(got); len(msgs) > 0 {
			t.Errorf("userLabelValue(%q) = %q is not a label value: %v", in, got, msgs)
		}
	}
	if got := clusterLabels("c", "Bob Smith", map[string]string{"skypilot-cluster-name": "x", "k": "v"}); got["skypilot-user"] != "bobsmith" ||
		got["skypilot-cluster-name"] != "c" || got["k"] != "v" {
		t.Errorf("clusterLabels = %v", got)
	}
}

// TestObjectsPassValidation runs apimachinery's validation of names,
// labels and annotations over every object of a cluster, including a
// cluster name of the maximum length.
func TestObjectsPassValidation(t *testing.T) {
	long := strings.Repeat("a", 37) + "-1a2b" // 42 characters, SkyPilot's limit
	for _, name := range []string{"dev-1a2b", long} {
		for i := range 3 {
			p := gpuParams()
			p.NameOnCloud, p.Index, p.NumNodes = name, i, 3
			p.User = "Weird User!"
			p.Labels = map[string]string{"example.com/team": "ml"}
			p.CustomAnnotations = map[string]string{"example.com/note": "anything goes here: ✓"}
			pod := mustPod(t, p)
			if errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")); len(errs) > 0 {
				t.Errorf("pod %s: %v", pod.Name, errs)
			}
			svcs := buildServices(p)
			if i == 0 {
				svcs = append(svcs, buildLBService(p, []int{8080}))
			}
			for _, svc := range svcs {
				if errs := apivalidation.ValidateObjectMeta(&svc.ObjectMeta, true, apivalidation.NameIsDNS1035Label, field.NewPath("metadata")); len(errs) > 0 {
					t.Errorf("service %s: %v", svc.Name, errs)
				}
				for k, v := range svc.Spec.Selector {
					if len(content.IsLabelKey(k)) > 0 || len(content.IsLabelValue(v)) > 0 {
						t.Errorf("service %s selector %s=%s invalid", svc.Name, k, v)
					}
				}
			}
		}
	}
	p := baseParams()
	p.NameOnCloud = strings.Repeat("a", 60)
	if _, err := buildPod(p); err == nil || !strings.Contains(err.Error(), "cannot name Kubernetes objects") {
		t.Errorf("too long a name: err = %v", err)
	}
	p = baseParams()
	p.Namespace = "Bad_NS"
	if _, err := buildPod(p); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("bad namespace: err = %v", err)
	}
}

func TestBuildServices(t *testing.T) {
	p := baseParams()
	p.CustomLabels = map[string]string{"cost-center": "42"}
	head := buildServices(p)
	if len(head) != 2 {
		t.Fatalf("head services: %d", len(head))
	}
	hl, ssh := head[0], head[1]
	if hl.Name != "dev-1a2b-head" || hl.Spec.ClusterIP != corev1.ClusterIPNone ||
		!maps.Equal(hl.Spec.Selector, map[string]string{"component": "dev-1a2b-head"}) {
		t.Errorf("headless = %+v", hl)
	}
	if ssh.Name != "dev-1a2b-head-ssh" || len(ssh.Spec.Ports) != 1 || ssh.Spec.Ports[0].Port != 22 ||
		ssh.Spec.Ports[0].TargetPort.IntValue() != 22 || ssh.Spec.Selector["component"] != "dev-1a2b-head" {
		t.Errorf("ssh = %+v", ssh)
	}
	for _, s := range head {
		if s.Labels["parent"] != "skypilot" || s.Labels["skypilot-cluster-name"] != "dev-1a2b" || s.Labels["cost-center"] != "42" {
			t.Errorf("%s labels = %v", s.Name, s.Labels)
		}
		if s.Namespace != "default" {
			t.Errorf("%s namespace %q", s.Name, s.Namespace)
		}
	}
	p.Index = 1
	w := buildServices(p)
	if len(w) != 1 || w[0].Name != "dev-1a2b-worker1" || w[0].Spec.Selector["component"] != "dev-1a2b-worker1" {
		t.Errorf("worker services = %+v", w)
	}
	// The headless service's selector must pick exactly its own pod.
	pod := mustPod(t, p)
	if !labels.SelectorFromSet(w[0].Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Error("worker service does not select its pod")
	}
	p.Index = 0
	if labels.SelectorFromSet(w[0].Spec.Selector).Matches(labels.Set(mustPod(t, p).Labels)) {
		t.Error("worker service selects the head")
	}
}

func TestBuildLBService(t *testing.T) {
	p := baseParams()
	if buildLBService(p, nil) != nil {
		t.Error("LB service without ports")
	}
	svc := buildLBService(p, []int{8888, 80, 8888})
	if svc.Name != "dev-1a2b--skypilot-lb" || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Errorf("svc = %s %s", svc.Name, svc.Spec.Type)
	}
	var got []string
	for _, sp := range svc.Spec.Ports {
		got = append(got, sp.Name+":"+strconv.Itoa(int(sp.Port))+">"+sp.TargetPort.String())
	}
	if want := []string{"port-80:80>80", "port-8888:8888>8888"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ports = %v, want %v", got, want)
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	head := mustPod(t, p)
	p.Index = 1
	worker := mustPod(t, p)
	if !sel.Matches(labels.Set(head.Labels)) || sel.Matches(labels.Set(worker.Labels)) {
		t.Errorf("LB selector %s must match the head only", sel)
	}
	if svc.Labels["skypilot-cluster-name"] != "dev-1a2b" {
		t.Errorf("LB labels = %v", svc.Labels)
	}
}

func TestInstanceTypeNames(t *testing.T) {
	for _, tc := range []struct {
		cpus, mem float64
		acc       string
		n         int64
		want      string
	}{
		{2, 2, "", 0, "2CPU--2GB"},
		{4, 16, "H100", 1, "4CPU--16GB--H100:1"},
		{0.5, 1.5, "", 0, "0.5CPU--1.5GB"},
		{8, 32, "RTX 4090", 2, "8CPU--32GB--RTX_4090:2"},
		{1.25, 0.25, "", 0, "1.2CPU--0.2GB"}, // Python's "{:.1f}" rounds halves to even
		{1.96, 3, "", 0, "2.0CPU--3GB"},      // not whole, so one decimal
		{4, 16, "A100", 0, "4CPU--16GB"},
	} {
		if got := instanceTypeName(tc.cpus, tc.mem, tc.acc, tc.n); got != tc.want {
			t.Errorf("instanceTypeName(%v, %v, %q, %d) = %q, want %q", tc.cpus, tc.mem, tc.acc, tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cpus, mem float64
		acc       string
		n         int64
	}{{2, 2, "", 0}, {0.5, 1.5, "", 0}, {4, 16, "H100", 8}, {8, 32, "RTX 4090", 2}, {96, 1440, "H100-MEGA-80GB", 8}} {
		name := instanceTypeName(tc.cpus, tc.mem, tc.acc, tc.n)
		c, m, a, n, err := parseInstanceType(name)
		if err != nil || c != tc.cpus || m != tc.mem || a != tc.acc || n != tc.n {
			t.Errorf("parseInstanceType(%q) = %v %v %q %d %v, want %v %v %q %d", name, c, m, a, n, err, tc.cpus, tc.mem, tc.acc, tc.n)
		}
	}
	for _, bad := range []string{"", "4CPU", "4CPU--16", "xCPU--16GB", "-1CPU--1GB", "4CPU--16GB--H100",
		"4CPU--16GB--H100:0", "4CPU--16GB--:1", "4CPU--16GB--H100:1--x", "4.CPU--1GB", "4CPU--16GB--H 100:1"} {
		if _, _, _, _, err := parseInstanceType(bad); err == nil {
			t.Errorf("parseInstanceType(%q) succeeded", bad)
		} else if !strings.Contains(err.Error(), "<cpus>CPU--<memory>GB") && !strings.Contains(err.Error(), "count") {
			t.Errorf("parseInstanceType(%q): unhelpful error %v", bad, err)
		}
	}
}

// TestKeepAliveHelper is not a test: TestKeepAliveScript runs the test
// binary with this as the only test, to become a child subreaper (so
// orphans are re-parented to it, as to PID 1 in a container) and exec
// bash with the keep-alive script.
func TestKeepAliveHelper(t *testing.T) {
	script := os.Getenv("SKYGO_TEST_KEEPALIVE_SCRIPT")
	if script == "" {
		t.Skip("helper process for TestKeepAliveScript")
	}
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	err := syscall.Exec("/bin/bash", []string{"bash", "-c", script}, os.Environ())
	t.Fatalf("exec bash: %v", err)
}

// TestKeepAliveScript checks what a pod's PID 1 must do: reap orphans
// re-parented to it, and exit at once, with status 0, on TERM.
func TestKeepAliveScript(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// The subshell exits at once, leaving an orphan that lives until the
	// test has seen it re-parented and creates the stop file: an orphan
	// with a lifetime of its own (it was a 0.5 s sleep) can end before a
	// loaded machine lets the test look, and the test then never sees it.
	stop := filepath.Join(t.TempDir(), "stop")
	script := "( until [ -e " + stop + " ]; do sleep 0.05; done & ) ; " + keepAliveScript
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeepAliveHelper$")
	cmd.Env = append(os.Environ(), "SKYGO_TEST_KEEPALIVE_SCRIPT="+script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL); _ = cmd.Wait() })

	// While the orphan runs it is a child of bash, next to the loop's sleep.
	// The bound only has to outlast starting this binary and bash on a
	// loaded machine: the orphan waits for the test.
	waitFor(t, 30*time.Second, "the orphan to be re-parented to bash", func() (bool, string) {
		live, zombies := children(pid)
		return live == 2, fmt.Sprintf("%d live children, %d zombies", live, zombies)
	})
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// After it exits bash must reap it: no zombie, only the loop's sleep.
	waitFor(t, 3*time.Second, "bash to reap the orphan", func() (bool, string) {
		live, zombies := children(pid)
		return live == 1 && zombies == 0, fmt.Sprintf("%d live children, %d zombies", live, zombies)
	})

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("keep-alive exited with %v on TERM, want status 0", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("keep-alive took %v to exit on TERM", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("keep-alive did not exit on TERM")
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%s)", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// children counts the live and zombie children of pid from /proc.
func children(pid int) (live, zombies int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may
		// contain spaces: state ppid ...
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		if fields[0] == "Z" {
			zombies++
		} else {
			live++
		}
	}
	return live, zombies
}
