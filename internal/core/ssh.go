package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// SSH node pools: `sky ssh up` probes every host of a pool, installs the
// sky binary and records what it found (settings key "ssh_pool/<name>");
// the optimizer's sshCapacity and `sky check ssh` read that record.

// sshProbeTimeout bounds probing one host (connect, auth, facts).
const sshProbeTimeout = 20 * time.Second

// SSHPoolRecord is what the last `sky ssh up` learnt about one pool.
type SSHPoolRecord struct {
	Pool     string          `json:"pool"`
	ProbedAt time.Time       `json:"probed_at"`
	Hosts    []SSHHostRecord `json:"hosts"`
}

// SSHHostRecord is one probed host. Error is set when the host could not
// be used (unreachable, auth refused, wrong OS/arch, install failed).
type SSHHostRecord struct {
	Name     string         `json:"name"`
	Address  string         `json:"address,omitempty"` // user@addr:port
	Error    string         `json:"error,omitempty"`
	OS       string         `json:"os,omitempty"`
	Arch     string         `json:"arch,omitempty"`
	CPUs     int            `json:"cpus,omitempty"`
	MemoryGB float64        `json:"memory_gb,omitempty"`
	GPUs     map[string]int `json:"gpus,omitempty"`
	// Binary is "copied" or "up to date" (the sky binary at ~/.sky/bin/sky).
	Binary string `json:"binary,omitempty"`
}

// Ready says whether the host can take clusters.
func (h SSHHostRecord) Ready() bool { return h.Error == "" }

func sshPoolKey(pool string) string { return "ssh_pool/" + pool }

func (e *Env) sshPoolRecord(ctx context.Context, pool string) *SSHPoolRecord {
	raw, err := e.Store.GetSetting(ctx, sshPoolKey(pool))
	if err != nil || raw == "" {
		return nil
	}
	var rec SSHPoolRecord
	if json.Unmarshal([]byte(raw), &rec) != nil {
		return nil
	}
	return &rec
}

// allowedSSHPools is the pools file filtered by ssh.allowed_node_pools.
func (e *Env) allowedSSHPools() (map[string]*ssh.Pool, error) {
	pools, err := e.Backend.LoadSSHPools()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return nil, err
	}
	kept, _ := ssh.FilterAllowed(pools, cfg.GetStringSlice("ssh.allowed_node_pools", nil))
	return kept, nil
}

// selectPools narrows pools to the one named (when name is set).
func selectPools(pools map[string]*ssh.Pool, name string) (map[string]*ssh.Pool, error) {
	if name == "" {
		if len(pools) == 0 {
			return nil, &op.Error{Type: "ValueError", Message: "no SSH node pools to act on: define them in ~/.sky/ssh_node_pools.yaml (and in ssh.allowed_node_pools when that is set)"}
		}
		return pools, nil
	}
	name = backend.SSHPoolOf("ssh/" + strings.TrimPrefix(name, "ssh/"))
	p, ok := pools[name]
	if !ok {
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("no SSH node pool %q (pools: %s); check ~/.sky/ssh_node_pools.yaml and ssh.allowed_node_pools",
			name, strings.Join(ssh.PoolNames(pools), ", "))}
	}
	return map[string]*ssh.Pool{name: p}, nil
}

// sshCapacity offers each allowed SSH node pool to the optimizer, free of
// charge. With a `sky ssh up` record it counts the hosts that fit; without
// one it offers the pool and lets the provisioner probe (a misfit then is
// a capacity error the failover loop understands).
type sshCapacity struct{ e *Env }

func (s sshCapacity) Name() string { return "ssh" }

func (s sshCapacity) Feasible(ctx context.Context, req optimizer.Request, numNodes int) ([]optimizer.Candidate, string) {
	pools, err := s.e.allowedSSHPools()
	if err != nil {
		return nil, err.Error()
	}
	switch {
	case req.InstanceType != "":
		return nil, "SSH node pools have no instance types (asked for " + req.InstanceType + ")"
	case req.UseSpot:
		return nil, "SSH node pools have no spot instances"
	}
	names := ssh.PoolNames(pools)
	if req.Region != "" {
		want := strings.TrimPrefix(req.Region, "ssh-")
		if _, ok := pools[want]; !ok {
			return nil, fmt.Sprintf("no SSH node pool %q in ~/.sky/ssh_node_pools.yaml (or not in ssh.allowed_node_pools); pools: %s", want, strings.Join(names, ", "))
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

func (s sshCapacity) poolCandidate(ctx context.Context, p *ssh.Pool, req optimizer.Request, numNodes int) (optimizer.Candidate, string) {
	if len(p.Hosts) == 0 {
		return optimizer.Candidate{}, "has no hosts"
	}
	if len(p.Hosts) < numNodes {
		return optimizer.Candidate{}, fmt.Sprintf("has %d host(s), %d node(s) asked for", len(p.Hosts), numNodes)
	}
	c := optimizer.Candidate{Cloud: "ssh", Region: "ssh-" + p.Name, AccName: req.AccName, AccCount: req.AccCount}
	if req.CPUs.IsSet() {
		c.VCPUs = req.CPUs.Value
	}
	if req.Memory.IsSet() && !req.Memory.PerCPU {
		c.MemoryGiB = req.Memory.Value
	}
	rec := s.e.sshPoolRecord(ctx, p.Name)
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
func hostMisfit(h SSHHostRecord, req optimizer.Request) string {
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
// sky binary, record the result and print a table of hosts. Hosts that
// cannot be used make the request fail, naming each host and its cause,
// after the record is written (the usable hosts stay usable).
func (e *Env) sshUp(ctx context.Context, r *op.Request) (any, error) {
	var b api.SSHUpBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	var pools map[string]*ssh.Pool
	var err error
	if b.PoolsYAML != "" {
		pools, err = ssh.ParsePools("--file", []byte(b.PoolsYAML))
	} else {
		pools, err = e.allowedSSHPools()
	}
	if err != nil {
		return nil, &op.Error{Type: "ValueError", Message: err.Error()}
	}
	if pools, err = selectPools(pools, b.Infra); err != nil {
		return nil, err
	}
	res, err := ssh.NewResolver(e.Home)
	if err != nil {
		return nil, err
	}
	var recs []*SSHPoolRecord
	var failed []string
	for _, name := range ssh.PoolNames(pools) {
		p := pools[name]
		fmt.Fprintf(r.Log, "Setting up SSH node pool %s (%d host(s))...\n", name, len(p.Hosts))
		rec := &SSHPoolRecord{Pool: name, ProbedAt: time.Now().UTC(), Hosts: make([]SSHHostRecord, len(p.Hosts))}
		var wg sync.WaitGroup
		for i, h := range p.Hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec.Hosts[i] = e.setUpHost(ctx, res, p, h)
			}()
		}
		wg.Wait()
		for _, h := range rec.Hosts {
			if !h.Ready() {
				failed = append(failed, fmt.Sprintf("pool %s, host %s: %s", name, h.Name, h.Error))
			}
		}
		raw, _ := json.Marshal(rec)
		if err := e.Store.SetSetting(ctx, sshPoolKey(name), string(raw)); err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	writeHostTable(r.Log, recs)
	// A pool now set up is usable: refresh the enabled infras.
	if _, err := e.runCheck(ctx, nil, false); err != nil {
		fmt.Fprintf(r.Log, "Warning: refreshing enabled infras: %v\n", err)
	}
	if len(failed) > 0 {
		return recs, &op.Error{Type: "SSHHostError", Message: fmt.Sprintf("%d host(s) cannot be used:\n  %s", len(failed), strings.Join(failed, "\n  "))}
	}
	fmt.Fprintf(r.Log, "SSH node pool(s) %s ready. Launch with `sky launch --infra ssh/<pool> ...`.\n", strings.Join(ssh.PoolNames(pools), ", "))
	return recs, nil
}

// setUpHost probes one host and installs the sky binary on it.
func (e *Env) setUpHost(ctx context.Context, res *ssh.Resolver, p *ssh.Pool, h ssh.Host) SSHHostRecord {
	rec := SSHHostRecord{Name: h.Name}
	ep, err := res.Resolve(p, h)
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.Address = ep.User + "@" + ep.HostPort()
	pctx, cancel := context.WithTimeout(ctx, sshProbeTimeout)
	defer cancel()
	d := e.Backend.SSHDialer()
	f, err := d.Probe(pctx, ep)
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.OS, rec.Arch, rec.CPUs, rec.MemoryGB, rec.GPUs = f.OS, f.Arch, f.CPUs, f.MemoryGB, f.GPUs
	if f.OS != runtime.GOOS || f.Arch != runtime.GOARCH {
		rec.Error = fmt.Sprintf("host is %s/%s; this sky binary runs on %s/%s (run the API server on a %s/%s machine, or leave the host out of the pool)",
			f.OS, f.Arch, runtime.GOOS, runtime.GOARCH, f.OS, f.Arch)
		return rec
	}
	copied, err := ssh.EnsureBinary(ctx, ssh.NewRunner(d, ep, f.IP, "", f.Home), e.Backend.Sky)
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

func writeHostTable(w io.Writer, recs []*SSHPoolRecord) {
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
func (e *Env) sshDown(ctx context.Context, r *op.Request) (any, error) {
	var b api.SSHDownBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	all, err := e.Backend.LoadSSHPools()
	if err != nil {
		return nil, &op.Error{Type: "ValueError", Message: err.Error()}
	}
	pools, err := selectPools(all, b.Infra)
	if err != nil {
		return nil, err
	}
	cs, err := e.Store.ListClusters(ctx, state.ClusterFilter{})
	if err != nil {
		return nil, err
	}
	names := ssh.PoolNames(pools)
	var busy []string
	for _, c := range cs {
		h, err := backend.HandleOf(c)
		if err != nil {
			continue
		}
		if p := backend.SSHPoolOf(h.Infra); p != "" && pools[p] != nil {
			busy = append(busy, fmt.Sprintf("%s (pool %s)", c.Name, p))
		}
	}
	if len(busy) > 0 {
		sort.Strings(busy)
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("cannot tear down SSH node pool(s) %s: cluster(s) %s still hold hosts; run `sky down <cluster>` first",
			strings.Join(names, ", "), strings.Join(busy, ", "))}
	}
	res, err := ssh.NewResolver(e.Home)
	if err != nil {
		return nil, err
	}
	d := e.Backend.SSHDialer()
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
				fmt.Fprintf(r.Log, "  %s: removed ~/.sky/bin/sky\n", p.Hosts[i].Name)
			}
		}
		_ = e.Store.DeleteSetting(ctx, sshPoolKey(name))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &op.Error{Type: "SSHHostError", Message: err.Error()}
	}
	fmt.Fprintf(r.Log, "SSH node pool(s) %s torn down.\n", strings.Join(names, ", "))
	return names, nil
}

func cleanHost(ctx context.Context, d *ssh.Dialer, res *ssh.Resolver, p *ssh.Pool, h ssh.Host, script string) error {
	ep, err := res.Resolve(p, h)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, sshProbeTimeout)
	defer cancel()
	out, err := ssh.NewRunner(d, ep, "", "", "").Run(cctx, script, provision.RunOptions{})
	if err != nil {
		return err
	}
	if out.ExitCode != 0 {
		return fmt.Errorf("exit %d: %s", out.ExitCode, strings.TrimSpace(string(out.Stderr)))
	}
	return nil
}

// describeSSHPools replaces the SSH check result's details with each
// pool's hosts and their state as of the last `sky ssh up`.
func (e *Env) describeSSHPools(ctx context.Context, r *check.Result) {
	pools, err := e.allowedSSHPools()
	if err != nil {
		return
	}
	var details []string
	for _, name := range ssh.PoolNames(pools) {
		p := pools[name]
		rec := e.sshPoolRecord(ctx, name)
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
