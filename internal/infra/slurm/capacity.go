package slurm

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
)

// Capacity implements infra.Capacity: each partition of each allowed
// cluster whose nodes fit the request, priced by slurm.pricing.
func (in *Infra) Capacity() optimizer.CapacityInfra { return capacity{in} }

type capacity struct{ in *Infra }

func (c capacity) Name() string { return Kind }

func (c capacity) Feasible(ctx context.Context, req optimizer.Request, numNodes int) ([]optimizer.Candidate, string) {
	switch {
	case req.InstanceType != "" && !isVirtualType(req.InstanceType):
		return nil, "Slurm has no instance types (asked for " + req.InstanceType + ")"
	case req.UseSpot:
		return nil, "Slurm has no spot instances"
	case len(req.Ports) > 0:
		return nil, "Slurm cannot open ports"
	}
	if req.Zone != "" && req.Region == "" {
		return nil, "Cannot specify partition (zone) without specifying cluster (region) for Slurm."
	}
	clusters, _, err := c.in.clusters()
	if err != nil {
		return nil, err.Error()
	}
	if req.Region != "" {
		found := false
		for _, cl := range clusters {
			found = found || cl == req.Region
		}
		if !found {
			return nil, fmt.Sprintf("no Slurm cluster %q in ~/.slurm/config (or not in slurm.allowed_clusters); clusters: %s", req.Region, strings.Join(clusters, ", "))
		}
		clusters = []string{req.Region}
	}
	cfg, err := c.in.serverConfig()
	if err != nil {
		return nil, err.Error()
	}
	r := Request{GPU: req.AccName, GPUCount: int(math.Ceil(req.AccCount))}
	if req.CPUs.IsSet() {
		r.CPUs = req.CPUs.Value
	}
	if req.Memory.IsSet() {
		r.MemoryGB = req.Memory.Value
		if req.Memory.PerCPU {
			r.MemoryGB = 0 // resolved from the CPUs below
		}
	}
	if req.InstanceType != "" {
		cpus, mem, gpu, n, err := ParseInstanceType(req.InstanceType)
		if err != nil {
			return nil, err.Error()
		}
		r = Request{CPUs: cpus, MemoryGB: mem, GPU: strings.ReplaceAll(gpu, "_", " "), GPUCount: n}
	}
	r = DefaultSizes(r)
	if req.Memory.IsSet() && req.Memory.PerCPU {
		r.MemoryGB = req.Memory.Value * r.CPUs
	}
	var cands []optimizer.Candidate
	var why []string
	for _, cl := range clusters {
		parts, nodes, _, err := c.in.inventoryOf(ctx, cl, false)
		if err != nil {
			why = append(why, fmt.Sprintf("cluster %s: %v", cl, err))
			continue
		}
		for _, p := range parts {
			if req.Zone != "" && p.Name != req.Zone {
				continue
			}
			if msg := p.Unavailable(cl); msg != "" {
				why = append(why, msg)
				continue
			}
			s, err := ResolveSettings(cfg, cl, p.Name, nil)
			if err != nil {
				why = append(why, fmt.Sprintf("cluster %s: %v", cl, err))
				break
			}
			fitting, _, reason := Fit(nodes, p.Name, r, s)
			if len(fitting) < max(numNodes, 1) {
				if reason == "" {
					reason = fmt.Sprintf("%d node(s) fit, %d needed", len(fitting), numNodes)
				}
				why = append(why, fmt.Sprintf("%s/%s: %s", cl, p.Name, reason))
				continue
			}
			cand := optimizer.Candidate{Cloud: Kind, Region: cl, Zone: p.Name, VCPUs: r.CPUs, MemoryGiB: r.MemoryGB,
				AccName: req.AccName, AccCount: req.AccCount, HourlyPrice: s.Pricing.Hourly(r.CPUs, r.MemoryGB, r.GPU, float64(r.GPUCount)),
				InstanceType: InstanceType(r.CPUs, r.MemoryGB, r.GPU, r.GPUCount)}
			cands = append(cands, cand)
		}
		if req.Zone != "" && !hasPartition(parts, req.Zone) {
			why = append(why, fmt.Sprintf("Slurm cluster %s has no partition %q", cl, req.Zone))
		}
	}
	return cands, strings.Join(why, "; ")
}

func hasPartition(parts []Partition, name string) bool {
	for _, p := range parts {
		if p.Name == name {
			return true
		}
	}
	return false
}

// isVirtualType reports whether s is one of Slurm's virtual instance types.
func isVirtualType(s string) bool {
	_, _, _, _, err := ParseInstanceType(s)
	return err == nil
}

// DescribeCheck implements infra.CheckDescriber: `sky check slurm`
// reaches every allowed cluster's login node, runs sinfo there and checks
// that the cluster's working directory is on a shared filesystem.
func (in *Infra) DescribeCheck(ctx context.Context, r *check.Result) {
	clusters, warns, err := in.clusters()
	if err != nil {
		r.Enabled, r.Reason = false, err.Error()
		return
	}
	r.Warnings = append(r.Warnings, warns...)
	var details []string
	reachable := 0
	for _, cl := range clusters {
		d, warn, err := in.checkCluster(ctx, cl)
		if err != nil {
			details = append(details, fmt.Sprintf("%s: disabled. %v", cl, err))
			continue
		}
		reachable++
		details = append(details, cl+": "+d)
		if warn != "" {
			r.Warnings = append(r.Warnings, cl+": "+warn)
		}
	}
	r.Details = details
	if reachable == 0 {
		r.Enabled = false
		r.Reason = "no Slurm cluster of ~/.slurm/config answered: " + strings.Join(details, "; ")
	}
}

// sharedFS are the filesystem types `stat -f` reports for shared storage.
var sharedFS = map[string]bool{"nfs": true, "nfs4": true, "lustre": true, "gpfs": true, "beegfs": true, "ceph": true,
	"fuse.ceph": true, "glusterfs": true, "fuse.glusterfs": true}

func (in *Infra) checkCluster(ctx context.Context, cluster string) (detail, warning string, err error) {
	login, err := in.login(cluster)
	if err != nil {
		return "", "", err
	}
	if _, err := loginCommand(ctx, login, "sinfo -h -o %P"); err != nil {
		return "", "", err
	}
	parts, nodes, _, err := in.inventoryOf(ctx, cluster, true)
	if err != nil {
		return "", "", err
	}
	gpus := map[string]int{}
	for _, n := range nodes {
		for _, g := range n.GRES {
			gpus[CanonicalGPU(g.Type)] += g.Count
		}
	}
	var names []string
	for _, p := range parts {
		names = append(names, p.Name)
	}
	var gl []string
	for _, g := range slices.Sorted(maps.Keys(gpus)) {
		gl = append(gl, fmt.Sprintf("%s x%d", g, gpus[g]))
	}
	detail = fmt.Sprintf("%d node(s), partitions %s", len(nodes), strings.Join(names, ", "))
	if len(gl) > 0 {
		detail += "; GPUs " + strings.Join(gl, ", ")
	}
	cfg, _ := in.serverConfig()
	s, err := ResolveSettings(cfg, cluster, "", nil)
	if err != nil {
		return detail, "", nil
	}
	dir := s.Workdir
	if dir == "" {
		dir = "$HOME"
	}
	fs, err := loginCommand(ctx, login, `stat -f -c %T "`+strings.ReplaceAll(dir, `"`, `\"`)+`"`)
	if err == nil {
		fs = strings.TrimSpace(fs)
		if !sharedFS[fs] {
			warning = fmt.Sprintf("the working directory %s is on a %s filesystem, not a shared one (nfs, lustre, gpfs, ...); multi-node clusters need it shared", dir, fs)
		}
	}
	return detail, warning, nil
}

// GPUs implements infra.GPULister: the GPUs of every allowed cluster's
// partitions and nodes, live (the node list and the GRES in use are read
// again on each call).
func (in *Infra) GPUs(ctx context.Context, region string) ([]infra.GPUUsage, error) {
	clusters, _, err := in.clusters()
	if err != nil {
		return nil, err
	}
	if region != "" {
		clusters = []string{region}
	}
	var out []infra.GPUUsage
	for _, cl := range clusters {
		_, nodes, _, err := in.inventoryOf(ctx, cl, true)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl, err)
		}
		login, err := in.login(cl)
		if err != nil {
			return nil, err
		}
		raw, err := loginCommand(ctx, login, "sinfo -h --Node -O "+provision.Quote(SinfoGresUsedFormat))
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl, err)
		}
		used, err := ParseGresUsed(raw)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl, err)
		}
		for _, a := range GPUAvailabilityByPartition(nodes, used) {
			out = append(out, infra.GPUUsage{Region: cl, Zone: a.Partition, GPU: a.Name, Total: a.Total, Free: a.Free, Requestable: a.Counts})
		}
		for _, n := range nodes {
			ok, _ := n.Usable()
			for _, t := range gpuTypesOf(n) {
				total, inUse := n.GPUs(t), 0
				for _, g := range used[n.Name] {
					if g.Type == t {
						inUse += g.Count
					}
				}
				free := max(total-inUse, 0)
				if !ok {
					free = 0
				}
				out = append(out, infra.GPUUsage{Region: cl, Node: n.Name, GPU: CanonicalGPU(t), Total: total, Free: free, Requestable: []int{total}})
			}
		}
	}
	return out, nil
}

var _ infra.GPULister = (*Infra)(nil)
