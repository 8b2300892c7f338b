package ssh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
)

// SSH node pools: `sky ssh up` probes every host of a pool, installs the
// node runtime and records what it found (settings key "ssh_pool/<name>");
// the optimizer's sshCapacity and `sky check ssh` read that record.

// sshProbeTimeout bounds probing one host (connect, auth, facts).
const sshProbeTimeout = 20 * time.Second

// PoolRecord is what the last `sky ssh up` learnt about one pool (the
// result of /ssh_up, hence an API type).
type PoolRecord = api.SSHPoolRecord

// HostRecord is one probed host of a PoolRecord.
type HostRecord = api.SSHHostRecord

func sshPoolKey(pool string) string { return "ssh_pool/" + pool }

func (in *Infra) poolRecord(ctx context.Context, pool string) *PoolRecord {
	raw, err := in.env.Settings.GetSetting(ctx, sshPoolKey(pool))
	if err != nil || raw == "" {
		return nil
	}
	var rec PoolRecord
	if json.Unmarshal([]byte(raw), &rec) != nil {
		return nil
	}
	return &rec
}

// selectPools narrows pools to the one named (when name is set).
func selectPools(pools map[string]*Pool, name string) (map[string]*Pool, error) {
	if name == "" {
		if len(pools) == 0 {
			return nil, &op.Error{Type: "ValueError", Message: "no SSH node pools to act on: define them in ~/.sky/ssh_node_pools.yaml (and in allowed_node_pools when that is set)"}
		}
		return pools, nil
	}
	name = PoolOf(infra.MustParseID("ssh/" + strings.TrimPrefix(name, "ssh/")))
	p, ok := pools[name]
	if !ok {
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("no SSH node pool %q (pools: %s); check ~/.sky/ssh_node_pools.yaml and allowed_node_pools",
			name, strings.Join(PoolNames(pools), ", "))}
	}
	return map[string]*Pool{name: p}, nil
}

// sshCapacity offers each allowed SSH node pool to the optimizer, free of
// charge. With a `sky ssh up` record it counts the hosts that fit; without
// one it offers the pool and lets the provisioner probe (a misfit then is
// a capacity error the failover loop understands).
type capacity struct{ in *Infra }

func (s capacity) Name() string { return Kind }

func (s capacity) Feasible(ctx context.Context, req optimizer.Request, numNodes int) ([]optimizer.Candidate, string) {
	pools, err := s.in.allowedPools()
	if err != nil {
		return nil, err.Error()
	}
	switch {
	case req.InstanceType != "":
		return nil, "SSH node pools have no instance types (asked for " + req.InstanceType + ")"
	case req.UseSpot:
		return nil, "SSH node pools have no spot instances"
	}
	names := PoolNames(pools)
	if req.Region != "" {
		want := strings.TrimPrefix(req.Region, sshRegionPrefix)
		if _, ok := pools[want]; !ok {
			return nil, fmt.Sprintf("no SSH node pool %q in ~/.sky/ssh_node_pools.yaml (or not in allowed_node_pools); pools: %s", want, strings.Join(names, ", "))
		}
		names = []string{want}
	}
	var cands []optimizer.Candidate
	var why []string
	for _, name := range names {
		c, reason := s.poolCandidate(ctx, pools[name], req, numNodes)
		if reason != "" {
			why = append(why, fmt.Sprintf("pool %s: %s", name, reason))
			continue
		}
		cands = append(cands, c)
	}
	return cands, strings.Join(why, "; ")
}

func (s capacity) poolCandidate(ctx context.Context, p *Pool, req optimizer.Request, numNodes int) (optimizer.Candidate, string) {
	if len(p.Hosts) == 0 {
		return optimizer.Candidate{}, "has no hosts"
	}
	if len(p.Hosts) < numNodes {
		return optimizer.Candidate{}, fmt.Sprintf("has %d host(s), %d node(s) asked for", len(p.Hosts), numNodes)
	}
	c := optimizer.Candidate{Cloud: Kind, Region: sshRegionPrefix + p.Name, AccName: req.AccName, AccCount: req.AccCount}
	if req.CPUs.IsSet() {
		c.VCPUs = req.CPUs.Value
	}
	if req.Memory.IsSet() && !req.Memory.PerCPU {
		c.MemoryGiB = req.Memory.Value
	}
	rec := s.in.poolRecord(ctx, p.Name)
	if rec == nil {
		return c, ""
	}
	fit := 0
	var misfits []string
	for _, h := range rec.Hosts {
		if why := hostMisfit(h, req); why != "" {
			misfits = append(misfits, h.Name+": "+why)
			continue
		}
		fit++
		if c.VCPUs == 0 || float64(h.CPUs) < c.VCPUs {
			c.VCPUs = float64(h.CPUs)
		}
	}
	if fit < numNodes {
		return optimizer.Candidate{}, fmt.Sprintf("%d of %d host(s) fit %d node(s) of the request (as of `sky ssh up` at %s): %s",
			fit, len(rec.Hosts), numNodes, rec.ProbedAt.Format(time.RFC3339), strings.Join(misfits, "; "))
	}
	return c, ""
}

// hostMisfit says why a recorded host cannot serve req ("" when it can).
func hostMisfit(h HostRecord, req optimizer.Request) string {
	switch {
	case !h.Ready():
		return h.Error
	case req.CPUs.IsSet() && req.CPUs.Value > float64(h.CPUs):
		return fmt.Sprintf("%g CPUs asked, host has %d", req.CPUs.Value, h.CPUs)
	case req.Memory.IsSet() && !req.Memory.PerCPU && req.Memory.Value > h.MemoryGB:
		return fmt.Sprintf("%g GB memory asked, host has %.1f GB", req.Memory.Value, h.MemoryGB)
	case req.AccName != "":
		have := 0
		for g, n := range h.GPUs {
			if strings.EqualFold(g, req.AccName) {
				have += n
			}
		}
		if float64(have) < req.AccCount {
			return fmt.Sprintf("%s:%g asked, host has %d", req.AccName, req.AccCount, have)
		}
	}
	return ""
}

// sshUp is `sky ssh up`: probe every host of the pool(s), install the
// node runtime, record the result and print a table of hosts. Hosts that
// cannot be used make the request fail, naming each host and its cause,
// after the record is written (the usable hosts stay usable).
func (in *Infra) up(ctx context.Context, r *op.Request, b api.SSHUpBody) ([]*api.SSHPoolRecord, error) {
	var pools map[string]*Pool
	var err error
	if b.PoolsYAML != "" {
		pools, err = ParsePools("--file", []byte(b.PoolsYAML))
	} else {
		pools, err = in.allowedPools()
	}
	if err != nil {
		return nil, &op.Error{Type: "ValueError", Message: err.Error()}
	}
	if pools, err = selectPools(pools, b.Infra); err != nil {
		return nil, err
	}
	res, err := NewResolver(in.env.Home)
	if err != nil {
		return nil, err
	}
	var recs []*PoolRecord
	var failed []string
	for _, name := range PoolNames(pools) {
		p := pools[name]
		fmt.Fprintf(r.Log, "Setting up SSH node pool %s (%d host(s))...\n", name, len(p.Hosts))
		rec := &PoolRecord{Pool: name, ProbedAt: time.Now().UTC(), Hosts: make([]HostRecord, len(p.Hosts))}
		var wg sync.WaitGroup
		for i, h := range p.Hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec.Hosts[i] = in.setUpHost(ctx, res, p, h)
			}()
		}
		wg.Wait()
		for _, h := range rec.Hosts {
			if !h.Ready() {
				failed = append(failed, fmt.Sprintf("pool %s, host %s: %s", name, h.Name, h.Error))
			}
		}
		raw, _ := json.Marshal(rec)
		if err := in.env.Settings.SetSetting(ctx, sshPoolKey(name), string(raw)); err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	writeHostTable(r.Log, recs)
	// A pool now set up is usable: refresh the enabled infras.
	if err := in.env.Recheck(ctx); err != nil {
		fmt.Fprintf(r.Log, "Warning: refreshing enabled infras: %v\n", err)
	}
	if len(failed) > 0 {
		return recs, &op.Error{Type: "SSHHostError", Message: fmt.Sprintf("%d host(s) cannot be used:\n  %s", len(failed), strings.Join(failed, "\n  "))}
	}
	fmt.Fprintf(r.Log, "SSH node pool(s) %s ready. Launch with `sky launch --infra ssh/<pool> ...`.\n", strings.Join(PoolNames(pools), ", "))
	return recs, nil
}

// setUpHost probes one host and installs the node runtime for its architecture on it.
func (in *Infra) setUpHost(ctx context.Context, res *Resolver, p *Pool, h Host) HostRecord {
	rec := HostRecord{Name: h.Name}
	ep, err := res.Resolve(p, h)
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.Address = ep.User + "@" + ep.HostPort()
	pctx, cancel := context.WithTimeout(ctx, sshProbeTimeout)
	defer cancel()
	d := in.Dialer()
	f, err := d.Probe(pctx, ep)
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.OS, rec.Arch, rec.CPUs, rec.MemoryGB, rec.GPUs = f.OS, f.Arch, f.CPUs, f.MemoryGB, f.GPUs
	if f.OS != "linux" {
		rec.Error = fmt.Sprintf("host runs %s; SkyGo's node runtime runs on Linux (leave the host out of the pool)", f.OS)
		return rec
	}
	copied, err := infra.EnsureBinary(ctx, NewRunner(d, ep, f.IP, "", f.Home), in.env.NodeBinaries())
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.Binary = "up to date"
	if copied {
		rec.Binary = "copied"
	}
	return rec
}

func writeHostTable(w io.Writer, recs []*PoolRecord) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tHOST\tADDRESS\tSTATUS\tOS/ARCH\tCPUS\tMEMORY\tGPUS\tSKY BINARY")
	for _, rec := range recs {
		for _, h := range rec.Hosts {
			status, osArch, cpus, mem, gpus := "ready", "-", "-", "-", "-"
			if !h.Ready() {
				status = "error"
			}
			if h.OS != "" {
				osArch = h.OS + "/" + h.Arch
				cpus = fmt.Sprint(h.CPUs)
				mem = fmt.Sprintf("%.1f GB", h.MemoryGB)
				gpus = gpuList(h.GPUs)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rec.Pool, h.Name, orDash(h.Address), status, osArch, cpus, mem, gpus, orDash(h.Binary))
		}
	}
	tw.Flush()
}

func gpuList(g map[string]int) string {
	if len(g) == 0 {
		return "-"
	}
	var parts []string
	for n, k := range g {
		parts = append(parts, fmt.Sprintf("%s:%d", n, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sshDown is `sky ssh down`: refuse while a cluster holds hosts of the
// pool, else remove from every host what `sky ssh up` installed.
func (in *Infra) down(ctx context.Context, r *op.Request, b api.SSHDownBody) ([]string, error) {
	all, err := in.LoadPools()
	if err != nil {
		return nil, &op.Error{Type: "ValueError", Message: err.Error()}
	}
	pools, err := selectPools(all, b.Infra)
	if err != nil {
		return nil, err
	}
	names := PoolNames(pools)
	// Which clusters hold hosts of these pools is in the claims.
	var busy []string
	err = readClaims(ctx, in.env.Settings, func(c *claims) {
		for name, cc := range c.Clusters {
			if pools[cc.Pool] != nil {
				busy = append(busy, fmt.Sprintf("%s (pool %s)", name, cc.Pool))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if len(busy) > 0 {
		sort.Strings(busy)
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("cannot tear down SSH node pool(s) %s: cluster(s) %s still hold hosts; run `sky down <cluster>` first",
			strings.Join(names, ", "), strings.Join(busy, ", "))}
	}
	res, err := NewResolver(in.env.Home)
	if err != nil {
		return nil, err
	}
	d := in.Dialer()
	// What up installed: the binary (and any half-copied upload) and the
	// runner's pgid directory; ~/.sky itself only if nothing else is in it.
	const script = `rm -rf ~/.sky/bin ~/.sky/run; rmdir ~/.sky/clusters ~/.sky/ssh 2>/dev/null; rmdir ~/.sky 2>/dev/null; true`
	var errs []error
	for _, name := range names {
		p := pools[name]
		fmt.Fprintf(r.Log, "Tearing down SSH node pool %s (%d host(s))...\n", name, len(p.Hosts))
		hostErrs := make([]error, len(p.Hosts))
		var wg sync.WaitGroup
		for i, h := range p.Hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hostErrs[i] = cleanHost(ctx, d, res, p, h, script)
			}()
		}
		wg.Wait()
		for i, err := range hostErrs {
			if err != nil {
				errs = append(errs, fmt.Errorf("pool %s, host %s: %w", name, p.Hosts[i].Name, err))
			} else {
				fmt.Fprintf(r.Log, "  %s: removed ~/.sky/bin\n", p.Hosts[i].Name)
			}
		}
		_ = in.env.Settings.DeleteSetting(ctx, sshPoolKey(name))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &op.Error{Type: "SSHHostError", Message: err.Error()}
	}
	fmt.Fprintf(r.Log, "SSH node pool(s) %s torn down.\n", strings.Join(names, ", "))
	return names, nil
}

func cleanHost(ctx context.Context, d *Dialer, res *Resolver, p *Pool, h Host, script string) error {
	ep, err := res.Resolve(p, h)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, sshProbeTimeout)
	defer cancel()
	_, err = provision.RunChecked(cctx, NewRunner(d, ep, "", "", ""), script, provision.RunOptions{})
	return err
}

// describeSSHPools replaces the SSH check result's details with each
// pool's hosts and their state as of the last `sky ssh up`.
func (in *Infra) DescribeCheck(ctx context.Context, r *check.Result) {
	pools, err := in.allowedPools()
	if err != nil {
		return
	}
	var details []string
	for _, name := range PoolNames(pools) {
		p := pools[name]
		rec := in.poolRecord(ctx, name)
		if rec == nil {
			details = append(details, fmt.Sprintf("pool %s: %d host(s), not set up yet; run `sky ssh up --infra %s`", name, len(p.Hosts), name))
			continue
		}
		ready := 0
		for _, h := range rec.Hosts {
			if h.Ready() {
				ready++
			}
		}
		details = append(details, fmt.Sprintf("pool %s: %d of %d host(s) ready (sky ssh up at %s)", name, ready, len(rec.Hosts), rec.ProbedAt.Local().Format("2006-01-02 15:04:05")))
		for _, h := range rec.Hosts {
			if !h.Ready() {
				details = append(details, fmt.Sprintf("  %s: error: %s", h.Name, h.Error))
				continue
			}
			details = append(details, fmt.Sprintf("  %s: ready, %s/%s, %d CPUs, %.1f GB, GPUs %s", h.Name, h.OS, h.Arch, h.CPUs, h.MemoryGB, gpuList(h.GPUs)))
		}
	}
	r.Details = details
}

// Capacity implements infra.Capacity: each allowed pool, free of charge.
func (in *Infra) Capacity() optimizer.CapacityInfra { return capacity{in} }

// Ops implements infra.Operations: `sky ssh up` and `sky ssh down`.
func (in *Infra) Ops() []op.Op {
	return []op.Op{
		op.Handle(apiop.SSHUp, in.up),
		op.Handle(apiop.SSHDown, in.down),
	}
}
