package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/provision"
)

// Provisioner manages the clusters of one context.
type Provisioner struct {
	in      *Infra
	context string
}

var _ provision.Provisioner = (*Provisioner)(nil)

// Meta keys of a cluster's ClusterInfo.
const (
	metaContext   = "context"
	metaNamespace = "namespace"
	metaName      = "name_on_cloud"
)

// The poll interval while waiting for pods: a watch would save a few
// calls, but a list every 200 ms of one cluster's pods is cheap for the
// API server and keeps the logic restartable at any point.
const pollEvery = 200 * time.Millisecond

func (p *Provisioner) where() string { return where(p.context) }

// settings are the kubernetes.* keys a launch reads, for one context.
type settings struct {
	namespace      string
	podConfigs     []map[string]any
	podSources     []string // what each of podConfigs came from, for errors
	customLabels   map[string]string
	customAnnots   map[string]string
	limits         any
	timeout        time.Duration // < 0: wait forever
	timeoutSet     bool
	autoscaler     string
	ports          string
	serviceAccount string        // "" for the namespace's default
	ownAccount     bool          // SkyGo makes serviceAccount and its roles
	allowed        *allowedNodes // nil: every node
	// unsupported names the keys set that this build cannot honour; a
	// launch is refused rather than run without them.
	unsupported []string
}

// unsupportedKeys are kubernetes.* keys that change how or where a pod
// runs and that SkyGo does not implement, with what to do instead.
var unsupportedKeys = []struct{ key, msg string }{
	{"kueue", "Kueue queues (kubernetes.kueue) are not supported by SkyGo yet: the pods would bypass the queue's admission; remove the key, or launch with SkyPilot"},
	{"quota", "Kueue quotas (kubernetes.quota) are not supported by SkyGo yet: the pods would bypass the queue's admission; remove the key"},
	{"dws", "GKE Dynamic Workload Scheduler (kubernetes.dws) is not supported by SkyGo yet; remove the key"},
	{"enable_docker", "Docker inside pods (kubernetes.enable_docker) is not supported by SkyGo; remove the key"},
	{"auto_mounts", "kubernetes.auto_mounts is not supported by SkyGo yet; mount the volumes with the task's volumes: instead"},
}

// setKey reports whether a config value asks for something: not null,
// not an empty list or mapping, and not {enabled: false}.
func setKey(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case []any:
		return len(t) > 0
	case map[string]any:
		if e, ok := t["enabled"]; ok && len(t) <= 2 {
			b, _ := e.(bool)
			return b
		}
		return len(t) > 0
	case string:
		return t != ""
	}
	return true
}

// namespace is where the context's clusters live, which is all that
// Terminate and Query need: a launch-only key the config gets wrong must
// not keep a cluster from being seen or torn down.
func (p *Provisioner) namespace(c *client) (string, error) {
	cfg, err := p.in.serverConfig()
	if err != nil {
		return "", err
	}
	if v, _ := cfg.RegionValue("kubernetes", p.context, "namespace"); v != nil {
		if ns, _ := v.(string); ns != "" {
			return ns, nil
		}
	}
	return c.namespace, nil
}

func (p *Provisioner) settings(c *client, spec provision.ClusterSpec) (settings, error) {
	cfg, err := p.in.serverConfig()
	if err != nil {
		return settings{}, err
	}
	task := config.New(spec.Config)
	val := func(key string) (any, bool) {
		if v, ok := task.RegionValue("kubernetes", p.context, key); ok {
			return v, true
		}
		return cfg.RegionValue("kubernetes", p.context, key)
	}
	str := func(key string) string {
		v, _ := val(key)
		s, _ := v.(string)
		return s
	}
	s := settings{namespace: c.namespace, autoscaler: str("autoscaler"), ports: str("ports")}
	if ns := str("namespace"); ns != "" {
		s.namespace = ns
	}
	if s.ports == "" {
		s.ports = "loadbalancer"
	}
	// pod_config and custom_metadata merge Kubernetes-style (config.md):
	// the server's first, then the task's own.
	for k, src := range []*config.Config{cfg, task} {
		from := []string{"server config (~/.sky/config.yaml)", "task config"}[k]
		if v, ok := src.RegionValue("kubernetes", p.context, "pod_config"); ok && v != nil {
			m, ok := v.(map[string]any)
			if !ok {
				return s, fmt.Errorf("kubernetes.pod_config of the %s must be a mapping (a pod manifest fragment), not %T", from, v)
			}
			s.podConfigs = append(s.podConfigs, m)
			s.podSources = append(s.podSources, from)
		}
		if v, ok := src.RegionValue("kubernetes", p.context, "custom_metadata"); ok && v != nil {
			m, ok := v.(map[string]any)
			if !ok {
				return s, fmt.Errorf("kubernetes.custom_metadata must be a mapping with labels and annotations, not %T", v)
			}
			for k, dst := range map[string]*map[string]string{"labels": &s.customLabels, "annotations": &s.customAnnots} {
				if mm, ok := m[k].(map[string]any); ok {
					if *dst == nil {
						*dst = map[string]string{}
					}
					for kk, vv := range mm {
						(*dst)[kk] = fmt.Sprint(vv)
					}
				}
			}
		}
	}
	for _, u := range unsupportedKeys {
		if v, ok := val(u.key); ok && setKey(v) {
			s.unsupported = append(s.unsupported, u.msg)
		}
	}
	if s.ports == "ingress" && len(spec.Ports) > 0 {
		s.unsupported = append(s.unsupported, "kubernetes.ports: ingress is not supported by SkyGo yet; use loadbalancer (a LoadBalancer Service) or podip (the ports at the pod IP)")
	}
	if v, ok := val("remote_identity"); ok {
		if s.serviceAccount, s.ownAccount, err = resolveIdentity(v, p.context); err != nil {
			return s, err
		}
	}
	if v, ok := val("allowed_nodes"); ok {
		if s.allowed, err = parseAllowedNodes(v); err != nil {
			return s, err
		}
	}
	s.limits, _ = val("set_pod_resource_limits")
	if v, ok := val("provision_timeout"); ok && v != nil {
		n, err := toInt(v)
		if err != nil {
			return s, fmt.Errorf("kubernetes.provision_timeout: %w", err)
		}
		s.timeoutSet = true
		s.timeout = time.Duration(n) * time.Second
		if n < 0 {
			s.timeout = -1
		}
	}
	return s, nil
}

func toInt(v any) (int, error) {
	switch n := v.(type) {
	case int:
		return n, nil
	case int64:
		return int(n), nil
	case float64:
		return int(n), nil
	case string:
		return strconv.Atoi(n)
	}
	return 0, fmt.Errorf("want a number of seconds, not %T", v)
}

// scheduleTimeout is how long pods may stay unscheduled: the setting,
// else SkyPilot's min(10 + 0.2 x (N-1), 60) s, or min(180 + 0.2 x (N-1),
// 240) s with a ReadWriteMany volume (network storage binds slowly), at
// least 60 s with an autoscaler (nodes take that long to appear).
func (s settings) scheduleTimeout(numNodes int, vols []provision.Volume) time.Duration {
	if s.timeoutSet {
		return s.timeout
	}
	base, most := 10.0, 60.0
	for _, v := range vols {
		if m, _ := v.Config["access_mode"].(string); v.Type == TypePVC && m == "ReadWriteMany" {
			base, most = 180, 240
		}
	}
	d := time.Duration(math.Min(base+0.2*float64(numNodes-1), most) * float64(time.Second))
	if s.autoscaler != "" && d < time.Minute {
		d = time.Minute
	}
	return d
}

// Provision implements provision.Provisioner.
func (p *Provisioner) Provision(ctx context.Context, spec provision.ClusterSpec) (*provision.ClusterInfo, error) {
	log := spec.Log
	if log == nil {
		log = io.Discard
	}
	n := max(spec.NumNodes, 1)
	c, err := p.in.client(p.context)
	if err != nil {
		return nil, err
	}
	s, err := p.settings(c, spec)
	if err != nil {
		return nil, &provision.ConfigError{Where: p.where(), Err: err}
	}
	if len(s.unsupported) > 0 {
		return nil, &provision.ConfigError{Where: p.where(), Msg: strings.Join(s.unsupported, "; ")}
	}
	params, err := p.podParams(ctx, spec, s)
	if err != nil {
		return nil, err
	}
	name := params.NameOnCloud
	pods := c.kc.Pods(s.namespace)

	existing, err := p.settle(ctx, c, s.namespace, name)
	if err != nil {
		return nil, err
	}
	if len(existing) > n {
		return nil, &provision.ConfigError{Where: p.where(),
			Msg: fmt.Sprintf("cluster %s has %d pods in namespace %s but %d nodes were asked for; run `sky down %s` first", spec.Name, len(existing), s.namespace, n, spec.Name)}
	}
	if err := p.ensureIdentity(ctx, c, s.namespace, s.serviceAccount, s.ownAccount); err != nil {
		return nil, err
	}
	if err := p.createServices(ctx, c, params, spec.Ports, s); err != nil {
		return nil, err
	}
	if params.Volumes, params.VolumeMounts, err = p.podVolumes(ctx, c, s.namespace, name, params.User, spec.Volumes); err != nil {
		p.cleanupAfter(c, s.namespace, name, err)
		return nil, err
	}
	var missing []int
	for i := 0; i < n; i++ {
		if _, ok := existing[podName(name, i)]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(log, "Creating %d pod(s) in context %s, namespace %s.\n", len(missing), p.context, s.namespace)
	}
	err = forEach(len(missing), 32, func(k int) error {
		pp := params
		pp.Index = missing[k]
		pod, err := buildPod(pp)
		if err != nil {
			return &provision.ConfigError{Where: p.where(), Err: err}
		}
		_, err = pods.Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return &provision.ConfigError{Where: p.where(), Msg: "the API server refused pod " + pod.Name, Err: err}
		}
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota") {
			return &provision.CapacityError{Where: p.where(), Msg: "namespace quota", Err: err}
		}
		if err != nil {
			return apiError(p.context, "creating pod "+pod.Name, err)
		}
		return nil
	})
	if err != nil {
		p.cleanupAfter(c, s.namespace, name, err)
		return nil, err
	}
	running, err := p.waitPods(ctx, c, s, spec, name, n)
	if err != nil {
		p.cleanupAfter(c, s.namespace, name, err)
		return nil, err
	}
	info := &provision.ClusterInfo{Name: spec.Name, Cloud: "Kubernetes", Region: p.context,
		Meta: map[string]string{metaContext: p.context, metaNamespace: s.namespace, metaName: name}}
	for i := 0; i < n; i++ {
		pod := running[podName(name, i)]
		ni := provision.NodeInfo{Index: i, ID: pod.Name, InternalIP: pod.Status.PodIP, CPUs: params.CPUs, MemoryGB: params.MemoryGB}
		if params.Accelerator != "" {
			ni.GPUs = map[string]float64{params.Accelerator: float64(params.AccCount)}
		}
		info.Nodes = append(info.Nodes, ni)
	}
	return info, nil
}

// podParams turns the request into what every pod of the cluster shares.
func (p *Provisioner) podParams(ctx context.Context, spec provision.ClusterSpec, s settings) (podParams, error) {
	cpus, mem := spec.Resources.CPUs, spec.Resources.MemoryGB
	acc, count := "", int64(0)
	for a, k := range spec.Resources.GPUs {
		acc, count = a, int64(math.Ceil(k))
	}
	if it := spec.Resources.InstanceType; it != "" && cpus == 0 && mem == 0 {
		if c, m, a, k, err := parseInstanceType(it); err == nil {
			cpus, mem = c, m
			if acc == "" {
				acc, count = a, k
			}
		}
	}
	cpus, mem = podSize(catalog.Bound{Value: cpus}, catalog.Bound{Value: mem}, float64(count))
	pp := podParams{NameOnCloud: p.in.nameOnCloud(spec.Name), DisplayName: spec.Name, Namespace: s.namespace,
		User: p.in.userName(), NumNodes: max(spec.NumNodes, 1), CPUs: cpus, MemoryGB: mem,
		Accelerator: acc, AccCount: count, Labels: spec.Labels, CustomLabels: s.customLabels,
		CustomAnnotations: s.customAnnots, PodConfigs: s.podConfigs, PodConfigSources: s.podSources, ResourceLimits: s.limits, UseSpot: spec.UseSpot,
		ServiceAccount: s.serviceAccount}
	if pp.Image = strings.TrimPrefix(spec.ImageID, "docker:"); pp.Image == "" {
		pp.Image = p.defaultImage(ctx, acc != "")
	}
	if spec.UseSpot {
		pp.SpotLabelKey, pp.SpotLabelValue = spotLabelKey, "true"
	}
	raw, _, err := p.in.inventory(ctx, p.context, true)
	if err != nil {
		return pp, err
	}
	pp.GPULabelKeys = gpuLabelKeys(raw.nodes)
	if s.allowed != nil {
		if pp.AllowedNodeTerms, err = s.allowed.terms(raw.nodes); err != nil {
			return pp, &provision.CapacityError{Where: p.where(), Msg: err.Error()} // another context may do
		}
	}
	if acc != "" {
		key, values, err := acceleratorSelector(raw.scheme, acc, raw.nodes)
		if err != nil {
			return pp, &provision.CapacityError{Where: p.where(), Msg: err.Error()}
		}
		pp.GPULabelKey, pp.GPULabelValues = key, values
		pp.GPUKey = gpuResourceKeyFor(raw, acc)
	}
	return pp, nil
}

// gpuResourceKeyFor is the resource key the nodes with acc advertise
// (nvidia.com/gpu unless they say otherwise).
func gpuResourceKeyFor(raw *clusterNodes, acc string) string {
	for i := range raw.nodes {
		if a, capacity, _, key := nodeAccelerator(&raw.nodes[i], raw.scheme); a == acc && capacity > 0 && key != "" {
			return key
		}
	}
	if strings.HasPrefix(strings.ToLower(acc), "tpu") {
		return "google.com/tpu"
	}
	return "nvidia.com/gpu"
}

// defaultImage is SkyPilot's image for pods when the task names none:
// the catalog's custom image (the 22.04 tag SkyPilot asks for first, then
// the 20.04 one this catalog snapshot has), else the image it names.
func (p *Provisioner) defaultImage(ctx context.Context, gpu bool) string {
	kind := "cpu"
	if gpu {
		kind = "gpu"
	}
	if p.in.env.Catalog != nil {
		if cat := p.in.env.Catalog(); cat != nil {
			for _, tag := range []string{"skypilot:custom-" + kind + "-ubuntu-2204", "skypilot:custom-" + kind + "-ubuntu-2004"} {
				if img, found, err := cat.Image(ctx, Kind, tag, ""); err == nil && found && img != "" {
					return img
				}
			}
		}
	}
	if gpu {
		return "us-docker.pkg.dev/sky-dev-465/skypilotk8s/skypilot-gpu:latest"
	}
	return "us-docker.pkg.dev/sky-dev-465/skypilotk8s/skypilot:latest"
}

// settle makes the cluster's existing pods usable: pods being deleted
// are waited for (60 s, then forced), finished ones removed; the Pending
// and Running ones are returned by name.
func (p *Provisioner) settle(ctx context.Context, c *client, ns, name string) (map[string]corev1.Pod, error) {
	pods := c.kc.Pods(ns)
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: clusterSelector(name)})
		if err != nil {
			return nil, apiError(p.context, "listing the cluster's pods", err)
		}
		live := map[string]corev1.Pod{}
		terminating := 0
		for _, pod := range list.Items {
			switch {
			case pod.DeletionTimestamp != nil:
				terminating++
				if time.Now().After(deadline) {
					_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
				}
			case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
				terminating++
				_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			default:
				live[pod.Name] = pod
			}
		}
		if terminating == 0 {
			return live, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// createServices makes the headless service of every pod (workers reach
// the head by name where cluster DNS exists), the head's ssh service, and
// the ports' load balancer.
func (p *Provisioner) createServices(ctx context.Context, c *client, params podParams, ports []string, s settings) error {
	var svcs []*corev1.Service
	for i := 0; i < params.NumNodes; i++ {
		pp := params
		pp.Index = i
		svcs = append(svcs, buildServices(pp)...)
	}
	if len(ports) > 0 && s.ports == "loadbalancer" {
		var nums []int
		for _, spec := range ports {
			lo, hi, err := portRange(spec)
			if err != nil {
				return &provision.ConfigError{Where: p.where(), Err: err}
			}
			for port := lo; port <= hi; port++ {
				nums = append(nums, port)
			}
		}
		if lb := buildLBService(params, nums); lb != nil {
			svcs = append(svcs, lb)
		}
	}
	return forEach(len(svcs), 16, func(i int) error {
		_, err := c.kc.Services(params.Namespace).Create(ctx, svcs[i], metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return apiError(p.context, "creating service "+svcs[i].Name, err)
		}
		return nil
	})
}

// portRange reads "8080" or "8000-8010".
func portRange(s string) (int, int, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	a, err := strconv.Atoi(lo)
	if err != nil {
		return 0, 0, fmt.Errorf("port %q is not a number or a range", s)
	}
	if !isRange {
		return a, a, nil
	}
	b, err := strconv.Atoi(hi)
	if err != nil || b < a {
		return 0, 0, fmt.Errorf("port range %q is not low-high", s)
	}
	return a, b, nil
}

// waitPods waits for all n pods to be scheduled (within the timeout) and
// then running, turning the scheduler's refusal into a capacity error
// that the failover loop understands.
func (p *Provisioner) waitPods(ctx context.Context, c *client, s settings, spec provision.ClusterSpec, name string, n int) (map[string]corev1.Pod, error) {
	pods := c.kc.Pods(s.namespace)
	timeout := s.scheduleTimeout(n, spec.Volumes)
	start := time.Now()
	lastProgress := ""
	progress := func(text string) {
		if spec.Progress != nil && text != lastProgress {
			lastProgress = text
			spec.Progress(text)
		}
	}
	scheduledAll := false
	for {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: clusterSelector(name)})
		if err != nil {
			return nil, apiError(p.context, "watching the cluster's pods", err)
		}
		byName := map[string]corev1.Pod{}
		for _, pod := range list.Items {
			byName[pod.Name] = pod
		}
		var unscheduled []string
		running := 0
		pending := map[string]int{}
		for i := 0; i < n; i++ {
			pn := podName(name, i)
			pod, ok := byName[pn]
			if !ok {
				return nil, fmt.Errorf("pod %s was deleted while the cluster was launching", pn)
			}
			if pod.DeletionTimestamp != nil {
				return nil, fmt.Errorf("pod %s is being deleted while the cluster was launching", pn)
			}
			if !isScheduled(&pod) {
				unscheduled = append(unscheduled, pn)
				continue
			}
			switch pod.Status.Phase {
			case corev1.PodRunning:
				if pod.Status.PodIP != "" {
					running++
					continue
				}
			case corev1.PodFailed, corev1.PodSucceeded:
				return nil, fmt.Errorf("pod %s failed: %s", pn, podFailure(&pod))
			}
			if why, bad := containerProblem(&pod); bad {
				return nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("pod %s: %s", pn, why)}
			} else if why != "" {
				pending[why]++
			} else {
				pending["container creation"]++
			}
		}
		if running == n {
			return byName, nil
		}
		if len(unscheduled) == 0 {
			scheduledAll = true
		}
		if !scheduledAll && timeout >= 0 && time.Since(start) > timeout {
			return nil, p.unschedulable(ctx, c, s.namespace, unscheduled)
		}
		if len(unscheduled) > 0 {
			progress(fmt.Sprintf("Launching (%d pod(s) waiting to be scheduled)", len(unscheduled)))
		} else if len(pending) > 0 {
			var parts []string
			for why, k := range pending {
				parts = append(parts, fmt.Sprintf("%d pod(s) pending due to %s", k, why))
			}
			sort.Strings(parts)
			progress("Launching (" + strings.Join(parts, ", ") + ")")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// isScheduled is SkyPilot's test: not Pending, or bound to a node, or
// PodScheduled.
func isScheduled(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName != "" {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// containerProblem says why a bound pod's container is not running yet
// (why) and whether that will not resolve by waiting (bad): a waiting
// reason other than ContainerCreating/PodInitializing is an error, as in
// SkyPilot (a crash loop shows the reason of the last termination).
func containerProblem(pod *corev1.Pod) (why string, bad bool) {
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("init container %s failed: %s (exit %d) %s", cs.Name, t.Reason, t.ExitCode, t.Message), true
		}
		if cs.State.Running != nil {
			return "init container running", false
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "", "ContainerCreating", "PodInitializing":
			return w.Reason, false
		case "CrashLoopBackOff":
			if t := cs.LastTerminationState.Terminated; t != nil {
				return fmt.Sprintf("%s: container %s exited %d (%s) %s", w.Reason, cs.Name, t.ExitCode, t.Reason, t.Message), true
			}
		}
		msg := strings.TrimSpace(w.Reason + ": " + w.Message)
		return msg + hint(w.Reason), true
	}
	return "", false
}

// hint is SkyPilot's advice for the failures users meet most.
func hint(reason string) string {
	switch {
	case strings.HasPrefix(reason, "ErrImage") || strings.HasPrefix(reason, "ImagePull") || reason == "InvalidImageName":
		return " (check image_id and that the nodes can pull it: image name, registry credentials, imagePullPolicy)"
	case reason == "OOMKilled":
		return " (raise resources.memory)"
	}
	return ""
}

// podFailure is a failed pod's reason and message.
func podFailure(pod *corev1.Pod) string {
	parts := []string{string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		parts = append(parts, pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		parts = append(parts, pod.Status.Message)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			parts = append(parts, fmt.Sprintf("container %s exited %d (%s)%s", cs.Name, t.ExitCode, t.Reason, hint(t.Reason)))
		}
	}
	return strings.Join(parts, ": ")
}

// unschedulable is the capacity error of pods that found no node: the
// scheduler's latest FailedScheduling message, as SkyPilot words it.
func (p *Provisioner) unschedulable(ctx context.Context, c *client, ns string, pods []string) error {
	detail := ""
	for _, pn := range pods {
		if msg := latestEvent(ctx, c, ns, "Pod", pn, "FailedScheduling"); msg != "" {
			detail = msg
			break
		}
	}
	if strings.Contains(detail, "unbound") && strings.Contains(detail, "PersistentVolumeClaim") {
		// No node will do until the claim binds: not a capacity matter.
		return &provision.ConfigError{Where: p.where(), Msg: "the pods' PersistentVolumeClaim is not bound (no PersistentVolume matches it and its StorageClass made none): '" + detail + "'; check `kubectl describe pvc` and the volume's storage_class_name"}
	}
	msg := "Timed out while waiting for nodes to start. Cluster may be out of resources or may be too slow to autoscale. Pod status: Pending"
	if detail != "" {
		msg += " Details: '" + detail + "'"
		if lacking := insufficient(detail); len(lacking) > 0 {
			msg += " (not enough " + strings.Join(lacking, ", ") + ")"
		}
	}
	return &provision.CapacityError{Where: p.where(), Msg: msg}
}

// insufficient names the resources a FailedScheduling message says are
// short: "Insufficient cpu", "Insufficient nvidia.com/gpu", ...
func insufficient(msg string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(msg, "Insufficient ")[1:] {
		res := strings.TrimRight(strings.Fields(f + " ")[0], ",.")
		name := map[string]string{"cpu": "CPUs", "memory": "Memory"}[res]
		if name == "" {
			name = "GPUs"
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// latestEvent is the message of the newest event with reason on an
// object of kind (a Pod, a PersistentVolumeClaim).
func latestEvent(ctx context.Context, c *client, ns, kind, name, reason string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	evs, err := c.kc.Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name + ",reason=" + reason})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	sort.Slice(evs.Items, func(i, j int) bool { return eventTime(&evs.Items[i]).Before(eventTime(&evs.Items[j])) })
	return evs.Items[len(evs.Items)-1].Message
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// cleanupAfter removes what a failed launch made, so that a failover to
// another candidate leaves nothing behind here.
func (p *Provisioner) cleanupAfter(c *client, ns, name string, cause error) {
	if errors.Is(cause, context.Canceled) {
		return // the launch was cut short: `sky down` removes it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_ = p.deleteAll(ctx, c, ns, name)
}

// Terminate implements provision.Provisioner: every pod, service and
// volume claim labelled with the cluster, pods without a grace period.
func (p *Provisioner) Terminate(ctx context.Context, cluster string) error {
	c, err := p.in.client(p.context)
	if err != nil {
		return err
	}
	ns, err := p.namespace(c)
	if err != nil {
		return &provision.ConfigError{Where: p.where(), Err: err}
	}
	return p.deleteAll(ctx, c, ns, p.in.nameOnCloud(cluster))
}

func (p *Provisioner) deleteAll(ctx context.Context, c *client, ns, name string) error {
	sel := metav1.ListOptions{LabelSelector: clusterSelector(name)}
	zero := int64(0)
	core := c.kc
	var errs []error
	var mu sync.Mutex
	fail := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	if pl, err := core.Pods(ns).List(ctx, sel); err != nil {
		fail(apiError(p.context, "listing pods", err))
	} else {
		_ = forEach(len(pl.Items), 32, func(i int) error {
			fail(core.Pods(ns).Delete(ctx, pl.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
			return nil
		})
	}
	if sl, err := core.Services(ns).List(ctx, sel); err != nil {
		fail(apiError(p.context, "listing services", err))
	} else {
		_ = forEach(len(sl.Items), 16, func(i int) error {
			fail(core.Services(ns).Delete(ctx, sl.Items[i].Name, metav1.DeleteOptions{}))
			return nil
		})
	}
	fail(core.PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deleting cluster %s in context %s: %w", name, p.context, err)
	}
	// Gone means gone: wait until the API no longer lists the pods, nor
	// the claims their protection finalizer keeps while a pod uses them,
	// so a relaunch under the same name does not meet them terminating.
	for {
		pl, err := core.Pods(ns).List(ctx, sel)
		if err != nil {
			return apiError(p.context, "listing pods", err)
		}
		cl, err := core.PersistentVolumeClaims(ns).List(ctx, sel)
		if err != nil {
			return apiError(p.context, "listing PersistentVolumeClaims", err)
		}
		if len(pl.Items)+len(cl.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// Query implements provision.Provisioner: one state per pod the cluster
// should have (its services say how many), a missing pod terminated.
func (p *Provisioner) Query(ctx context.Context, cluster string) ([]provision.NodeState, error) {
	c, err := p.in.client(p.context)
	if err != nil {
		return nil, err
	}
	ns, err := p.namespace(c)
	if err != nil {
		return nil, &provision.ConfigError{Where: p.where(), Err: err}
	}
	name := p.in.nameOnCloud(cluster)
	sel := metav1.ListOptions{LabelSelector: clusterSelector(name)}
	pl, err := c.kc.Pods(ns).List(ctx, sel)
	if err != nil {
		return nil, apiError(p.context, "listing the cluster's pods", err)
	}
	sl, err := c.kc.Services(ns).List(ctx, sel)
	if err != nil {
		return nil, apiError(p.context, "listing the cluster's services", err)
	}
	byName := map[string]corev1.Pod{}
	for _, pod := range pl.Items {
		byName[pod.Name] = pod
	}
	want := 0
	for _, svc := range sl.Items {
		if i, ok := podIndex(name, svc.Name); ok && i+1 > want {
			want = i + 1
		}
	}
	for pn := range byName {
		if i, ok := podIndex(name, pn); ok && i+1 > want {
			want = i + 1
		}
	}
	var out []provision.NodeState
	for i := 0; i < want; i++ {
		pn := podName(name, i)
		st := provision.NodeTerminated
		if pod, ok := byName[pn]; ok && pod.DeletionTimestamp == nil {
			switch pod.Status.Phase {
			case corev1.PodRunning:
				st = provision.NodeUp
			case corev1.PodPending, corev1.PodFailed:
				st = provision.NodePending
			}
		}
		out = append(out, provision.NodeState{Index: i, ID: pn, Status: st})
	}
	return out, nil
}

// podIndex reads the node index back from a pod's (or its service's)
// name.
func podIndex(name, obj string) (int, bool) {
	if obj == podName(name, 0) {
		return 0, true
	}
	rest, ok := strings.CutPrefix(obj, name+"-worker")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i > 0
}

// Stop implements provision.Provisioner: pods cannot be stopped.
func (p *Provisioner) Stop(ctx context.Context, cluster string) error {
	return &provision.NotSupportedError{Where: p.where(), Operation: "stopping", Msg: p.in.CannotStop()}
}

// Start implements provision.Provisioner: there is never a stopped
// cluster to start.
func (p *Provisioner) Start(ctx context.Context, cluster string) (*provision.ClusterInfo, error) {
	return nil, &provision.NotSupportedError{Where: p.where(), Operation: "starting", Msg: p.in.CannotStop()}
}

// forEach runs f(0..n-1) with at most width at a time and returns the
// errors joined.
func forEach(n, width int, f func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}
