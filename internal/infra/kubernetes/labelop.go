package kubernetes

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/op"
)

var _ infra.Operations = (*Infra)(nil)

// Ops implements infra.Operations: `sky gpus label`.
func (in *Infra) Ops() []op.Op {
	return []op.Op{{Name: "gpus_label", Schedule: op.Short, Body: api.GPUsLabelBody{}, Result: []api.GPUNodeLabel{}, Run: in.labelGPUs}}
}

// labelGPUs labels each GPU node of the context(s) with
// skypilot.co/accelerator, derived from the labels GPU operators already
// publish. SkyPilot's command runs a probe job with nvidia-smi on every
// node instead; without GPU hardware to probe, SkyGo labels what the
// nodes already say and names the nodes it cannot label, with what to do.
func (in *Infra) labelGPUs(ctx context.Context, r *op.Request) (any, error) {
	var b api.GPUsLabelBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
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
		nl, err := c.cs.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			return nil, apiError(name, "listing nodes", err)
		}
		patches, skipped := labelPlan(nl.Items)
		err = applyLabels(lctx, c.cs, patches)
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
