package kubernetes

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Label keys and values SkyPilot puts on its objects. Existing tooling
// (dashboards, `kubectl get pods -l ...`, SkyPilot itself) selects on them,
// so they are kept verbatim.
const (
	labelParent            = "parent"
	labelParentValue       = "skypilot"
	labelCluster           = "skypilot-cluster" // deprecated in SkyPilot, still set
	labelClusterName       = "skypilot-cluster-name"
	labelUser              = "skypilot-user"
	labelRayCluster        = "ray-cluster-name"
	labelRayNodeType       = "ray-node-type"
	labelHeadNode          = "skypilot-head-node"
	labelComponent         = "component"
	labelBinpack           = "skypilot-binpack"
	labelBinpackValue      = "gpu"
	annotationClusterName  = "skypilot-cluster-name"
	annotationManagedJobID = "skypilot-managed-job-id"
	annotationManagedJob   = "skypilot-managed-job-name"

	containerName = "ray-node"
	hostnameKey   = "kubernetes.io/hostname"

	// Pods are deleted with grace 0, and the keep-alive command exits on
	// TERM at once, so a long grace period would only slow a drain.
	terminationGraceSeconds = 10
)

// keepAliveScript is PID 1 of the container when the caller gives no
// command. Bash ignores TERM as PID 1 unless it is trapped, and sleeping in
// the background with `wait` keeps bash in a state where the trap runs at
// once and where its SIGCHLD handling reaps orphans re-parented to it
// (processes the agent daemonizes).
const keepAliveScript = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`

// podParams is everything one pod of a cluster needs.
type podParams struct {
	NameOnCloud string // the cluster's name on Kubernetes (pod name prefix, label values)
	DisplayName string // the SkyGo cluster name (annotation skypilot-cluster-name)
	Namespace   string
	User        string // skypilot-user label; sanitized by userLabelValue
	Index       int    // 0 = head
	NumNodes    int

	CPUs, MemoryGB, EphemeralGB float64
	Accelerator                 string // canonical name ("H100"), "" for none
	AccCount                    int64
	GPUKey                      string // resource key ("nvidia.com/gpu", "amd.com/gpu", "google.com/tpu")
	// GPULabelKey In GPULabelValues is required of the node for accelerators.
	GPULabelKey    string
	GPULabelValues []string
	// TopologyLabelKey=TopologyLabelValue is a nodeSelector for TPU slices
	// (cloud.google.com/gke-tpu-topology=2x2); empty for GPUs.
	TopologyLabelKey, TopologyLabelValue string
	// GPULabelKeys are all GPU label keys seen on nodes; CPU-only pods prefer
	// nodes without any of them so GPU nodes stay free for GPU work.
	GPULabelKeys []string

	Image          string // container image (docker: prefix already stripped)
	ServiceAccount string // serviceAccountName; "" leaves the namespace default

	Labels                          map[string]string // task resources.labels
	CustomLabels, CustomAnnotations map[string]string // kubernetes.custom_metadata
	// PodConfigs are applied in order: kubernetes.pod_config of the server
	// config, then the task's config.kubernetes.pod_config.
	PodConfigs []map[string]any
	// PodConfigSources names each PodConfigs entry in errors ("server
	// config", "task config"); optional.
	PodConfigSources []string
	ResourceLimits   any // kubernetes.set_pod_resource_limits: nil/false, true, or a multiplier >= 1

	UseSpot                      bool
	SpotLabelKey, SpotLabelValue string
	// AllowedNodeTerms restrict the pods to kubernetes.allowed_nodes.
	AllowedNodeTerms []corev1.NodeSelectorTerm

	Command []string // the container command; nil runs keepAliveScript
	// Volumes and VolumeMounts are the task's volumes (podVolumes); a pod
	// with any runs with fsGroup 1000, as SkyPilot's do.
	Volumes      []corev1.Volume
	VolumeMounts []corev1.VolumeMount
	Env          []corev1.EnvVar

	ManagedJobID, ManagedJobName string // annotations when set
}

func (p podParams) isHead() bool { return p.Index == 0 }

func (p podParams) hasAccelerator() bool { return p.Accelerator != "" && p.AccCount > 0 }

// podName is <n>-head for index 0 and <n>-worker<i> otherwise.
func podName(nameOnCloud string, index int) string {
	if index == 0 {
		return nameOnCloud + "-head"
	}
	return nameOnCloud + "-worker" + strconv.Itoa(index)
}

// clusterLabels are the labels on every object of the cluster. The cluster's
// identity labels win over custom_metadata labels of the same key, because
// status and delete find the objects through them.
func clusterLabels(nameOnCloud, user string, custom map[string]string) map[string]string {
	l := make(map[string]string, len(custom)+5)
	maps.Copy(l, custom)
	l[labelParent] = labelParentValue
	l[labelCluster] = nameOnCloud
	l[labelClusterName] = nameOnCloud
	l[labelUser] = userLabelValue(user)
	l[labelRayCluster] = nameOnCloud
	return l
}

// clusterSelector selects every object of the cluster.
func clusterSelector(nameOnCloud string) string {
	return labelClusterName + "=" + nameOnCloud
}

var (
	userBadChars  = regexp.MustCompile(`[^a-z0-9_-]`)
	userBadPrefix = regexp.MustCompile(`^[0-9_-]+`)
)

// userLabelValue cleans a user name the way SkyPilot does for its
// skypilot-user label (lower case; only letters, digits, '-' and '_'; no
// leading digits or dashes; at most 63 characters), and also drops leading
// and trailing '_' so the result is always a valid label value.
func userLabelValue(user string) string {
	s := userBadChars.ReplaceAllString(strings.ToLower(user), "")
	s = userBadPrefix.ReplaceAllString(s, "")
	if len(s) > content.LabelValueMaxLength {
		s = s[:content.LabelValueMaxLength]
	}
	return strings.TrimRight(s, "-_")
}

// podLabels are the labels of pod p before pod_config is merged.
func podLabels(p podParams, name string) map[string]string {
	l := clusterLabels(p.NameOnCloud, p.User, p.CustomLabels)
	maps.Copy(l, p.Labels)
	maps.Copy(l, podIdentityLabels(p, name))
	return l
}

// podIdentityLabels are the labels the services, the LB and the node type
// env var depend on; they are put back after pod_config is merged.
func podIdentityLabels(p podParams, name string) map[string]string {
	l := clusterLabels(p.NameOnCloud, p.User, nil)
	l[labelComponent] = name
	if p.isHead() {
		l[labelRayNodeType] = "head"
		l[labelHeadNode] = "1"
	} else {
		l[labelRayNodeType] = "worker"
		l[labelHeadNode] = "0"
	}
	if p.hasAccelerator() {
		l[labelBinpack] = labelBinpackValue
	}
	return l
}

// reservedLabel reports whether key is set by SkyGo itself.
func reservedLabel(key string) bool {
	switch key {
	case labelParent, labelCluster, labelClusterName, labelUser, labelRayCluster,
		labelRayNodeType, labelHeadNode, labelComponent, labelBinpack:
		return true
	}
	return false
}

// checkLabels rejects labels Kubernetes would refuse, naming the label and
// where it came from, before any API call is made.
func checkLabels(where string, labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if reservedLabel(k) {
			return fmt.Errorf("%s: label %q is set by SkyGo for every cluster and cannot be overridden; remove it", where, k)
		}
		if msgs := content.IsLabelKey(k); len(msgs) > 0 {
			return fmt.Errorf("%s: label key %q is not a valid Kubernetes label key: %s", where, k, strings.Join(msgs, "; "))
		}
		if msgs := content.IsLabelValue(labels[k]); len(msgs) > 0 {
			return fmt.Errorf("%s: value %q of label %q is not a valid Kubernetes label value: %s", where, labels[k], k, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// buildPod returns the pod with index p.Index of the cluster, with the
// pod_configs merged in.
func buildPod(p podParams) (*corev1.Pod, error) {
	if err := checkParams(p); err != nil {
		return nil, err
	}
	name := podName(p.NameOnCloud, p.Index)
	res, err := podResources(p)
	if err != nil {
		return nil, err
	}
	command := p.Command
	if len(command) == 0 {
		command = []string{"/bin/bash", "-c", keepAliveScript}
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   p.Namespace,
			Labels:      podLabels(p, name),
			Annotations: podAnnotations(p),
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64(terminationGraceSeconds)),
			ServiceAccountName:            p.ServiceAccount,
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           p.Image,
				ImagePullPolicy: corev1.PullAlways,
				Command:         command,
				Env:             podEnv(p),
				Resources:       res,
				VolumeMounts:    []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}},
			}},
			// /dev/shm is 64 MB in a container by default; NCCL and
			// PyTorch data loaders need far more.
			Volumes: []corev1.Volume{{
				Name:         "dshm",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
			}},
		},
	}
	if len(p.Volumes) > 0 {
		pod.Spec.Volumes = append(pod.Spec.Volumes, p.Volumes...)
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, p.VolumeMounts...)
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: new(int64(1000))}
	}
	if err := schedule(p, &pod.Spec); err != nil {
		return nil, err
	}
	for i, overlay := range p.PodConfigs {
		if err := mergePodConfig(pod, overlay); err != nil {
			return nil, fmt.Errorf("%s: %w", podConfigSource(p, i), err)
		}
	}
	// pod_config may add labels but must not detach the pod from its
	// cluster, nor move or rename it.
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	maps.Copy(pod.Labels, podIdentityLabels(p, name))
	if pod.Name != name || pod.Namespace != p.Namespace {
		return nil, fmt.Errorf("kubernetes.pod_config: metadata.name and metadata.namespace cannot be set (SkyGo names pod %q in namespace %q); use kubernetes.namespace to choose the namespace", name, p.Namespace)
	}
	if errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")); len(errs) > 0 {
		return nil, fmt.Errorf("pod %s: %w", name, errs.ToAggregate())
	}
	return pod, nil
}

func podConfigSource(p podParams, i int) string {
	if i < len(p.PodConfigSources) && p.PodConfigSources[i] != "" {
		return "kubernetes.pod_config of the " + p.PodConfigSources[i]
	}
	return "kubernetes.pod_config"
}

func checkParams(p podParams) error {
	switch {
	case p.NameOnCloud == "":
		return fmt.Errorf("internal error: building a pod without a cluster name")
	case p.Index < 0 || (p.NumNodes > 0 && p.Index >= p.NumNodes):
		return fmt.Errorf("internal error: pod index %d out of range for %d nodes", p.Index, p.NumNodes)
	case p.Image == "":
		return fmt.Errorf("no container image for cluster %s: set resources.image_id (docker:<image>) or a default image", p.DisplayName)
	case !(p.CPUs > 0) || math.IsInf(p.CPUs, 0):
		return fmt.Errorf("invalid CPU request %v for cluster %s: must be a positive number", p.CPUs, p.DisplayName)
	case !(p.MemoryGB > 0) || math.IsInf(p.MemoryGB, 0):
		return fmt.Errorf("invalid memory request %vGB for cluster %s: must be a positive number", p.MemoryGB, p.DisplayName)
	case p.EphemeralGB < 0 || math.IsNaN(p.EphemeralGB) || math.IsInf(p.EphemeralGB, 0):
		return fmt.Errorf("invalid ephemeral storage request %vGB for cluster %s", p.EphemeralGB, p.DisplayName)
	case p.hasAccelerator() && p.GPUKey == "":
		return fmt.Errorf("internal error: accelerator %s requested without a resource key", p.Accelerator)
	case p.UseSpot && p.SpotLabelKey == "":
		return fmt.Errorf("spot pods need a spot node label, and no node of this Kubernetes cluster has one (e.g. cloud.google.com/gke-spot=true); drop use_spot")
	}
	if msgs := validation.IsDNS1123Label(p.Namespace); len(msgs) > 0 {
		return fmt.Errorf("namespace %q is not a valid Kubernetes namespace: %s", p.Namespace, strings.Join(msgs, "; "))
	}
	// Services are named after pods and must be DNS-1035 labels, the
	// strictest of the names derived from NameOnCloud.
	if msgs := validation.IsDNS1035Label(podName(p.NameOnCloud, p.Index) + "-ssh"); len(msgs) > 0 {
		return fmt.Errorf("cluster name %q cannot name Kubernetes objects: %s", p.NameOnCloud, strings.Join(msgs, "; "))
	}
	if err := checkLabels("resources.labels", p.Labels); err != nil {
		return err
	}
	if err := checkLabels("kubernetes.custom_metadata.labels", p.CustomLabels); err != nil {
		return err
	}
	if errs := apivalidation.ValidateAnnotations(p.CustomAnnotations, field.NewPath("kubernetes", "custom_metadata", "annotations")); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

func podAnnotations(p podParams) map[string]string {
	a := make(map[string]string, len(p.CustomAnnotations)+3)
	maps.Copy(a, p.CustomAnnotations)
	a[annotationClusterName] = p.DisplayName
	if p.ManagedJobID != "" {
		a[annotationManagedJobID] = p.ManagedJobID
	}
	if p.ManagedJobName != "" {
		a[annotationManagedJob] = p.ManagedJobName
	}
	return a
}

func podEnv(p podParams) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "SKYPILOT_POD_NODE_TYPE", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + labelRayNodeType + "']"},
		}},
		// From requests, not limits: limits are usually unset, and the
		// request is what the job was promised.
		{Name: "SKYPILOT_POD_CPU_CORE_LIMIT", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: containerName, Resource: "requests.cpu"},
		}},
		{Name: "SKYPILOT_POD_MEMORY_BYTES_LIMIT", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: containerName, Resource: "requests.memory"},
		}},
	}
	if !p.hasAccelerator() {
		// The NVIDIA runtime exposes every GPU of the node to containers
		// that do not ask for any unless told otherwise.
		env = append(env, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "none"})
	}
	return append(env, p.Env...)
}

// cpuQuantity is whole millicores, rounded up so a tiny request is not 0:
// 2 -> "2", 0.5 -> "500m".
func cpuQuantity(cpus float64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(math.Ceil(cpus*1000-1e-6)), resource.DecimalSI)
}

// gbQuantity is decimal gigabytes, as SkyPilot writes "<mem>G": 4 -> "4G",
// 1.5 -> "1500M". (Nodes report Ki, so a request of 16G fits a 16Gi node.)
func gbQuantity(gb float64) resource.Quantity {
	return *resource.NewQuantity(int64(math.Ceil(gb*1e9-1e-3)), resource.DecimalSI)
}

// podResources sets requests for what the instance type promises. Limits
// hold only the accelerator (device plugins require limit == request)
// unless kubernetes.set_pod_resource_limits asks for CPU and memory limits.
func podResources(p podParams) (corev1.ResourceRequirements, error) {
	mult, err := limitMultiplier(p.ResourceLimits)
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	req := corev1.ResourceList{
		corev1.ResourceCPU:    cpuQuantity(p.CPUs),
		corev1.ResourceMemory: gbQuantity(p.MemoryGB),
	}
	if p.EphemeralGB > 0 {
		req[corev1.ResourceEphemeralStorage] = gbQuantity(p.EphemeralGB)
	}
	var lim corev1.ResourceList
	if mult > 0 {
		lim = corev1.ResourceList{
			corev1.ResourceCPU:    cpuQuantity(p.CPUs * mult),
			corev1.ResourceMemory: gbQuantity(p.MemoryGB * mult),
		}
		if p.EphemeralGB > 0 {
			lim[corev1.ResourceEphemeralStorage] = gbQuantity(p.EphemeralGB * mult)
		}
	}
	if p.hasAccelerator() {
		n := *resource.NewQuantity(p.AccCount, resource.DecimalSI)
		req[corev1.ResourceName(p.GPUKey)] = n
		if lim == nil {
			lim = corev1.ResourceList{}
		}
		lim[corev1.ResourceName(p.GPUKey)] = n
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}, nil
}

// limitMultiplier reads kubernetes.set_pod_resource_limits: 0 for no
// limits, 1 for limits equal to requests, or the multiplier given.
func limitMultiplier(v any) (float64, error) {
	var f float64
	switch x := v.(type) {
	case nil:
		return 0, nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float64:
		f = x
	default:
		return 0, fmt.Errorf("kubernetes.set_pod_resource_limits: want true, false or a number >= 1, got %v (%T)", v, v)
	}
	if !(f >= 1) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("kubernetes.set_pod_resource_limits: the multiplier must be a number >= 1, got %v", v)
	}
	return f, nil
}

// schedule sets affinity, tolerations and node selectors.
func schedule(p podParams, spec *corev1.PodSpec) error {
	aff := &corev1.Affinity{}
	if p.hasAccelerator() {
		if p.GPULabelKey != "" {
			if len(p.GPULabelValues) == 0 {
				return fmt.Errorf("internal error: no label values for accelerator %s (label %s)", p.Accelerator, p.GPULabelKey)
			}
			aff.NodeAffinity = &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: p.GPULabelKey, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(p.GPULabelValues),
					}}}},
				},
			}
		}
		// Packing GPU pods onto the same nodes keeps whole nodes free for
		// large multi-GPU requests.
		aff.PodAffinity = &corev1.PodAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: labelBinpack, Operator: metav1.LabelSelectorOpIn, Values: []string{labelBinpackValue},
					}}},
					TopologyKey: hostnameKey,
				},
			}},
		}
		if p.GPUKey == tpuKey {
			spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
				Key: tpuKey, Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule,
			})
			if p.TopologyLabelKey != "" {
				spec.NodeSelector = map[string]string{p.TopologyLabelKey: p.TopologyLabelValue}
			}
		} else {
			spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
				Key: p.GPUKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
			})
		}
	} else if keys := sortedUnique(p.GPULabelKeys); len(keys) > 0 {
		var avoid []corev1.NodeSelectorRequirement
		for _, k := range keys {
			avoid = append(avoid, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpDoesNotExist})
		}
		aff.NodeAffinity = &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: avoid},
			}},
		}
	}
	if p.NumNodes > 1 {
		// Spread the nodes of one cluster over hosts, as VMs would be.
		aff.PodAntiAffinity = &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: labelClusterName, Operator: metav1.LabelSelectorOpIn, Values: []string{p.NameOnCloud},
					}}},
					TopologyKey: hostnameKey,
				},
			}},
		}
	}
	if p.UseSpot {
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[p.SpotLabelKey] = p.SpotLabelValue
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key: p.SpotLabelKey, Operator: corev1.TolerationOpEqual, Value: p.SpotLabelValue, Effect: corev1.TaintEffectNoSchedule,
		})
	}
	restrictTo(aff, p.AllowedNodeTerms)
	if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
		spec.Affinity = aff
	}
	return nil
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// objectMeta is the metadata of a non-pod object of the cluster.
func objectMeta(p podParams, name string) metav1.ObjectMeta {
	var ann map[string]string
	if len(p.CustomAnnotations) > 0 {
		ann = maps.Clone(p.CustomAnnotations)
	}
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   p.Namespace,
		Labels:      clusterLabels(p.NameOnCloud, p.User, p.CustomLabels),
		Annotations: ann,
	}
}

// buildServices returns the services of pod p: a headless service named
// after the pod (a stable DNS name for its IP) and, for the head,
// <head>-ssh on port 22.
func buildServices(p podParams) []*corev1.Service {
	name := podName(p.NameOnCloud, p.Index)
	selector := map[string]string{labelComponent: name}
	svcs := []*corev1.Service{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(p, name),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selector,
		},
	}}
	if p.isHead() {
		svcs = append(svcs, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: objectMeta(p, name+"-ssh"),
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: maps.Clone(selector),
				Ports: []corev1.ServicePort{{
					Name: "ssh", Protocol: corev1.ProtocolTCP, Port: 22, TargetPort: intstr.FromInt32(22),
				}},
			},
		})
	}
	return svcs
}

// buildLBService returns the LoadBalancer service publishing ports of the
// head pod, or nil without ports.
func buildLBService(p podParams, ports []int) *corev1.Service {
	ports = sortedUniqueInts(ports)
	if len(ports) == 0 {
		return nil
	}
	var sp []corev1.ServicePort
	for _, port := range ports {
		sp = append(sp, corev1.ServicePort{
			Name:       "port-" + strconv.Itoa(port),
			Protocol:   corev1.ProtocolTCP,
			Port:       int32(port),
			TargetPort: intstr.FromInt32(int32(port)),
		})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(p, p.NameOnCloud+"--skypilot-lb"),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{labelClusterName: p.NameOnCloud, labelRayNodeType: "head"},
			Ports:    sp,
		},
	}
}

func sortedUniqueInts(s []int) []int {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// instanceTypeName names the virtual instance type the way SkyPilot does:
// whole numbers without a decimal point, others with one decimal ("0.5",
// "2.0" for 1.96); spaces of the accelerator name become '_'.
func instanceTypeName(cpus, memGB float64, acc string, count int64) string {
	s := formatFloat(cpus) + "CPU--" + formatFloat(memGB) + "GB"
	if acc != "" && count > 0 {
		s += "--" + strings.ReplaceAll(acc, " ", "_") + ":" + strconv.FormatInt(count, 10)
	}
	return s
}

func formatFloat(f float64) string {
	if f == math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

var instanceTypeRe = regexp.MustCompile(`^(\d+(?:\.\d+)?)CPU--(\d+(?:\.\d+)?)GB(?:--([\w-]+):(\d+))?$`)

// parseInstanceType reads an instanceTypeName back ('_' in the accelerator
// becomes a space again).
func parseInstanceType(s string) (cpus, memGB float64, acc string, count int64, err error) {
	m := instanceTypeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, "", 0, fmt.Errorf("invalid Kubernetes instance type %q: want <cpus>CPU--<memory>GB[--<accelerator>:<count>], e.g. 4CPU--16GB--H100:1", s)
	}
	cpus, _ = strconv.ParseFloat(m[1], 64)
	memGB, _ = strconv.ParseFloat(m[2], 64)
	if m[3] != "" {
		if count, err = strconv.ParseInt(m[4], 10, 64); err != nil || count <= 0 {
			return 0, 0, "", 0, fmt.Errorf("invalid Kubernetes instance type %q: the accelerator count must be a positive integer", s)
		}
		acc = strings.ReplaceAll(m[3], "_", " ")
	}
	return cpus, memGB, acc, count, nil
}
