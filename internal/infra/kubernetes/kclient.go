package kubernetes

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// kubeAPI is the Kubernetes API as SkyGo calls it: the few kinds of the
// core, RBAC and storage groups it touches, typed, over client-go's REST
// client. It stands in for client-go's generated clientset, whose package
// init registers the types of every API group: linked into sky-server,
// that cost 13.5 MiB of its idle RSS for calls SkyGo never makes. The
// methods read as the clientset's (kc.Pods(ns).List(ctx, opts)), so the
// call sites and the tests' clientset look alike.
type kubeAPI struct {
	core, rbac, storage *rest.RESTClient
}

// apiTypes holds the types of the groups kubeAPI speaks, and the option
// types (list, delete, exec ...) it encodes as query parameters. They are
// registered on the first client, not at package init, so a process that
// never dials Kubernetes never builds them.
var apiTypes = sync.OnceValue(func() *codecs {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, rbacv1.AddToScheme, storagev1.AddToScheme} {
		if err := add(s); err != nil {
			panic("kubernetes: registering API types: " + err.Error()) // fixed input: a bug, not a condition
		}
	}
	return &codecs{serializer.NewCodecFactory(s), runtime.NewParameterCodec(s)}
})

type codecs struct {
	bodies serializer.CodecFactory
	params runtime.ParameterCodec
}

func parameterCodec() runtime.ParameterCodec { return apiTypes().params }

// newKubeAPI makes the clients of a rest.Config. They share one HTTP
// client and one rate limiter, as the clientset's groups do.
func newKubeAPI(rc *rest.Config) (*kubeAPI, error) {
	cfg := *rc
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	hc, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, err
	}
	group := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := cfg
		c.GroupVersion = &gv
		c.APIPath = apiPath
		c.NegotiatedSerializer = apiTypes().bodies.WithoutConversion()
		return rest.RESTClientForConfigAndClient(&c, hc)
	}
	k := &kubeAPI{}
	if k.core, err = group(corev1.SchemeGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if k.rbac, err = group(rbacv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if k.storage, err = group(storagev1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return k, nil
}

// The kinds. ns is a namespace; "" lists a namespaced kind across all of
// them.
func (k *kubeAPI) Pods(ns string) kind[corev1.Pod, corev1.PodList, *corev1.Pod, *corev1.PodList] {
	return kind[corev1.Pod, corev1.PodList, *corev1.Pod, *corev1.PodList]{k.core, ns, "pods"}
}

func (k *kubeAPI) Services(ns string) kind[corev1.Service, corev1.ServiceList, *corev1.Service, *corev1.ServiceList] {
	return kind[corev1.Service, corev1.ServiceList, *corev1.Service, *corev1.ServiceList]{k.core, ns, "services"}
}

func (k *kubeAPI) PersistentVolumeClaims(ns string) kind[corev1.PersistentVolumeClaim, corev1.PersistentVolumeClaimList, *corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
	return kind[corev1.PersistentVolumeClaim, corev1.PersistentVolumeClaimList, *corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]{k.core, ns, "persistentvolumeclaims"}
}

func (k *kubeAPI) Events(ns string) kind[corev1.Event, corev1.EventList, *corev1.Event, *corev1.EventList] {
	return kind[corev1.Event, corev1.EventList, *corev1.Event, *corev1.EventList]{k.core, ns, "events"}
}

func (k *kubeAPI) ServiceAccounts(ns string) kind[corev1.ServiceAccount, corev1.ServiceAccountList, *corev1.ServiceAccount, *corev1.ServiceAccountList] {
	return kind[corev1.ServiceAccount, corev1.ServiceAccountList, *corev1.ServiceAccount, *corev1.ServiceAccountList]{k.core, ns, "serviceaccounts"}
}

func (k *kubeAPI) Nodes() kind[corev1.Node, corev1.NodeList, *corev1.Node, *corev1.NodeList] {
	return kind[corev1.Node, corev1.NodeList, *corev1.Node, *corev1.NodeList]{k.core, "", "nodes"}
}

func (k *kubeAPI) Roles(ns string) kind[rbacv1.Role, rbacv1.RoleList, *rbacv1.Role, *rbacv1.RoleList] {
	return kind[rbacv1.Role, rbacv1.RoleList, *rbacv1.Role, *rbacv1.RoleList]{k.rbac, ns, "roles"}
}

func (k *kubeAPI) RoleBindings(ns string) kind[rbacv1.RoleBinding, rbacv1.RoleBindingList, *rbacv1.RoleBinding, *rbacv1.RoleBindingList] {
	return kind[rbacv1.RoleBinding, rbacv1.RoleBindingList, *rbacv1.RoleBinding, *rbacv1.RoleBindingList]{k.rbac, ns, "rolebindings"}
}

func (k *kubeAPI) ClusterRoles() kind[rbacv1.ClusterRole, rbacv1.ClusterRoleList, *rbacv1.ClusterRole, *rbacv1.ClusterRoleList] {
	return kind[rbacv1.ClusterRole, rbacv1.ClusterRoleList, *rbacv1.ClusterRole, *rbacv1.ClusterRoleList]{k.rbac, "", "clusterroles"}
}

func (k *kubeAPI) ClusterRoleBindings() kind[rbacv1.ClusterRoleBinding, rbacv1.ClusterRoleBindingList, *rbacv1.ClusterRoleBinding, *rbacv1.ClusterRoleBindingList] {
	return kind[rbacv1.ClusterRoleBinding, rbacv1.ClusterRoleBindingList, *rbacv1.ClusterRoleBinding, *rbacv1.ClusterRoleBindingList]{k.rbac, "", "clusterrolebindings"}
}

func (k *kubeAPI) StorageClasses() kind[storagev1.StorageClass, storagev1.StorageClassList, *storagev1.StorageClass, *storagev1.StorageClassList] {
	return kind[storagev1.StorageClass, storagev1.StorageClassList, *storagev1.StorageClass, *storagev1.StorageClassList]{k.storage, "", "storageclasses"}
}

// execURL is the URL of the exec subresource of a pod, for the
// remotecommand executors.
func (k *kubeAPI) execURL(ns, pod string, opts *corev1.PodExecOptions) *url.URL {
	return k.core.Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(opts, parameterCodec()).URL()
}

// object is a pointer to an API type: O is T's pointer, L's for its list.
type object[T any] interface {
	*T
	runtime.Object
	GetName() string
}

type list[L any] interface {
	*L
	runtime.Object
}

// kind is the calls on one kind in one namespace (or none).
type kind[T, L any, O object[T], LO list[L]] struct {
	c        *rest.RESTClient
	ns       string
	resource string
}

func (r kind[T, L, O, LO]) req(verb string) *rest.Request {
	return r.c.Verb(verb).NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource)
}

// timeout is a list's server-side time limit, sent as the clientset does.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

func (r kind[T, L, O, LO]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error) {
	out := O(new(T))
	err := r.req(http.MethodGet).Name(name).VersionedParams(&opts, parameterCodec()).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L, O, LO]) List(ctx context.Context, opts metav1.ListOptions) (*L, error) {
	out := LO(new(L))
	err := r.req(http.MethodGet).VersionedParams(&opts, parameterCodec()).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L, O, LO]) Create(ctx context.Context, obj O, opts metav1.CreateOptions) (*T, error) {
	out := O(new(T))
	err := r.req(http.MethodPost).VersionedParams(&opts, parameterCodec()).Body(runtime.Object(obj)).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L, O, LO]) Update(ctx context.Context, obj O, opts metav1.UpdateOptions) (*T, error) {
	out := O(new(T))
	err := r.req(http.MethodPut).Name(obj.GetName()).VersionedParams(&opts, parameterCodec()).Body(runtime.Object(obj)).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L, O, LO]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*T, error) {
	out := O(new(T))
	err := r.c.Patch(pt).NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).Name(name).
		VersionedParams(&opts, parameterCodec()).Body(data).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L, O, LO]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.req(http.MethodDelete).Name(name).Body(runtime.Object(&opts)).Do(ctx).Error()
}

func (r kind[T, L, O, LO]) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return r.req(http.MethodDelete).VersionedParams(&listOpts, parameterCodec()).Timeout(timeout(listOpts)).
		Body(runtime.Object(&opts)).Do(ctx).Error()
}
