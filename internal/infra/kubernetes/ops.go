package kubernetes

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/op"
)

var _ infra.Operations = (*Infra)(nil)

// Ops implements infra.Operations: `sky gpus label` and the SDK's
// node and GPU availability calls.
func (in *Infra) Ops() []op.Op {
	return []op.Op{
		op.Handle(apiop.KubernetesLabelGPUs, in.labelGPUs),
		op.Handle(apiop.KubernetesNodeInfo, in.nodeInfo),
		op.Handle(apiop.RealtimeKubernetesGPUAvailability, in.realtimeGPUs),
	}
}

// oneContext is the context a call names, else the first allowed one
// (SkyPilot's current context).
func (in *Infra) oneContext(name string) (string, error) {
	kc := in.contexts()
	if kc.Reason != "" {
		return "", &op.Error{Type: "ValueError", Message: kc.Reason}
	}
	for _, k := range kc.Allowed {
		if name == "" || k.Name == name {
			return k.Name, nil
		}
	}
	return "", &op.Error{Type: "ValueError", Message: fmt.Sprintf("context %q is not one SkyGo may use", name)}
}

// nodeInfo is sky.kubernetes_node_info: every node of a context with
// its accelerator, total and free GPUs, CPUs and memory, live.
func (in *Infra) nodeInfo(ctx context.Context, r *op.Request, b api.KubernetesNodeInfoBody) (api.KubernetesNodesInfo, error) {
	name, err := in.oneContext(b.Context)
	if err != nil {
		return api.KubernetesNodesInfo{}, err
	}
	raw, nodes, err := in.inventory(ctx, name, true)
	if err != nil {
		return api.KubernetesNodesInfo{}, err
	}
	out := api.KubernetesNodesInfo{NodeInfoDict: map[string]api.KubernetesNodeInfo{}}
	if raw.podsHidden {
		out.Hint = "Free resources are not shown: the credentials cannot list pods in every namespace."
	}
	ips := map[string]string{}
	for _, n := range raw.nodes {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips[n.Name] = a.Address
			}
		}
	}
	for _, n := range nodes {
		info := api.KubernetesNodeInfo{Name: n.Name, Total: map[string]int{"accelerator_count": int(n.GPUs)},
			Free: map[string]int{"accelerators_available": int(n.FreeGPUs)}, CPUCount: n.CPUs, MemoryGB: n.MemoryGB,
			CPUFree: n.FreeCPUs, MemoryFreeGB: n.FreeMemoryGB, IsReady: n.Ready}
		if n.Acc != "" {
			acc := n.Acc
			info.AcceleratorType = &acc
		}
		if ip, ok := ips[n.Name]; ok {
			info.IPAddress = &ip
		}
		out.NodeInfoDict[n.Name] = info
	}
	return out, nil
}

// realtimeGPUs is sky.realtime_kubernetes_gpu_availability: per context,
// [gpu, requestable counts, capacity, available] for each accelerator,
// as SkyPilot's list of (context, [RealtimeGpuAvailability]).
func (in *Infra) realtimeGPUs(ctx context.Context, r *op.Request, b api.RealtimeGPUAvailabilityBody) ([][]any, error) {
	if b.IsSSH {
		return nil, &op.Error{Type: "ValueError", Message: "SkyGo's SSH node pools are not Kubernetes contexts; use sky.list_accelerators with clouds='ssh'"}
	}
	kc := in.contexts()
	if kc.Reason != "" {
		return nil, &op.Error{Type: "ValueError", Message: kc.Reason}
	}
	out := [][]any{}
	for _, k := range kc.Allowed {
		if b.Context != "" && k.Name != b.Context {
			continue
		}
		_, nodes, err := in.inventory(ctx, k.Name, true)
		if err != nil {
			return nil, err
		}
		rows := [][]any{}
		for _, u := range gpuUsage(k.Name, nodes) {
			if u.Node != "" || (b.NameFilter != "" && !strings.EqualFold(u.GPU, b.NameFilter)) {
				continue
			}
			if b.QuantityFilter > 0 && (len(u.Requestable) == 0 || u.Requestable[len(u.Requestable)-1] < b.QuantityFilter) {
				continue
			}
			rows = append(rows, []any{u.GPU, u.Requestable, u.Total, u.Free})
		}
		out = append(out, []any{k.Name, rows})
	}
	if b.Context != "" && len(out) == 0 {
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("context %q is not one SkyGo may use", b.Context)}
	}
	return out, nil
}

// labelGPUs labels each GPU node of the context(s) with
// skypilot.co/accelerator, derived from the labels GPU operators already
// publish. SkyPilot's command runs a probe job with nvidia-smi on every
// node instead; without GPU hardware to probe, SkyGo labels what the
// nodes already say and names the nodes it cannot label, with what to do.
func (in *Infra) labelGPUs(ctx context.Context, r *op.Request, b api.GPUsLabelBody) ([]api.GPUNodeLabel, error) {
	if b.Cleanup {
		fmt.Fprintln(r.Log, "Nothing to clean up: SkyGo's GPU labelling creates no objects in the cluster.")
		return []api.GPUNodeLabel{}, nil
	}
	kc := in.contexts()
	if kc.Reason != "" {
		return nil, &op.Error{Type: "ValueError", Message: kc.Reason}
	}
	var names []string
	for _, k := range kc.Allowed {
		if b.Context == "" || b.Context == k.Name {
			names = append(names, k.Name)
		}
	}
	if len(names) == 0 {
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("context %q is not one SkyGo may use", b.Context)}
	}
	out := []api.GPUNodeLabel{}
	for _, name := range names {
		c, err := in.client(name)
		if err != nil {
			return nil, err
		}
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		nl, err := c.kc.Nodes().List(lctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			return nil, apiError(name, "listing nodes", err)
		}
		patches, skipped := labelPlan(nl.Items)
		err = applyLabels(lctx, c.kc, patches)
		cancel()
		if err != nil {
			return nil, apiError(name, "labelling nodes", err)
		}
		var rows []api.GPUNodeLabel
		for node, labels := range patches {
			rows = append(rows, api.GPUNodeLabel{Context: name, Node: node, Label: labels[skypilotAccLabel]})
		}
		for node, why := range skipped {
			rows = append(rows, api.GPUNodeLabel{Context: name, Node: node, Skipped: why})
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].Node < rows[j].Node })
		for _, row := range rows {
			if row.Skipped != "" {
				fmt.Fprintf(r.Log, "%s/%s: not labelled: %s\n", name, row.Node, row.Skipped)
			} else {
				fmt.Fprintf(r.Log, "%s/%s: labelled %s=%s\n", name, row.Node, skypilotAccLabel, row.Label)
			}
		}
		if len(rows) == 0 {
			fmt.Fprintf(r.Log, "%s: no GPU nodes found.\n", name)
		}
		out = append(out, rows...)
	}
	in.mu.Lock()
	in.nodes = map[string]nodesSnapshot{} // the labels changed what the optimizer sees
	in.mu.Unlock()
	return out, nil
}
