package kubernetes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil/k8stest"
)

func TestResolveIdentity(t *testing.T) {
	for _, tc := range []struct {
		v       any
		account string
		own     bool
	}{
		{nil, "", false},
		{"SERVICE_ACCOUNT", skyServiceAccount, true},
		{"NO_UPLOAD", skyServiceAccount, true},
		{"team-sa", "team-sa", false},
		{map[string]any{"ctx": "team-sa", "*": "SERVICE_ACCOUNT"}, "team-sa", false},
		{map[string]any{"other": "team-sa", "*": "SERVICE_ACCOUNT"}, skyServiceAccount, true},
		{map[string]any{"other": "team-sa"}, "", false},
	} {
		account, own, err := resolveIdentity(tc.v, "ctx")
		if err != nil || account != tc.account || own != tc.own {
			t.Errorf("%v: %q %v %v, want %q %v", tc.v, account, own, err, tc.account, tc.own)
		}
	}
	if _, _, err := resolveIdentity([]any{"x"}, "ctx"); err == nil {
		t.Error("a list was accepted")
	}
}

// TestRemoteIdentityOnKwok: SERVICE_ACCOUNT makes SkyPilot's account and
// roles and the pods run as it; a named account must exist; unset leaves
// the namespace's default account.
func TestRemoteIdentityOnKwok(t *testing.T) {
	ctx := context.Background()
	launch := func(t *testing.T, in *Infra, name string) (*provision.ClusterInfo, error) {
		p, _ := in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
		info, err := p.Provision(ctx, provision.ClusterSpec{Name: name, NumNodes: 1, Resources: provision.Resources{CPUs: 1, MemoryGB: 1}})
		if err == nil {
			t.Cleanup(func() { _ = p.Terminate(context.Background(), name) })
		}
		return info, err
	}
	podAccount := func(t *testing.T, c *k8stest.Cluster, ns string, info *provision.ClusterInfo) string {
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, info.Nodes[0].ID, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod.Spec.ServiceAccountName
	}

	in, c, ns := kwokInfra(t, "  remote_identity: SERVICE_ACCOUNT\n")
	info, err := launch(t, in, "sa")
	if err != nil {
		t.Fatal(err)
	}
	if got := podAccount(t, c, ns, info); got != skyServiceAccount {
		t.Errorf("pod runs as %q, want %s", got, skyServiceAccount)
	}
	rbac := c.Client.RbacV1()
	role, err := rbac.Roles(ns).Get(ctx, skyServiceAccount+"-role", metav1.GetOptions{})
	if err != nil || len(role.Rules) != 1 || role.Rules[0].Verbs[0] != "*" {
		t.Errorf("namespace role: %+v %v", role, err)
	}
	if rb, err := rbac.RoleBindings(ns).Get(ctx, skyServiceAccount+"-role-binding", metav1.GetOptions{}); err != nil || rb.Subjects[0].Name != skyServiceAccount {
		t.Errorf("role binding: %+v %v", rb, err)
	}
	crb, err := rbac.ClusterRoleBindings().Get(ctx, skyServiceAccount+"-cluster-role-binding", metav1.GetOptions{})
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: skyServiceAccount, Namespace: ns}
	if err != nil || !slices.Contains(crb.Subjects, subject) {
		t.Errorf("cluster role binding lacks this namespace's account: %+v %v", crb, err)
	}
	// A second namespace's account joins the one cluster role binding,
	// which is read and updated rather than made again.
	in2, _, ns2 := kwokInfra(t, "  remote_identity: SERVICE_ACCOUNT\n")
	if _, err := launch(t, in2, "sa2"); err != nil {
		t.Fatal(err)
	}
	crb, err = rbac.ClusterRoleBindings().Get(ctx, skyServiceAccount+"-cluster-role-binding", metav1.GetOptions{})
	subject2 := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: skyServiceAccount, Namespace: ns2}
	if err != nil || !slices.Contains(crb.Subjects, subject) || !slices.Contains(crb.Subjects, subject2) {
		t.Errorf("cluster role binding lacks an account of %s or %s: %+v %v", ns, ns2, crb, err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), skyServiceAccount+"-cluster-role-binding", metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), skyServiceAccount+"-cluster-role", metav1.DeleteOptions{})
	})

	// A named account: refused while missing, used once it exists.
	in, c, ns = kwokInfra(t, "  remote_identity: team-sa\n")
	var ce *provision.ConfigError
	if _, err := launch(t, in, "named"); !errors.As(err, &ce) || !strings.Contains(err.Error(), "team-sa") {
		t.Errorf("a missing named account: %v", err)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "team-sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if info, err = launch(t, in, "named"); err != nil {
		t.Fatal(err)
	}
	if got := podAccount(t, c, ns, info); got != "team-sa" {
		t.Errorf("pod runs as %q, want team-sa", got)
	}
	if _, err := rbac.Roles(ns).Get(ctx, skyServiceAccount+"-role", metav1.GetOptions{}); err == nil {
		t.Errorf("a named account got SkyPilot's role made")
	}

	in, c, ns = kwokInfra(t, "")
	if info, err = launch(t, in, "plain"); err != nil {
		t.Fatal(err)
	}
	if got := podAccount(t, c, ns, info); got != "default" && got != "" {
		t.Errorf("pod runs as %q, want the namespace's default", got)
	}
}
