package kubernetes

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/skygo/skygo/internal/fielderr"
)

// fragment parses a pod_config as the config loader would hand it over.
func fragment(t *testing.T, src string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(src), &m); err != nil {
		t.Fatalf("bad test YAML: %v", err)
	}
	return m
}

func tolerationKeys(s corev1.PodSpec) []string {
	var keys []string
	for _, tol := range s.Tolerations {
		keys = append(keys, tol.Key)
	}
	return keys
}

// TestPodConfigLayers applies the server's pod_config and then the task's,
// the order buildPod documents.
func TestPodConfigLayers(t *testing.T) {
	server := fragment(t, `
metadata:
  labels: {team: infra, tier: batch}
  annotations: {example.com/from: server}
spec:
  nodeSelector: {pool: gpu-a}
  tolerations:
  - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
  imagePullSecrets:
  - name: server-secret
`)
	task := fragment(t, `
metadata:
  labels: {tier: interactive}
spec:
  nodeSelector: {zone: z1}
  tolerations:
  - {key: long-jobs, operator: Exists}
  containers:
  - name: ray-node
    imagePullPolicy: Never
    env:
    - {name: FROM_TASK, value: "1"}
`)
	p := gpuParams()
	p.PodConfigs = []map[string]any{server, task}
	p.PodConfigSources = []string{"server config", "task config"}
	pod := mustPod(t, p)

	if pod.Labels["team"] != "infra" || pod.Labels["tier"] != "interactive" {
		t.Errorf("labels = %v, want team from the server and tier from the task", pod.Labels)
	}
	if pod.Labels["skypilot-cluster-name"] != "dev-1a2b" || pod.Annotations["skypilot-cluster-name"] != "dev" ||
		pod.Annotations["example.com/from"] != "server" {
		t.Errorf("metadata lost in the merge: %v %v", pod.Labels, pod.Annotations)
	}
	if want := map[string]string{"pool": "gpu-a", "zone": "z1"}; !reflect.DeepEqual(pod.Spec.NodeSelector, want) {
		t.Errorf("nodeSelector = %v, want %v", pod.Spec.NodeSelector, want)
	}
	if got, want := tolerationKeys(pod.Spec), []string{"nvidia.com/gpu", "dedicated", "long-jobs"}; !reflect.DeepEqual(got, want) {
		t.Errorf("tolerations = %v, want %v (appended in order)", got, want)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers = %d, want the named patch merged into ray-node", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullNever || c.Image != "ubuntu:24.04" {
		t.Errorf("pull policy %s, image %s", c.ImagePullPolicy, c.Image)
	}
	env := envMap(c)
	if env["FROM_TASK"].Value != "1" || env["SKYPILOT_POD_NODE_TYPE"].ValueFrom == nil {
		t.Errorf("env = %+v, want the task's variable appended to SkyGo's", c.Env)
	}
	if c.Env[len(c.Env)-1].Name != "FROM_TASK" {
		t.Errorf("task env not appended last: %+v", c.Env)
	}
	if q := c.Resources.Limits["nvidia.com/gpu"]; q.Value() != 2 {
		t.Errorf("GPU limit lost: %v", c.Resources.Limits)
	}
	if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "server-secret" {
		t.Errorf("imagePullSecrets = %+v", pod.Spec.ImagePullSecrets)
	}

	// Each pod of the cluster gets the same configs; the first must not
	// have changed them.
	p.Index = 1
	w := mustPod(t, p)
	if got := tolerationKeys(w.Spec); len(got) != 3 {
		t.Errorf("second pod tolerations = %v: the configs were mutated by the first build", got)
	}
	if len(envMap(w.Spec.Containers[0])) != len(env) {
		t.Errorf("second pod env = %+v", w.Spec.Containers[0].Env)
	}
}

func TestPodConfigIdentityWins(t *testing.T) {
	p := baseParams()
	p.PodConfigs = []map[string]any{fragment(t, `
metadata:
  labels: {skypilot-cluster-name: stolen, component: other, extra: "yes"}
`)}
	pod := mustPod(t, p)
	if pod.Labels["skypilot-cluster-name"] != "dev-1a2b" || pod.Labels["component"] != "dev-1a2b-head" || pod.Labels["extra"] != "yes" {
		t.Errorf("labels = %v", pod.Labels)
	}
	for _, src := range []string{"metadata: {name: other}", "metadata: {namespace: kube-system}"} {
		p.PodConfigs = []map[string]any{fragment(t, src)}
		if _, err := buildPod(p); err == nil || !strings.Contains(err.Error(), "cannot be set") {
			t.Errorf("%s: err = %v", src, err)
		}
	}
	p.PodConfigs = []map[string]any{fragment(t, "metadata: {labels: {bad: '-x-'}}")}
	if _, err := buildPod(p); err == nil || !strings.Contains(err.Error(), "metadata.labels") {
		t.Errorf("invalid label from pod_config: err = %v", err)
	}
}

func TestMergePodConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
		check  func(t *testing.T, pod *corev1.Pod)
	}{
		{
			name: "unnamed container merges into the first",
			config: `
spec:
  containers:
  - imagePullPolicy: IfNotPresent
    securityContext: {privileged: true}
    resources:
      limits: {memory: 8Gi}
`,
			check: func(t *testing.T, pod *corev1.Pod) {
				if len(pod.Spec.Containers) != 1 {
					t.Fatalf("containers = %d", len(pod.Spec.Containers))
				}
				c := pod.Spec.Containers[0]
				if c.Name != "ray-node" || c.ImagePullPolicy != corev1.PullIfNotPresent ||
					c.SecurityContext == nil || !*c.SecurityContext.Privileged {
					t.Errorf("container = %+v", c)
				}
				if q := c.Resources.Limits[corev1.ResourceMemory]; q.String() != "8Gi" {
					t.Errorf("memory limit = %s", q.String())
				}
				if q := c.Resources.Requests[corev1.ResourceCPU]; q.String() != "2" {
					t.Errorf("cpu request lost: %v", c.Resources.Requests)
				}
			},
		},
		{
			name: "a new named container is a sidecar",
			config: `
spec:
  containers:
  - {name: sidecar, image: busybox, command: [sleep, infinity]}
`,
			check: func(t *testing.T, pod *corev1.Pod) {
				cs := pod.Spec.Containers
				if len(cs) != 2 || cs[0].Name != "ray-node" || cs[1].Name != "sidecar" || cs[1].Image != "busybox" {
					t.Errorf("containers = %+v", cs)
				}
			},
		},
		{
			name: "volumes and mounts merge by name",
			config: `
spec:
  volumes:
  - {name: dshm, emptyDir: {medium: Memory, sizeLimit: 2Gi}}
  - {name: data, persistentVolumeClaim: {claimName: data}}
  containers:
  - name: ray-node
    volumeMounts:
    - {name: data, mountPath: /data}
`,
			check: func(t *testing.T, pod *corev1.Pod) {
				vs := pod.Spec.Volumes
				if len(vs) != 2 || vs[0].EmptyDir == nil || vs[0].EmptyDir.SizeLimit.String() != "2Gi" ||
					vs[0].EmptyDir.Medium != corev1.StorageMediumMemory || vs[1].PersistentVolumeClaim.ClaimName != "data" {
					t.Errorf("volumes = %+v", vs)
				}
				ms := pod.Spec.Containers[0].VolumeMounts
				if len(ms) != 2 || ms[0].MountPath != "/dev/shm" || ms[1].MountPath != "/data" {
					t.Errorf("mounts = %+v", ms)
				}
			},
		},
		{
			name: "env by name replaces the value",
			config: `
spec:
  containers:
  - name: ray-node
    env:
    - {name: NVIDIA_VISIBLE_DEVICES, value: all}
`,
			check: func(t *testing.T, pod *corev1.Pod) {
				c := pod.Spec.Containers[0]
				n := 0
				for _, e := range c.Env {
					if e.Name == "NVIDIA_VISIBLE_DEVICES" {
						n++
						if e.Value != "all" {
							t.Errorf("value = %q", e.Value)
						}
					}
				}
				if n != 1 {
					t.Errorf("NVIDIA_VISIBLE_DEVICES appears %d times", n)
				}
			},
		},
		{
			name:   "command is replaced, not appended",
			config: `spec: {containers: [{command: [/bin/sh, -c, "true"]}]}`,
			check: func(t *testing.T, pod *corev1.Pod) {
				if got := pod.Spec.Containers[0].Command; !reflect.DeepEqual(got, []string{"/bin/sh", "-c", "true"}) {
					t.Errorf("command = %q", got)
				}
			},
		},
		{
			name:   "null clears and an empty list replaces",
			config: "spec:\n  terminationGracePeriodSeconds: null\n  volumes: []\n",
			check: func(t *testing.T, pod *corev1.Pod) {
				if pod.Spec.TerminationGracePeriodSeconds != nil || len(pod.Spec.Volumes) != 0 {
					t.Errorf("grace %v volumes %+v", pod.Spec.TerminationGracePeriodSeconds, pod.Spec.Volumes)
				}
			},
		},
		{
			name:   "numbers and quantities",
			config: "spec:\n  priority: 5\n  containers:\n  - resources: {requests: {cpu: 3, memory: 1.5Gi}}\n",
			check: func(t *testing.T, pod *corev1.Pod) {
				r := pod.Spec.Containers[0].Resources.Requests
				if *pod.Spec.Priority != 5 || r.Cpu().String() != "3" || r.Memory().String() != "1536Mi" {
					t.Errorf("priority %v requests %v", *pod.Spec.Priority, r)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := baseParams()
			p.NumNodes = 1
			pod := mustPod(t, p)
			if err := mergePodConfig(pod, fragment(t, tc.config)); err != nil {
				t.Fatalf("mergePodConfig: %v", err)
			}
			tc.check(t, pod)
		})
	}
}

func TestImagePullSecretsMergeFirst(t *testing.T) {
	pod := mustPod(t, baseParams())
	for _, src := range []string{"spec: {imagePullSecrets: [{name: a}]}", "spec: {imagePullSecrets: [{name: b}, {name: c}]}"} {
		if err := mergePodConfig(pod, fragment(t, src)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, s := range pod.Spec.ImagePullSecrets {
		names = append(names, s.Name)
	}
	// The second config's first item merges into (here: renames) the first
	// secret, as in SkyPilot; further items are kept.
	if want := []string{"b", "c"}; !reflect.DeepEqual(names, want) {
		t.Errorf("imagePullSecrets = %v, want %v", names, want)
	}
}

func TestMergePodConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		config   string
		path     string
		contains string
	}{
		{"spec: {containers: [{name: ray-node, imagePullPolicyy: Never}]}", "spec.containers[0].imagePullPolicyy", `unknown field; did you mean "imagePullPolicy"?`},
		{"spec: {nodeselector: {a: b}}", "spec.nodeselector", `did you mean "nodeSelector"?`},
		{"spec: {bogusThing: 1}", "spec.bogusThing", "unknown field"},
		{"specs: {}", "specs", `did you mean "spec"?`},
		{"spec: {containers: {name: x}}", "spec.containers", "want a list, got a mapping"},
		{"metadata: {labels: {version: 1}}", "metadata.labels.version", "want a string (quote numbers and booleans), got 1"},
		{"spec: {hostNetwork: yes-please}", "spec.hostNetwork", `want true or false, got "yes-please"`},
		{"spec: {priority: 1.5}", "spec.priority", "want an integer"},
		{"spec: {containers: [{resources: {limits: {cpu: lots}}}]}", "spec.containers[0].resources.limits.cpu", `invalid value "lots"`},
		{"spec: {tolerations: [{key: a, tolerationSeconds: x}]}", "spec.tolerations[0].tolerationSeconds", "want an integer"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			pod := mustPod(t, baseParams())
			before := pod.DeepCopy()
			err := mergePodConfig(pod, fragment(t, tc.config))
			var fe *fielderr.Error
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want a *fielderr.Error", err, err)
			}
			if fe.Path != tc.path || !strings.Contains(fe.Msg, tc.contains) {
				t.Errorf("err = %q, want path %q and %q", err, tc.path, tc.contains)
			}
			if !reflect.DeepEqual(pod, before) {
				t.Error("pod changed by a failed merge")
			}
		})
	}

	// buildPod names the source of a bad config.
	p := baseParams()
	p.PodConfigs = []map[string]any{{}, fragment(t, "spec: {nope: 1}")}
	p.PodConfigSources = []string{"server config", "task config"}
	_, err := buildPod(p)
	if err == nil || err.Error() != "kubernetes.pod_config of the task config: spec.nope: unknown field" {
		t.Errorf("err = %v", err)
	}
}

func TestNormalizeShapes(t *testing.T) {
	// Decoders other than yaml.v3 hand over map[any]any and typed slices.
	pod := mustPod(t, baseParams())
	overlay := map[string]any{
		"metadata": map[any]any{"labels": map[string]string{"a": "b"}},
		"spec": map[string]any{
			"tolerations": []map[string]any{{"key": "k", "operator": "Exists"}},
			"containers":  []any{map[any]any{"args": []string{"x"}}},
		},
	}
	if err := mergePodConfig(pod, overlay); err != nil {
		t.Fatal(err)
	}
	if pod.Labels["a"] != "b" || len(pod.Spec.Tolerations) != 1 || !reflect.DeepEqual(pod.Spec.Containers[0].Args, []string{"x"}) {
		t.Errorf("labels %v tolerations %+v args %q", pod.Labels, pod.Spec.Tolerations, pod.Spec.Containers[0].Args)
	}
	err := mergePodConfig(pod, map[string]any{"metadata": map[any]any{1: "x"}})
	var fe *fielderr.Error
	if !errors.As(err, &fe) || fe.Path != "metadata" || !strings.Contains(fe.Msg, "not a string") {
		t.Errorf("non-string key: err = %v", err)
	}
}
