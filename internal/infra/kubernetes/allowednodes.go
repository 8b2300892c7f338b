package kubernetes

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// allowedNodes is kubernetes.allowed_nodes: the only nodes SkyGo may put
// pods on. A node is allowed when any entry admits it: one of the
// label_selector pairs (key=value, ORed), its name, or one of its
// addresses. The pods get it as a required node affinity; the optimizer
// counts only these nodes.
type allowedNodes struct {
	labels [][2]string
	names  []string
	ips    []string
}

// parseAllowedNodes reads the config value: label_selector as a mapping
// {key: value} or a list of "key=value", names and ips as lists of
// strings. nil means every node is allowed.
func parseAllowedNodes(v any) (*allowedNodes, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("kubernetes.allowed_nodes must be a mapping with label_selector, names and/or ips, not %T", v)
	}
	a := &allowedNodes{}
	for k, val := range m {
		switch k {
		case "label_selector":
			pairs, err := labelPairs(val)
			if err != nil {
				return nil, err
			}
			a.labels = pairs
		case "names", "ips":
			list, err := stringList("kubernetes.allowed_nodes."+k, val)
			if err != nil {
				return nil, err
			}
			if k == "names" {
				a.names = list
			} else {
				a.ips = list
			}
		default:
			return nil, fmt.Errorf("kubernetes.allowed_nodes has no key %q (it takes label_selector, names, ips)", k)
		}
	}
	if len(a.labels)+len(a.names)+len(a.ips) == 0 {
		return nil, fmt.Errorf("kubernetes.allowed_nodes allows no node: give label_selector, names or ips, or remove it")
	}
	return a, nil
}

func labelPairs(v any) ([][2]string, error) {
	var out [][2]string
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			out = append(out, [2]string{k, fmt.Sprint(val)})
		}
	case []any:
		for _, e := range t {
			s, _ := e.(string)
			k, val, ok := strings.Cut(s, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("kubernetes.allowed_nodes.label_selector: %v is not key=value", e)
			}
			out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(val)})
		}
	case string:
		for _, s := range strings.Split(t, ",") {
			k, val, ok := strings.Cut(s, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("kubernetes.allowed_nodes.label_selector: %q is not key=value", s)
			}
			out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(val)})
		}
	default:
		return nil, fmt.Errorf("kubernetes.allowed_nodes.label_selector must be a mapping of labels or a list of key=value, not %T", v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+"="+out[i][1] < out[j][0]+"="+out[j][1] })
	return out, nil
}

func stringList(key string, v any) ([]string, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s must be a list, not %T", key, v)
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, ok := e.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("%s: %v is not a name", key, e)
		}
		out = append(out, s)
	}
	return out, nil
}

// allowedOnly are the nodes allowed admits.
func allowedOnly(nodes []nodeFree, allowed *allowedNodes) []nodeFree {
	var out []nodeFree
	for _, n := range nodes {
		if allowed.admits(n.Name, n.Labels, n.IPs) {
			out = append(out, n)
		}
	}
	return out
}

// nodeIPs are a node's addresses other than its host name.
func nodeIPs(n *corev1.Node) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out = append(out, a.Address)
		}
	}
	return out
}

// admits reports whether the node may take SkyGo's pods.
func (a *allowedNodes) admits(name string, labels map[string]string, ips []string) bool {
	if a == nil {
		return true
	}
	for _, kv := range a.labels {
		if v, ok := labels[kv[0]]; ok && v == kv[1] {
			return true
		}
	}
	if slices.Contains(a.names, name) {
		return true
	}
	for _, ip := range ips {
		if slices.Contains(a.ips, ip) {
			return true
		}
	}
	return false
}

// terms are the node selector terms (ORed) that admit the allowed nodes:
// one per label pair, and one naming the nodes allowed by name or by
// address (a pod cannot select a node by address, so nodes resolves
// them). An error says when no node of the context is allowed.
func (a *allowedNodes) terms(nodes []corev1.Node) ([]corev1.NodeSelectorTerm, error) {
	var terms []corev1.NodeSelectorTerm
	for _, kv := range a.labels {
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: kv[0], Operator: corev1.NodeSelectorOpIn, Values: []string{kv[1]}}}})
	}
	names := slices.Clone(a.names)
	admitted := 0
	for i := range nodes {
		n := &nodes[i]
		ips := nodeIPs(n)
		if a.admits(n.Name, n.Labels, ips) {
			admitted++
		}
		for _, ip := range ips {
			if slices.Contains(a.ips, ip) && !slices.Contains(names, n.Name) {
				names = append(names, n.Name)
			}
		}
	}
	if admitted == 0 {
		return nil, a.noneAdmitted(len(nodes))
	}
	if len(names) > 0 {
		sort.Strings(names)
		terms = append(terms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: names}}})
	}
	return terms, nil
}

// noneAdmitted is the error of a context none of whose total nodes is
// allowed, for the optimizer and a launch alike.
func (a *allowedNodes) noneAdmitted(total int) error {
	return fmt.Errorf("kubernetes.allowed_nodes admits none of the context's %d nodes (%s)", total, a)
}

func (a *allowedNodes) String() string {
	var parts []string
	for _, kv := range a.labels {
		parts = append(parts, kv[0]+"="+kv[1])
	}
	if len(a.names) > 0 {
		parts = append(parts, "names "+strings.Join(a.names, ","))
	}
	if len(a.ips) > 0 {
		parts = append(parts, "ips "+strings.Join(a.ips, ","))
	}
	return strings.Join(parts, "; ")
}

// restrictTo makes a pod's required node affinity also demand one of
// allowed (terms are ORed, so each existing term is paired with each
// allowed one).
func restrictTo(aff *corev1.Affinity, allowed []corev1.NodeSelectorTerm) {
	if len(allowed) == 0 {
		return
	}
	if aff.NodeAffinity == nil {
		aff.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: allowed}
		return
	}
	var out []corev1.NodeSelectorTerm
	for _, t := range req.NodeSelectorTerms {
		for _, a := range allowed {
			out = append(out, corev1.NodeSelectorTerm{
				MatchExpressions: append(slices.Clone(t.MatchExpressions), a.MatchExpressions...),
				MatchFields:      append(slices.Clone(t.MatchFields), a.MatchFields...),
			})
		}
	}
	req.NodeSelectorTerms = out
}
