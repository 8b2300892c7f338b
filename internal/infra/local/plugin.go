package local

import (
	"context"
	"errors"
	"fmt"
	_ "github.com/skygo/skygo/internal/infra/local/kind" // what local is: the registry knows it wherever the plug-in is linked
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// Kind is the infra kind of this machine: `infra: local`.
const Kind = "local"

func init() { infra.Register(Kind, Open) }

// Infra is the local infrastructure of one server.
type Infra struct {
	env infra.Env
	// P is the provisioner of every local cluster.
	P *Provisioner
}

var (
	_ infra.Remnants       = (*Infra)(nil)
	_ infra.Capacity       = (*Infra)(nil)
	_ infra.Operations     = (*Infra)(nil)
	_ infra.CheckDescriber = (*Infra)(nil)
)

// DescribeCheck implements infra.CheckDescriber: whether nodes have ports
// and processes of their own, said on the local section's line, and
// warnings when a node's processes are in the machine's PID namespace or
// namespaced nodes cannot reach beyond this machine.
func (in *Infra) DescribeCheck(_ context.Context, r *check.Result) {
	n := in.P.network()
	if r.Reason == "" {
		r.Reason = n.Describe()
	} else {
		r.Reason += "; " + n.Describe()
	}
	// Whether a job's /proc shows only its node's processes, or the whole
	// machine's with the server's environment.
	r.Reason += "; " + proc.DescribePIDNS()
	if err := proc.PIDNamespaceAvailable(); err != nil {
		r.Warnings = append(r.Warnings, "jobs on this machine can read the environment of every process here, the API server's and other users' jobs' included: "+
			"nodes get no PID namespace of their own ("+err.Error()+")")
	}
	if n.PerNode() && n.Outbound == "" {
		r.Warnings = append(r.Warnings, "nodes reach only this machine and each other: install iptables for outbound access from their namespaces, or set "+EnvNetNS+"=0 in the API server's environment")
	}
}

// Open opens the local infrastructure under the server user's
// ~/.sky/skygo/local.
func Open(env infra.Env) (infra.Infra, error) {
	p, err := New(paths.LocalInfra(env.Home))
	if err != nil {
		return nil, err
	}
	return &Infra{env: env, P: p}, nil
}

// Remnants implements infra.Remnants.
func (in *Infra) Remnants() ([]string, error) { return in.P.Remnants() }

// Reap implements infra.Remnants.
func (in *Infra) Reap(ctx context.Context, cluster string) error { return in.P.Terminate(ctx, cluster) }

// Kind implements infra.Infra.
func (in *Infra) Kind() string { return Kind }

// Provisioner implements infra.Infra; this machine is one place.
func (in *Infra) Provisioner(id infra.ID) (provision.Provisioner, error) {
	if len(id.Parts) > 0 {
		return nil, &provision.ConfigError{Where: id.String(), Msg: "the local infrastructure has no regions or zones; use infra: local"}
	}
	return in.P, nil
}

// Capacity implements infra.Capacity: this machine, free of charge, with
// its CPUs and memory and no GPUs.
func (in *Infra) Capacity() optimizer.CapacityInfra { return capacity{in.P} }

type capacity struct{ p *Provisioner }

func (l capacity) Name() string { return Kind }

func (l capacity) Feasible(_ context.Context, req optimizer.Request, numNodes int) ([]optimizer.Candidate, string) {
	switch {
	case req.AccName != "":
		return nil, fmt.Sprintf("this machine has no %s accelerators", req.AccName)
	case req.InstanceType != "":
		return nil, "the local infrastructure has no instance types (asked for " + req.InstanceType + ")"
	case req.UseSpot:
		return nil, "the local infrastructure has no spot instances"
	case req.Region != "" || req.Zone != "":
		// This machine is in no cloud region: a region asked for without
		// a cloud must not quietly land here.
		return nil, "the local infrastructure has no regions or zones (asked for " + strings.Trim(req.Region+"/"+req.Zone, "/") + ")"
	case req.CPUs.IsSet() && req.CPUs.Value > l.p.CPUs:
		return nil, fmt.Sprintf("asked for %g CPUs per node; this machine has %g", req.CPUs.Value, l.p.CPUs)
	case req.Memory.IsSet() && !req.Memory.PerCPU && req.Memory.Value > l.p.MemoryGB:
		return nil, fmt.Sprintf("asked for %g GB of memory per node; this machine has %.0f GB", req.Memory.Value, l.p.MemoryGB)
	}
	cpus := float64(runtime.NumCPU())
	if req.CPUs.IsSet() {
		cpus = req.CPUs.Value
	}
	mem := l.p.MemoryGB
	if req.Memory.IsSet() && !req.Memory.PerCPU {
		mem = req.Memory.Value
	}
	return []optimizer.Candidate{{Cloud: Kind, VCPUs: cpus, MemoryGiB: mem}}, ""
}

// Ops implements infra.Operations: `sky local up` and `sky local down`.
func (in *Infra) Ops() []op.Op {
	return []op.Op{
		op.Handle(apiop.LocalUp, in.up),
		op.Handle(apiop.LocalDown, in.down),
	}
}

func (in *Infra) up(ctx context.Context, r *op.Request, _ op.NoBody) (map[string]bool, error) {
	if err := in.env.Settings.DeleteSetting(ctx, check.SettingLocalDisabled); err != nil {
		return nil, err
	}
	if err := in.env.Recheck(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintln(r.Log, "The local infrastructure is enabled. Launch on it with `sky launch --infra local ...`.")
	return map[string]bool{"enabled": true}, nil
}

// down is `sky local down`: every cluster with anything on this machine
// goes, recorded or not (env.Down reaps what no record holds), half torn
// down ones included. One that fails does not keep the others; the
// infrastructure stays enabled until all are gone, so that the failed
// ones can still be seen and taken down.
func (in *Infra) down(ctx context.Context, r *op.Request, _ op.NoBody) (map[string]bool, error) {
	names, err := in.P.Remnants()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, name := range names {
		if err := in.env.Down(ctx, name, r.Log); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", name, err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("the local infrastructure is still enabled: %w", errors.Join(errs...))
	}
	if err := in.env.Settings.SetSetting(ctx, check.SettingLocalDisabled, "1"); err != nil {
		return nil, err
	}
	if err := in.env.Recheck(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintln(r.Log, "The local infrastructure is disabled and its clusters are removed. Re-enable it with `sky local up`.")
	return map[string]bool{"enabled": false}, nil
}

// Clusters lists the clusters this machine holds, by name.
func (p *Provisioner) Clusters() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(p.root, "clusters"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if _, err := os.Stat(p.recordPath(e.Name())); err == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
