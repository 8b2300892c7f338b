package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil/k8stest"
)

func addrNode(name, ip string, labels map[string]string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// TestAllowedNodesParse: the shapes allowed_nodes takes, and the errors
// of the others.
func TestAllowedNodesParse(t *testing.T) {
	a, err := parseAllowedNodes(map[string]any{"label_selector": []any{"pool=a", "team = ml"}, "names": []any{"n1"}, "ips": []any{"10.0.0.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]string{{"pool", "a"}, {"team", "ml"}}; !reflect.DeepEqual(a.labels, want) || a.names[0] != "n1" || a.ips[0] != "10.0.0.3" {
		t.Errorf("parsed %+v", a)
	}
	if a, err := parseAllowedNodes(map[string]any{"label_selector": map[string]any{"pool": "b"}}); err != nil || a.labels[0] != [2]string{"pool", "b"} {
		t.Errorf("mapping selector: %+v %v", a, err)
	}
	if a, err := parseAllowedNodes(nil); a != nil || err != nil {
		t.Errorf("nil: %+v %v", a, err)
	}
	for _, bad := range []any{"n1", map[string]any{}, map[string]any{"hosts": []any{"x"}}, map[string]any{"names": "n1"},
		map[string]any{"label_selector": []any{"novalue"}}} {
		if _, err := parseAllowedNodes(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestAllowedNodesTerms: a node is admitted by any entry; the terms say
// the same to the scheduler (addresses become names) and are ANDed with
// the pod's own required affinity.
func TestAllowedNodesTerms(t *testing.T) {
	nodes := []corev1.Node{addrNode("n1", "10.0.0.1", map[string]string{"pool": "a"}), addrNode("n2", "10.0.0.2", nil), addrNode("n3", "10.0.0.3", nil)}
	a, _ := parseAllowedNodes(map[string]any{"label_selector": map[string]any{"pool": "a"}, "ips": []any{"10.0.0.3"}})
	for i, want := range []bool{true, false, true} {
		n := &nodes[i]
		if got := a.admits(n.Name, n.Labels, nodeIPs(n)); got != want {
			t.Errorf("%s admitted %v, want %v", n.Name, got, want)
		}
	}
	terms, err := a.terms(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(terms) != 2 || terms[0].MatchExpressions[0].Key != "pool" || !reflect.DeepEqual(terms[1].MatchFields[0].Values, []string{"n3"}) {
		t.Errorf("terms %+v", terms)
	}
	aff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}}}}}}}}
	restrictTo(aff, terms)
	got := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(got) != 2 || len(got[0].MatchExpressions) != 2 || got[0].MatchExpressions[0].Key != "gpu" ||
		len(got[1].MatchExpressions) != 1 || len(got[1].MatchFields) != 1 {
		t.Errorf("restricted terms %+v: want the GPU requirement ANDed into each allowed term", got)
	}
	none, _ := parseAllowedNodes(map[string]any{"names": []any{"gone"}})
	if _, err := none.terms(nodes); err == nil || !strings.Contains(err.Error(), "admits none") {
		t.Errorf("no node admitted: %v", err)
	}
}

// TestAllowedNodesOnKwok: with allowed_nodes naming one GPU node, both
// pods of a cluster land on it and the optimizer sees only its GPUs;
// naming no node of the context makes the context infeasible.
func TestAllowedNodesOnKwok(t *testing.T) {
	in, c, ns := kwokInfra(t, "  allowed_nodes:\n    names: [kwok-gpu-2]\n")
	ctx := context.Background()
	cands, why := in.Capacity().Feasible(ctx, optimizer.Request{AccName: "H100", AccCount: 1}, 2)
	if len(cands) != 1 {
		t.Fatalf("feasible with one allowed GPU node: %+v (%s)", cands, why)
	}
	p, _ := in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
	info, err := p.Provision(ctx, provision.ClusterSpec{Name: "pinned", NumNodes: 2,
		Resources: provision.Resources{CPUs: 1, MemoryGB: 1, GPUs: map[string]float64{"H100": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.Nodes {
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, n.ID, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != "kwok-gpu-2" {
			t.Errorf("pod %s on %s, want kwok-gpu-2 (the one allowed node)", pod.Name, pod.Spec.NodeName)
		}
	}
	if err := p.Terminate(ctx, "pinned"); err != nil {
		t.Fatal(err)
	}

	// Naming no node of the context: the optimizer drops the context, and
	// a launch there (another server's plan) fails over.
	in, _, _ = kwokInfra(t, "  allowed_nodes:\n    names: [no-such-node]\n")
	if cands, why := in.Capacity().Feasible(ctx, optimizer.Request{}, 1); len(cands) != 0 || !strings.Contains(why, "admits none") {
		t.Errorf("feasible with no allowed node: %+v (%s)", cands, why)
	}
	p, _ = in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
	_, err = p.Provision(ctx, provision.ClusterSpec{Name: "nowhere", NumNodes: 1, Resources: provision.Resources{CPUs: 1, MemoryGB: 1}})
	var ce *provision.CapacityError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "admits none") {
		t.Errorf("allowed_nodes naming no node: %v", err)
	}
}

// TestBadLaunchKeyKeepsDown: a launch-only key the config gets wrong
// refuses launches but not status or down of the context's clusters.
func TestBadLaunchKeyKeepsDown(t *testing.T) {
	in, c, ns := kwokInfra(t, "")
	ctx := context.Background()
	p, _ := in.Provisioner(infra.ID{Kind: Kind, Parts: []string{k8stest.Context}})
	if _, err := p.Provision(ctx, provision.ClusterSpec{Name: "kept", NumNodes: 1, Resources: provision.Resources{CPUs: 1, MemoryGB: 1}}); err != nil {
		t.Fatal(err)
	}
	// The server's config goes wrong afterwards, in a way its schema
	// lets through: allowed_nodes allowing no node.
	cfg := "kubernetes:\n  namespace: " + ns + "\n  allowed_nodes:\n    names: []\n"
	if err := os.WriteFile(filepath.Join(in.env.Home, ".sky", "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	bp := p
	if _, err := bp.Provision(ctx, provision.ClusterSpec{Name: "new", NumNodes: 1}); err == nil || !strings.Contains(err.Error(), "allowed_nodes") {
		t.Errorf("launch with a bad allowed_nodes: %v", err)
	}
	if st, err := bp.Query(ctx, "kept"); err != nil || len(st) != 1 {
		t.Errorf("status with a bad allowed_nodes: %+v %v", st, err)
	}
	if err := bp.Terminate(ctx, "kept"); err != nil {
		t.Errorf("down with a bad allowed_nodes: %v", err)
	}
	if left := c.ListAll(t, ns, clusterSelector(in.nameOnCloud("kept"))); !left.Empty() {
		t.Errorf("left after down: %+v", left)
	}
}
