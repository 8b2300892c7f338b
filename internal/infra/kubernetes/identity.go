package kubernetes

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/provision"
)

// kubernetes.remote_identity: which service account the pods run as, so
// what a job in them may do with the API server.
//   - SERVICE_ACCOUNT, LOCAL_CREDENTIALS, NO_UPLOAD: SkyPilot's account
//     skypilot-service-account, made with its roles (everything in the
//     namespace; reading nodes, namespaces, runtime and ingress classes
//     cluster-wide). SkyGo uploads no credentials either way.
//   - any other string: that account, which must exist; no role is made.
//   - unset: the namespace's default account, with no roles: a job gets
//     no API access it was not given (SkyPilot would make its account).
// The value may also be a mapping of context to one of those.

const (
	skyServiceAccount = "skypilot-service-account"
	identityDefault   = "" // unset
)

var skyIdentities = map[string]bool{"SERVICE_ACCOUNT": true, "LOCAL_CREDENTIALS": true, "NO_UPLOAD": true}

// resolveIdentity reads remote_identity for context: the service
// account's name ("" for the namespace's default) and whether SkyGo makes
// it and its roles.
func resolveIdentity(v any, context string) (account string, own bool, err error) {
	if m, ok := v.(map[string]any); ok {
		v, ok = m[context]
		if !ok {
			v = m["*"]
		}
	}
	switch s := v.(type) {
	case nil:
		return identityDefault, false, nil
	case string:
		if skyIdentities[s] {
			return skyServiceAccount, true, nil
		}
		if s == "" {
			return identityDefault, false, nil
		}
		return s, false, nil
	}
	return "", false, fmt.Errorf("kubernetes.remote_identity must be SERVICE_ACCOUNT, LOCAL_CREDENTIALS, NO_UPLOAD, a service account's name, or a mapping of context to one of those; got %T", v)
}

// ensureIdentity makes SkyPilot's service account and its roles in ns
// (kept across clusters, as SkyPilot keeps them), or checks that a named
// account exists.
func (p *Provisioner) ensureIdentity(ctx context.Context, c *client, ns, account string, own bool) error {
	if account == identityDefault {
		return nil
	}
	if !own {
		if _, err := c.kc.ServiceAccounts(ns).Get(ctx, account, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf(
					"kubernetes.remote_identity names service account %s, which namespace %s does not have; create it, or use SERVICE_ACCOUNT", account, ns)}
			}
			return apiError(p.context, "reading service account "+account, err)
		}
		return nil
	}
	meta := func(name, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{labelParent: labelParentValue}}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: ns}}
	create := func(what string, err error) error {
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if apierrors.IsForbidden(err) {
			return &provision.ConfigError{Where: p.where(), Msg: fmt.Sprintf(
				"kubernetes.remote_identity %s needs %s, which these credentials may not create (%v); ask the cluster's administrator for it, or name an existing service account", skyServiceAccount, what, err)}
		}
		return apiError(p.context, "creating "+what, err)
	}
	_, err := c.kc.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(account, ns)}, metav1.CreateOptions{})
	if err := create("service account "+account, err); err != nil {
		return err
	}
	role := account + "-role"
	_, err = c.kc.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta(role, ns),
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}, metav1.CreateOptions{})
	if err := create("role "+role, err); err != nil {
		return err
	}
	_, err = c.kc.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta(role+"-binding", ns), Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}}, metav1.CreateOptions{})
	if err := create("role binding "+role+"-binding", err); err != nil {
		return err
	}
	cluster := account + "-cluster-role"
	_, err = c.kc.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta(cluster, ""), Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"node.k8s.io"}, Resources: []string{"runtimeclasses"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingressclasses"}, Verbs: []string{"get", "list", "watch"}},
	}}, metav1.CreateOptions{})
	if err := create("cluster role "+cluster, err); err != nil {
		return err
	}
	// One binding, as SkyPilot names it, whose subjects are the accounts
	// of every namespace launched in: this one is added when missing.
	binding := cluster + "-binding"
	crbs := c.kc.ClusterRoleBindings()
	_, err = crbs.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta(binding, ""), Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cluster}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return create("cluster role binding "+binding, err)
	}
	crb, err := crbs.Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		return apiError(p.context, "reading cluster role binding "+binding, err)
	}
	if slices.Contains(crb.Subjects, subject[0]) {
		return nil
	}
	crb.Subjects = append(crb.Subjects, subject[0])
	_, err = crbs.Update(ctx, crb, metav1.UpdateOptions{}) // a conflict: the next launch adds it
	return create("cluster role binding "+binding+" for namespace "+ns, err)
}
