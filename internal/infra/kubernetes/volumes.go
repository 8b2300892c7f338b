package kubernetes

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// Volumes on Kubernetes (spec storage.md): a k8s-pvc volume is a
// PersistentVolumeClaim, a k8s-hostpath volume a directory on whichever
// node a pod lands on. A pod takes its volumes only when it is made, so
// the provisioner puts them in the pod spec (provision.ClusterSpec.Volumes)
// and AttachVolume checks they are there. An absolute mount path is the
// container's mount path; a ~/... path is a link, made by AttachVolume
// once the container user's home is known, to where the volume is mounted
// (stagingDir). The volume's Region is its context, its config keeps the
// namespace it lives in.

// Volume types.
const (
	TypePVC      = "k8s-pvc"
	TypeHostPath = "k8s-hostpath"
)

// Label of a volume's PVC naming the SkyGo volume.
const labelVolumeName = "skypilot-name"

var accessModes = []string{"ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany"}

var (
	_ infra.EphemeralVolumeHost = (*Infra)(nil)
	_ infra.VolumeProber        = (*Infra)(nil)
	_ infra.VolumePodLister     = (*Infra)(nil)
)

// VolumeTypes implements infra.VolumeHost.
func (in *Infra) VolumeTypes() []string { return []string{TypePVC, TypeHostPath} }

// volumeConfig is what a volume's config says, with defaults.
type volumeConfig struct {
	raw          map[string]any
	namespace    string
	accessMode   string
	storageClass *string // nil: the cluster's default class
	hostPath     string
	labels       map[string]string
}

func readVolumeConfig(raw json.RawMessage) (volumeConfig, error) {
	vc := volumeConfig{raw: map[string]any{}, accessMode: "ReadWriteOnce"}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &vc.raw); err != nil {
			return vc, fmt.Errorf("volume config: %w", err)
		}
	}
	return vc, vc.parse()
}

func (vc *volumeConfig) parse() error {
	vc.namespace, _ = vc.raw["namespace"].(string)
	if m, _ := vc.raw["access_mode"].(string); m != "" {
		if !slices.Contains(accessModes, m) {
			return fmt.Errorf("access_mode %q is not one of %s", m, strings.Join(accessModes, ", "))
		}
		vc.accessMode = m
	}
	if sc, ok := vc.raw["storage_class_name"]; ok && sc != nil {
		s, ok := sc.(string)
		if !ok {
			return fmt.Errorf("storage_class_name must be a string, not %T", sc)
		}
		vc.storageClass = &s
	}
	vc.hostPath, _ = vc.raw["host_path"].(string)
	if l, ok := vc.raw["labels"].(map[string]any); ok {
		vc.labels = map[string]string{}
		for k, v := range l {
			vc.labels[k] = fmt.Sprint(v)
		}
	}
	return nil
}

func (vc volumeConfig) json() json.RawMessage {
	b, _ := json.Marshal(vc.raw)
	return b
}

// volumeContext is the context a volume lives in: the one its infra names,
// else the first allowed one, as launches choose.
func (in *Infra) volumeContext(region string) (string, error) {
	kc := in.contexts()
	if kc.Reason != "" {
		return "", errors.New(kc.Reason)
	}
	if region == "" {
		return kc.Allowed[0].Name, nil
	}
	for _, c := range kc.Allowed {
		if c.Name == region {
			return region, nil
		}
	}
	names := make([]string, 0, len(kc.Allowed))
	for _, c := range kc.Allowed {
		names = append(names, c.Name)
	}
	return "", fmt.Errorf("context %q is not an allowed Kubernetes context (allowed: %s); see kubernetes.allowed_contexts", region, strings.Join(names, ", "))
}

// ApplyVolume implements infra.VolumeHost: a k8s-pvc volume's claim is
// made (or, with useExisting, found and its size, class and mode taken
// from it); a k8s-hostpath volume has no API object, only its path.
func (in *Infra) ApplyVolume(ctx context.Context, v *state.Volume, useExisting bool) error {
	if v.Zone != "" {
		return fmt.Errorf("a Kubernetes volume lives in a context: write --infra k8s/<context>, without a zone")
	}
	vc, err := readVolumeConfig(v.Config)
	if err != nil {
		return err
	}
	ctxName, err := in.volumeContext(v.Region)
	if err != nil {
		return err
	}
	v.Region = ctxName
	c, err := in.client(ctxName)
	if err != nil {
		return err
	}
	if vc.namespace == "" {
		vc.namespace = c.namespace
		vc.raw["namespace"] = c.namespace
	}
	defer func() { v.Config = vc.json() }()
	switch v.Type {
	case TypeHostPath:
		return checkHostPath(vc)
	case TypePVC:
	default:
		return fmt.Errorf("volume type %s is not a Kubernetes type", v.Type)
	}
	pvcs := c.kc.PersistentVolumeClaims(vc.namespace)
	if useExisting {
		pvc, err := in.findPVC(ctx, c, vc.namespace, v.Name)
		if err != nil {
			return err
		}
		v.NameOnCloud = pvc.Name
		if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			v.SizeGi = float64(q.Value()) / (1 << 30)
		}
		if pvc.Spec.StorageClassName != nil {
			vc.raw["storage_class_name"] = *pvc.Spec.StorageClassName
		}
		if len(pvc.Spec.AccessModes) > 0 {
			vc.raw["access_mode"] = string(pvc.Spec.AccessModes[0])
		}
		return nil
	}
	if v.SizeGi < 1 {
		return fmt.Errorf("a new k8s-pvc volume needs a size of at least 1Gi (size: 10Gi, or --size 10Gi)")
	}
	if err := in.checkStorageClass(ctx, c, vc); err != nil {
		return err
	}
	pvc := volumePVC(v.NameOnCloud, vc.namespace, v.SizeGi, vc)
	pvc.Labels[labelVolumeName] = labelSafe(v.Name)
	_, err = pvcs.Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // made by an apply that was cut short: adopted
	}
	if err != nil {
		return apiError(ctxName, "creating PersistentVolumeClaim "+pvc.Name, err)
	}
	return nil
}

func checkHostPath(vc volumeConfig) error {
	if vc.hostPath == "" || !path.IsAbs(vc.hostPath) || path.Clean(vc.hostPath) == "/" {
		return fmt.Errorf("a k8s-hostpath volume needs config.host_path, an absolute directory on the nodes other than /")
	}
	if b, _ := vc.raw["cleanup_on_deletion"].(bool); b {
		return fmt.Errorf("config.cleanup_on_deletion is not supported by SkyGo (it would run a cleanup DaemonSet of an image pulled from a registry); drop it and empty %s on the nodes yourself after `sky volumes delete`", vc.hostPath)
	}
	return nil
}

// volumePVC is the claim of a volume, labelled as SkyPilot labels them.
func volumePVC(name, ns string, sizeGi float64, vc volumeConfig) *corev1.PersistentVolumeClaim {
	labels := map[string]string{labelParent: labelParentValue}
	maps.Copy(labels, vc.labels)
	size := resource.MustParse(strconv.FormatFloat(sizeGi, 'f', -1, 64) + "Gi")
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(vc.accessMode)},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			StorageClassName: vc.storageClass,
		},
	}
}

// labelSafe is s as a label value (SkyGo volume names may hold what a
// label may not).
func labelSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-_.")
	if len(out) > 63 {
		out = strings.TrimRight(out[:63], "-_.")
	}
	return out
}

// findPVC is an existing claim for `--use-existing`: by exact name, then
// by SkyPilot's volume-name label.
func (in *Infra) findPVC(ctx context.Context, c *client, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	pvcs := c.kc.PersistentVolumeClaims(ns)
	pvc, err := pvcs.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return pvc, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, apiError(c.context, "reading PersistentVolumeClaim "+name, err)
	}
	l, err := pvcs.List(ctx, metav1.ListOptions{LabelSelector: labelVolumeName + "=" + labelSafe(name)})
	if err != nil {
		return nil, apiError(c.context, "listing PersistentVolumeClaims", err)
	}
	switch len(l.Items) {
	case 0:
		return nil, fmt.Errorf("no PersistentVolumeClaim %s (nor one labelled %s=%s) in namespace %s of context %s; drop --use-existing to create it", name, labelVolumeName, name, ns, c.context)
	case 1:
		return &l.Items[0], nil
	}
	var names []string
	for _, p := range l.Items {
		names = append(names, p.Name)
	}
	return nil, fmt.Errorf("several PersistentVolumeClaims in namespace %s are labelled %s=%s (%s); name the one to use", ns, labelVolumeName, name, strings.Join(names, ", "))
}

// checkStorageClass refuses a class that does not exist, and no class
// when the cluster has no default one (the claim would stay Pending).
func (in *Infra) checkStorageClass(ctx context.Context, c *client, vc volumeConfig) error {
	if vc.storageClass != nil && *vc.storageClass == "" {
		return nil // explicitly none: a pre-made PersistentVolume binds
	}
	classes, err := c.kc.StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return apiError(c.context, "listing StorageClasses", err)
	}
	var names []string
	for _, sc := range classes.Items {
		if vc.storageClass != nil && sc.Name == *vc.storageClass {
			return nil
		}
		if vc.storageClass == nil && (sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" ||
			sc.Annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true") {
			return nil
		}
		names = append(names, sc.Name)
	}
	have := "none"
	if len(names) > 0 {
		have = strings.Join(names, ", ")
	}
	if vc.storageClass != nil {
		return fmt.Errorf("context %s has no StorageClass %q (it has: %s); set config.storage_class_name to one of them", c.context, *vc.storageClass, have)
	}
	return fmt.Errorf("context %s has no default StorageClass (it has: %s); set config.storage_class_name", c.context, have)
}

// claimOf is the client of a k8s-pvc volume's context and its config.
func (in *Infra) claimOf(v *state.Volume) (*client, volumeConfig, error) {
	vc, err := readVolumeConfig(v.Config)
	if err != nil {
		return nil, vc, err
	}
	c, err := in.client(v.Region)
	return c, vc, err
}

// DeleteVolume implements infra.VolumeHost: the claim goes (its data with
// it, as the class's reclaim policy says); a host path has nothing to
// delete through the API.
func (in *Infra) DeleteVolume(ctx context.Context, v *state.Volume) error {
	if v.Type != TypePVC {
		return nil
	}
	c, vc, err := in.claimOf(v)
	if err != nil {
		return err
	}
	err = c.kc.PersistentVolumeClaims(vc.namespace).Delete(ctx, v.NameOnCloud, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError(v.Region, "deleting PersistentVolumeClaim "+v.NameOnCloud, err)
	}
	return nil
}

// ProbeVolume implements infra.VolumeProber: a claim that is gone, lost,
// or whose provisioning failed makes the volume NOT_READY.
func (in *Infra) ProbeVolume(ctx context.Context, v *state.Volume) error {
	if v.Type != TypePVC {
		return nil
	}
	c, vc, err := in.claimOf(v)
	if err != nil {
		return err
	}
	pvc, err := c.kc.PersistentVolumeClaims(vc.namespace).Get(ctx, v.NameOnCloud, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("PersistentVolumeClaim %s is gone from namespace %s of context %s", v.NameOnCloud, vc.namespace, v.Region)
	}
	if err != nil {
		return apiError(v.Region, "reading PersistentVolumeClaim "+v.NameOnCloud, err)
	}
	switch pvc.Status.Phase {
	case corev1.ClaimLost:
		return fmt.Errorf("PersistentVolumeClaim %s lost its PersistentVolume", v.NameOnCloud)
	case corev1.ClaimPending:
		if msg := latestEvent(ctx, c, vc.namespace, "PersistentVolumeClaim", pvc.Name, "ProvisioningFailed"); msg != "" {
			return fmt.Errorf("PersistentVolumeClaim %s is pending: %s", v.NameOnCloud, msg)
		}
	}
	return nil
}

// VolumePods implements infra.VolumePodLister: the pods of the claim's
// namespace, not finished, that mount it.
func (in *Infra) VolumePods(ctx context.Context, v *state.Volume) ([]string, error) {
	if v.Type != TypePVC {
		return nil, nil
	}
	c, vc, err := in.claimOf(v)
	if err != nil {
		return nil, err
	}
	pl, err := c.kc.Pods(vc.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiError(v.Region, "listing pods", err)
	}
	var out []string
	for _, pod := range pl.Items {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, pv := range pod.Spec.Volumes {
			if pv.PersistentVolumeClaim != nil && pv.PersistentVolumeClaim.ClaimName == v.NameOnCloud {
				out = append(out, pod.Name)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// CheckVolume implements infra.VolumeHost: a claim one node only may
// mount cannot serve a multi-node cluster.
func (in *Infra) CheckVolume(v *state.Volume, numNodes int) error {
	if v.Type != TypePVC || numNodes <= 1 {
		return nil
	}
	vc, err := readVolumeConfig(v.Config)
	if err != nil {
		return err
	}
	if vc.accessMode == "ReadWriteOnce" || vc.accessMode == "ReadWriteOncePod" {
		return fmt.Errorf("volume %s has access mode %s, so only one node can mount it, and this cluster has %d nodes; use num_nodes: 1, or a volume with access_mode ReadWriteMany", v.Name, vc.accessMode, numNodes)
	}
	return nil
}

// EphemeralVolume implements infra.EphemeralVolumeHost: SkyPilot's name,
// <cluster>-<md5(mount path)[:6]>, for a claim labelled with the cluster.
func (in *Infra) EphemeralVolume(cluster string, m api.VolumeMount) (*state.Volume, error) {
	e := m.Ephemeral
	if e.Type != "" && e.Type != TypePVC {
		return nil, fmt.Errorf("an ephemeral volume is a %s, not a %s", TypePVC, e.Type)
	}
	if e.SizeGi < 1 {
		return nil, fmt.Errorf("an ephemeral volume needs a size of at least 1Gi")
	}
	vc := volumeConfig{raw: map[string]any{}}
	maps.Copy(vc.raw, e.Config)
	if len(e.Labels) > 0 {
		vc.raw["labels"] = e.Labels
	}
	if err := vc.parse(); err != nil {
		return nil, err
	}
	if cluster == "" {
		cluster = "cluster"
	}
	h := pathHash(m.Path)
	return &state.Volume{Name: cluster + "-" + h, Type: TypePVC, Cloud: Kind, SizeGi: e.SizeGi, Config: vc.json(),
		NameOnCloud: in.nameOnCloud(cluster) + "-" + h, IsEphemeral: true}, nil
}

func pathHash(p string) string {
	sum := md5.Sum([]byte(p))
	return hex.EncodeToString(sum[:])[:6]
}

// stagingDir is where a volume with a ~/... mount path is mounted in the
// container; the path itself becomes a link to it.
func stagingDir(mountPath string) string { return "/mnt/skygo-volumes/" + pathHash(mountPath) }

func homeRelative(p string) bool { return p == "~" || strings.HasPrefix(p, "~/") }

// podVolumeName names a volume in the pod spec.
func podVolumeName(mountPath string) string { return "skygo-vol-" + pathHash(mountPath) }

// podVolumes turns the cluster's volumes into pod volumes and mounts,
// making the ephemeral claims; a named volume must be in the namespace
// the pods go to.
func (p *Provisioner) podVolumes(ctx context.Context, c *client, ns, name, user string, vols []provision.Volume) ([]corev1.Volume, []corev1.VolumeMount, error) {
	var pvs []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, v := range vols {
		if v.Type != TypePVC && v.Type != TypeHostPath {
			return nil, nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf("volume %s is a %s volume, which pods cannot mount", v.Name, v.Type)}
		}
		vc := volumeConfig{raw: map[string]any{}}
		maps.Copy(vc.raw, v.Config)
		if err := vc.parse(); err != nil {
			return nil, nil, &provision.ConfigError{Where: p.where(), Msg: "volume " + v.Name, Err: err}
		}
		if vc.namespace != "" && vc.namespace != ns {
			return nil, nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf(
				"volume %s is in namespace %s, but the cluster's pods go to namespace %s; set kubernetes.namespace, or use a volume of that namespace", v.Name, vc.namespace, ns)}
		}
		pv := corev1.Volume{Name: podVolumeName(v.Path)}
		switch {
		case v.Type == TypeHostPath:
			t := corev1.HostPathDirectoryOrCreate
			pv.HostPath = &corev1.HostPathVolumeSource{Path: vc.hostPath, Type: &t}
		case v.Ephemeral:
			pvc := volumePVC(v.NameOnCloud, ns, v.SizeGi, vc)
			maps.Copy(pvc.Labels, clusterLabels(name, user, nil))
			pvc.Labels[labelVolumeName] = labelSafe(v.Name)
			_, err := c.kc.PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
					return nil, nil, &provision.ConfigError{Where: p.where(), Msg: "the API server refused PersistentVolumeClaim " + pvc.Name, Err: err}
				}
				return nil, nil, apiError(p.context, "creating PersistentVolumeClaim "+pvc.Name, err)
			}
			pv.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.NameOnCloud}
		default:
			_, err := c.kc.PersistentVolumeClaims(ns).Get(ctx, v.NameOnCloud, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, nil, &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf(
					"volume %s: PersistentVolumeClaim %s is not in namespace %s; see `sky volumes ls -r`", v.Name, v.NameOnCloud, ns)}
			}
			if err != nil {
				return nil, nil, apiError(p.context, "reading PersistentVolumeClaim "+v.NameOnCloud, err)
			}
			pv.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.NameOnCloud}
		}
		pvs = append(pvs, pv)
		mp := v.Path
		if homeRelative(mp) {
			mp = stagingDir(v.Path)
		}
		mounts = append(mounts, corev1.VolumeMount{Name: pv.Name, MountPath: mp, SubPath: strings.Trim(v.SubPath, "/")})
	}
	return pvs, mounts, nil
}

// AttachVolume implements infra.VolumeHost: the pods were made with the
// volume (or the cluster was made without it, and cannot take it now); a
// ~/... mount path becomes a link on every node.
func (in *Infra) AttachVolume(ctx context.Context, v *state.Volume, m api.VolumeMount, info *provision.ClusterInfo, runners []provision.CommandRunner) (string, error) {
	c, err := in.client(info.Meta[metaContext])
	if err != nil {
		return "", err
	}
	ns, name := info.Meta[metaNamespace], info.Meta[metaName]
	head, err := c.kc.Pods(ns).Get(ctx, podName(name, 0), metav1.GetOptions{})
	if err != nil {
		return "", apiError(c.context, "reading the head pod", err)
	}
	if !podMounts(head, v, m) {
		return "", fmt.Errorf("cluster %s's pods were made without volume %s at %s, and a pod cannot take a volume later: `sky down %s` and launch it again with the volume", info.Name, v.Name, m.Path, info.Name)
	}
	if homeRelative(m.Path) {
		for _, r := range runners {
			if err := infra.RunVolumeCommand(ctx, r, v.Name, infra.LinkVolumeCommand(stagingDir(m.Path), m.Path)); err != nil {
				return "", err
			}
		}
	}
	return "", nil
}

// podMounts reports whether the pod mounts the volume as m asks.
func podMounts(pod *corev1.Pod, v *state.Volume, m api.VolumeMount) bool {
	want := podVolumeName(m.Path)
	found := false
	for _, pv := range pod.Spec.Volumes {
		if pv.Name != want {
			continue
		}
		switch {
		case pv.PersistentVolumeClaim != nil:
			found = v.Type == TypePVC && pv.PersistentVolumeClaim.ClaimName == v.NameOnCloud
		case pv.HostPath != nil:
			vc, _ := readVolumeConfig(v.Config)
			found = v.Type == TypeHostPath && pv.HostPath.Path == vc.hostPath
		}
	}
	if !found || len(pod.Spec.Containers) == 0 {
		return false
	}
	for _, vm := range pod.Spec.Containers[0].VolumeMounts {
		if vm.Name == want && vm.SubPath == strings.Trim(m.SubPath, "/") {
			return true
		}
	}
	return false
}

// DetachVolume implements infra.VolumeHost: the links go; the mount goes
// with the pods.
func (in *Infra) DetachVolume(ctx context.Context, v *state.Volume, m api.VolumeMount, _ *provision.ClusterInfo, runners []provision.CommandRunner) error {
	if !homeRelative(m.Path) {
		return nil
	}
	var errs []error
	for _, r := range runners {
		errs = append(errs, infra.RunVolumeCommand(ctx, r, v.Name, infra.UnlinkVolumeCommand(stagingDir(m.Path), m.Path)))
	}
	return errors.Join(errs...)
}
