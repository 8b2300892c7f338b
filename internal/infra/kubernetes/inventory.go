package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/optimizer"
)

// clusterNodes is what one context has: its nodes, the pods on them (for
// what is free), and the GPU label scheme they use.
type clusterNodes struct {
	nodes  []corev1.Node
	pods   []corev1.Pod
	scheme *gpuLabelScheme
	// podsHidden is set when the pods could not be listed (no RBAC for
	// pods in every namespace): free counts are then unknown.
	podsHidden bool
}

// inventory lists a context's nodes (and pods), cached for snapshotTTL
// unless fresh is set.
func (in *Infra) inventory(ctx context.Context, ctxName string, fresh bool) (*clusterNodes, []nodeFree, error) {
	in.mu.Lock()
	s, ok := in.nodes[ctxName]
	in.mu.Unlock()
	if ok && !fresh && time.Since(s.at) < snapshotTTL {
		return s.raw, s.nodes, s.err
	}
	raw, err := in.listInventory(ctx, ctxName)
	s = nodesSnapshot{at: time.Now(), raw: raw, err: err}
	if err == nil {
		s.nodes = nodesFree(raw.nodes, raw.pods, raw.scheme)
	}
	in.mu.Lock()
	in.nodes[ctxName] = s
	in.mu.Unlock()
	return s.raw, s.nodes, s.err
}

func (in *Infra) listInventory(ctx context.Context, ctxName string) (*clusterNodes, error) {
	c, err := in.client(ctxName)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	nl, err := c.kc.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiError(ctxName, "listing nodes", err)
	}
	cfg, _ := in.serverConfig()
	autoscaler := ""
	if cfg != nil {
		if v, ok := cfg.RegionValue("kubernetes", ctxName, "autoscaler"); ok {
			autoscaler, _ = v.(string)
		}
	}
	raw := &clusterNodes{nodes: nl.Items, scheme: detectScheme(nl.Items, autoscaler)}
	// Only running and pending pods hold resources.
	pl, err := c.kc.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
	switch {
	case err == nil:
		raw.pods = pl.Items
	case apierrors.IsForbidden(err):
		raw.podsHidden = true
	default:
		return nil, apiError(ctxName, "listing pods", err)
	}
	return raw, nil
}

// apiError names the context and the call, and tells an unreachable API
// server from refused credentials.
func apiError(ctxName, what string, err error) error {
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("context %s: %s: the API server refused the credentials (%v); refresh them (e.g. your provider's get-credentials command)", ctxName, what, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("context %s: %s: not allowed (%v); ask the cluster's admin for access", ctxName, what, err)
	}
	return fmt.Errorf("context %s: %s: %w", ctxName, what, err)
}

type capacitySource struct{ in *Infra }

func (c capacitySource) Name() string { return Kind }

// Feasible implements optimizer.CapacityInfra: one candidate per allowed
// context (or the one asked for) with a node big enough for one pod.
// Whether there is room for all of them now is the scheduler's answer,
// which a launch turns into a capacity error and a failover.
func (c capacitySource) Feasible(ctx context.Context, req optimizer.Request, numNodes int) ([]optimizer.Candidate, string) {
	switch {
	case req.Zone != "":
		return nil, "Kubernetes has no zones (the context is the region)"
	case req.DiskTier != "" && req.DiskTier != "best":
		return nil, "Kubernetes has no custom disk tier"
	case req.LocalDisk != "":
		return nil, "Kubernetes has no local disks"
	}
	cpuB, memB, acc, count := req.CPUs, req.Memory, req.AccName, int64(math.Ceil(req.AccCount))
	if req.InstanceType != "" {
		cpus, mem, a, n, err := parseInstanceType(req.InstanceType)
		if err != nil {
			return nil, "Kubernetes has no instance types (asked for " + req.InstanceType + ")"
		}
		cpuB, memB, acc, count = catalog.Bound{Value: cpus}, catalog.Bound{Value: mem}, a, n
	}
	cpus, mem := podSize(cpuB, memB, float64(count))
	kc := c.in.contexts()
	if kc.Reason != "" {
		return nil, kc.Reason
	}
	var names []string
	for _, k := range kc.Allowed {
		if req.Region == "" || req.Region == k.Name {
			names = append(names, k.Name)
		}
	}
	if len(names) == 0 {
		var all []string
		for _, k := range kc.Allowed {
			all = append(all, k.Name)
		}
		return nil, fmt.Sprintf("context %q is not one SkyGo may use (allowed: %s)", req.Region, strings.Join(all, ", "))
	}
	cfg, _ := c.in.serverConfig()
	var cands []optimizer.Candidate
	var why []string
	for _, name := range names {
		raw, nodes, err := c.in.inventory(ctx, name, false)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		if req.UseSpot && !hasSpotNodes(raw.nodes) {
			why = append(why, fmt.Sprintf("context %s has no spot nodes (label cloud.google.com/gke-spot=true)", name))
			continue
		}
		autoscaler := ""
		if cfg != nil {
			if v, ok := cfg.RegionValue("kubernetes", name, "autoscaler"); ok {
				autoscaler, _ = v.(string)
			}
			if v, ok := cfg.RegionValue("kubernetes", name, "allowed_nodes"); ok {
				allowed, err := parseAllowedNodes(v)
				if err != nil {
					why = append(why, "context "+name+": "+err.Error())
					continue
				}
				total := len(nodes)
				if nodes = allowedOnly(nodes, allowed); len(nodes) == 0 {
					why = append(why, "context "+name+": "+allowed.noneAdmitted(total).Error())
					continue
				}
			}
		}
		fitCPUs, fitMem, ok, reason := feasible(nodes, cpus, mem, acc, count, autoscaler)
		if !ok {
			why = append(why, "context "+name+": "+reason)
			continue
		}
		price, err := contextPricing(cfg, name)
		if err != nil {
			why = append(why, "context "+name+": "+err.Error())
			continue
		}
		cands = append(cands, optimizer.Candidate{Cloud: Kind, Region: name, VCPUs: fitCPUs, MemoryGiB: fitMem,
			AccName: req.AccName, AccCount: req.AccCount, UseSpot: req.UseSpot,
			InstanceType: instanceTypeName(fitCPUs, fitMem, acc, count),
			HourlyPrice:  price.Hourly(fitCPUs, fitMem, acc, float64(count))})
	}
	return cands, strings.Join(why, "; ")
}

// contextPricing is kubernetes.pricing for a context: the global rates,
// then the context's own (kubernetes.context_configs.<context>.pricing)
// merged over them. Without any, pods cost nothing.
func contextPricing(cfg *config.Config, context string) (infra.Pricing, error) {
	var p infra.Pricing
	for _, keys := range [][]string{{"kubernetes", "pricing"}, {"kubernetes", "context_configs", context, "pricing"}} {
		v, _ := cfg.Lookup(keys...)
		if err := p.Overlay(v); err != nil {
			return p, fmt.Errorf("%s: %w", strings.Join(keys, "."), err)
		}
	}
	return p, nil
}

// hasSpotNodes: SkyPilot offers spot on Kubernetes only where GKE spot
// nodes exist.
func hasSpotNodes(nodes []corev1.Node) bool {
	for _, n := range nodes {
		if n.Labels[spotLabelKey] == "true" {
			return true
		}
	}
	return false
}

const spotLabelKey = "cloud.google.com/gke-spot"

// GPUs implements infra.GPULister: every allowed context (or the one
// named), live from node labels, capacity and the pods bound to them.
func (in *Infra) GPUs(ctx context.Context, region string) ([]infra.GPUUsage, error) {
	kc := in.contexts()
	if kc.Reason != "" {
		return nil, errors.New(kc.Reason)
	}
	var out []infra.GPUUsage
	var errs []error
	found := false
	for _, k := range kc.Allowed {
		if region != "" && k.Name != region {
			continue
		}
		found = true
		_, nodes, err := in.inventory(ctx, k.Name, true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, gpuUsage(k.Name, nodes)...)
	}
	if !found {
		return nil, fmt.Errorf("context %q is not one SkyGo may use", region)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// DescribeCheck implements infra.CheckDescriber: each allowed context is
// really asked for its nodes; unreachable ones are reported and left out,
// and the GPUs found are listed.
func (in *Infra) DescribeCheck(ctx context.Context, r *check.Result) {
	if !r.Enabled {
		return
	}
	kc := in.contexts()
	var details []string
	reachable := 0
	for _, k := range kc.Allowed {
		_, nodes, err := in.inventory(ctx, k.Name, true)
		if err != nil {
			details = append(details, fmt.Sprintf("%s: unreachable: %v", k.Name, firstLine(err.Error())))
			continue
		}
		reachable++
		details = append(details, k.Name+": "+describeNodes(nodes))
	}
	r.Details = details
	if reachable == 0 {
		r.Enabled = false
		r.Reason = "no allowed Kubernetes context answered: " + strings.Join(details, "; ")
	}
}

// describeNodes is one context's line in `sky check -v`: its nodes and
// GPUs by type.
func describeNodes(nodes []nodeFree) string {
	gpus := map[string]int64{}
	for _, n := range nodes {
		if n.Acc != "" {
			gpus[n.Acc] += n.GPUs
		}
	}
	var names []string
	for g := range gpus {
		names = append(names, g)
	}
	sort.Strings(names)
	s := fmt.Sprintf("%d node(s)", len(nodes))
	if len(names) > 0 {
		var gl []string
		for _, g := range names {
			gl = append(gl, fmt.Sprintf("%s x%d", g, gpus[g]))
		}
		s += "; GPUs " + strings.Join(gl, ", ")
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
