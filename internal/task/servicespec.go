package task

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/resources"
)

// ServiceSpecOf turns a loaded task's service: section into what `sky
// serve up` / `sky serve update` send, after the checks SkyPilot makes at
// that time (spec/service.md "Checks done at `sky serve up` time"): the
// loader accepts a service whose resources cannot serve it, since `sky
// launch` of the same YAML ignores the section. Errors name file:line
// where the YAML has the key.
func ServiceSpecOf(t *Task) (api.ServiceSpec, error) {
	src := t.source()
	if t.Service == nil {
		return api.ServiceSpec{}, src.errAt("", false, "Service section not found in the YAML file. To fix, add a valid `service` field.")
	}
	s := t.Service
	var errs ErrorList
	fail := func(path string, preferKey bool, format string, args ...any) {
		errs = append(errs, src.errAt(path, preferKey, format, args...))
	}
	cands := serviceCandidates(t.Resources)

	spot := 0
	for _, c := range cands {
		if c.res.UseSpot != nil && *c.res.UseSpot {
			spot++
		}
		if c.res.JobRecovery != nil {
			fail(c.path+".job_recovery", true, "job_recovery is disabled for SkyServe. SkyServe will replenish preempted spot replicas with its own recovery mechanism; remove job_recovery from resources.")
		}
	}
	if spot > 0 && spot < len(cands) {
		fail("resources", true, "Resources must either all use spot or none use spot. To use on-demand and spot instances together, use `dynamic_ondemand_fallback` or set `base_ondemand_fallback_replicas` in service.replica_policy.")
	}
	allSpot := spot > 0 && spot == len(cands)
	if rp := s.ReplicaPolicy; rp != nil && !allSpot {
		const base = "service.replica_policy"
		if rp.BaseOndemandFallbackReplicas > 0 {
			fail(base+".base_ondemand_fallback_replicas", true, "base_ondemand_fallback_replicas is only for spot services: set `use_spot: true` in resources (or --use-spot), or remove it.")
		}
		if rp.DynamicOndemandFallback {
			fail(base+".dynamic_ondemand_fallback", true, "dynamic_ondemand_fallback is only for spot services: set `use_spot: true` in resources (or --use-spot), or remove it.")
		}
		if rp.SpotPlacer != "" {
			fail(base+".spot_placer", true, "spot_placer %s places spot replicas: set `use_spot: true` in resources (or --use-spot), or remove it.", rp.SpotPlacer)
		}
	}

	port := s.Port
	if port == 0 {
		port = servicePortOf(cands, fail)
	}

	out := api.ServiceSpec{
		Probe: api.ProbeSpec{
			Path:                               s.ReadinessProbe.Path,
			InitialDelaySeconds:                s.ReadinessProbe.InitialDelaySeconds,
			TimeoutSeconds:                     s.ReadinessProbe.TimeoutSeconds,
			EndpointProbeIntervalSeconds:       s.ReadinessProbe.EndpointProbeIntervalSeconds,
			ConsecutiveFailureThresholdTimeout: s.ReadinessProbe.ConsecutiveFailureThresholdTimeout,
			Headers:                            s.ReadinessProbe.Headers,
		},
		Port:                 port,
		LoadBalancingPolicy:  s.LoadBalancingPolicy,
		StreamTimeoutSeconds: s.StreamTimeoutSeconds,
	}
	switch pd := s.ReadinessProbe.PostData.(type) {
	case nil:
	case string:
		out.Probe.PostData = pd
	default:
		// The mapping form: the probe body is its JSON.
		b, err := json.Marshal(pd)
		if err != nil {
			fail("service.readiness_probe.post_data", false, "post_data cannot be sent as JSON: %v", err)
		}
		out.Probe.PostData = string(b)
	}
	switch {
	case s.Replicas != nil:
		n := *s.Replicas
		out.Replicas = &n
	case s.Workers != nil:
		n := *s.Workers
		out.Replicas = &n
	}
	if rp := s.ReplicaPolicy; rp != nil {
		out.ReplicaPolicy = &api.ReplicaPolicySpec{
			MinReplicas: rp.MinReplicas, MaxReplicas: rp.MaxReplicas, TargetQPS: rp.TargetQPS,
			TargetQPSPerAccelerator: rp.TargetQPSPerAccelerator, NumOverprovision: rp.NumOverprovision,
			UpscaleDelaySeconds: rp.UpscaleDelaySeconds, DownscaleDelaySeconds: rp.DownscaleDelaySeconds,
			BaseOndemandFallbackReplicas: rp.BaseOndemandFallbackReplicas,
			DynamicOndemandFallback:      rp.DynamicOndemandFallback, SpotPlacer: rp.SpotPlacer,
		}
	}
	if tls := s.TLS; tls != nil {
		// The load balancer runs in the API server, started from another
		// directory: a path relative to where `sky serve up` ran would
		// name another file there.
		key, kerr := absFile(tls.Keyfile)
		cert, cerr := absFile(tls.Certfile)
		if kerr != nil {
			fail("service.tls.keyfile", false, "TLS keyfile %q: %v", tls.Keyfile, kerr)
		}
		if cerr != nil {
			fail("service.tls.certfile", false, "TLS certfile %q: %v", tls.Certfile, cerr)
		}
		out.TLS = &api.TLSSpec{Keyfile: key, Certfile: cert}
	}
	if err := errs.asError(); err != nil {
		return api.ServiceSpec{}, err
	}
	return out, nil
}

func absFile(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("the path is empty")
	}
	return filepath.Abs(expandHome(p))
}

// serviceCandidate is one resources alternative a replica may launch
// on, with the YAML path its own keys are under.
type serviceCandidate struct {
	res  *resources.Resources
	path string
}

// serviceCandidates are the alternatives of a task's resources as
// replicas would be placed on them: any_of or ordered items laid over
// the base (accelerator sets do not change spot or ports, so they are
// not expanded here).
func serviceCandidates(r *resources.Resources) []serviceCandidate {
	if r == nil {
		return []serviceCandidate{{res: &resources.Resources{}, path: "resources"}}
	}
	items, key := r.AnyOf, "any_of"
	if len(r.Ordered) > 0 {
		items, key = r.Ordered, "ordered"
	}
	if len(items) == 0 {
		return []serviceCandidate{{res: r, path: "resources"}}
	}
	out := make([]serviceCandidate, 0, len(items))
	// Each item is merged on its own, so that an error names the item
	// (Candidates would also expand accelerator sets inside it).
	for i, it := range items {
		one := r.Copy()
		one.AnyOf, one.Ordered = nil, nil
		if key == "any_of" {
			one.AnyOf = []*resources.Resources{it}
		} else {
			one.Ordered = []*resources.Resources{it}
		}
		cs, _ := one.Candidates()
		c := &resources.Resources{}
		if len(cs) > 0 {
			c = cs[0]
		}
		out = append(out, serviceCandidate{res: c, path: joinIndex("resources."+key, i)})
	}
	return out
}

// servicePortOf is the service port when service.ports is not given:
// the one port every candidate opens.
func servicePortOf(cands []serviceCandidate, fail func(string, bool, string, ...any)) int {
	port := 0
	for i, c := range cands {
		p, ok := singlePort(c.res.Ports)
		if !ok {
			got := "no ports"
			if len(c.res.Ports) > 0 {
				got = "ports " + strings.Join(c.res.Ports, ",")
			}
			fail(c.path+".ports", true, "Must only specify one port in resources (got %s). Each replica will use the port specified as application ingress port; or set service.ports to the port the service listens on.", got)
			return 0
		}
		if i > 0 && p != port {
			fail(c.path+".ports", true, "Resources must all open the same port: %d here, %d in %s; set service.ports to the port the service listens on.", p, port, cands[0].path)
			return 0
		}
		port = p
	}
	return port
}

// singlePort reads a resources.ports list that opens exactly one port
// ("8080", or a range of one: "8080-8080").
func singlePort(ports []string) (int, bool) {
	if len(ports) != 1 {
		return 0, false
	}
	lo, hi, isRange := strings.Cut(ports[0], "-")
	a, err := strconv.Atoi(strings.TrimSpace(lo))
	if err != nil {
		return 0, false
	}
	if isRange {
		b, err := strconv.Atoi(strings.TrimSpace(hi))
		if err != nil || b != a {
			return 0, false
		}
	}
	return a, true
}

// KindError says a YAML is not the kind the command takes (a pipeline
// given to serve up, a pool YAML without its pool: section...): the
// CLI reports it as a usage error, the server as a ValueError.
type KindError struct{ Msg string }

func (e *KindError) Error() string { return e.Msg }

func kindErrorf(format string, a ...any) error { return &KindError{Msg: fmt.Sprintf(format, a...)} }

// ServiceSubmission is what serve.up and serve.update send for a loaded
// service YAML: the task and its service: section. check is the caller's
// pre-launch check (the CLI looks at local paths, the server does not).
// name stands for the YAML in messages.
func ServiceSubmission(dag *DAG, name string, check func(*Task) error) (api.TaskSpec, api.ServiceSpec, error) {
	if len(dag.Tasks) != 1 {
		return api.TaskSpec{}, api.ServiceSpec{}, kindErrorf("a service YAML is one task with a service: section; %s has %d tasks", name, len(dag.Tasks))
	}
	t := dag.Tasks[0]
	if t.Service == nil && t.Pool != nil {
		return api.TaskSpec{}, api.ServiceSpec{}, kindErrorf("%s is a pool YAML (it has a pool: section, no service: section); apply it with `sky jobs pool apply`", name)
	}
	svc, err := ServiceSpecOf(t)
	if err != nil {
		return api.TaskSpec{}, api.ServiceSpec{}, err
	}
	if err := check(t); err != nil {
		return api.TaskSpec{}, api.ServiceSpec{}, err
	}
	if err := CheckRunnable(t); err != nil {
		return api.TaskSpec{}, api.ServiceSpec{}, err
	}
	spec, err := Spec(t)
	return spec, svc, err
}

// PoolSubmission is what jobs.pool_apply sends for a loaded pool YAML:
// the workers' task and the pool: section as the policy.
func PoolSubmission(dag *DAG, name string) (api.TaskSpec, api.PoolPolicy, error) {
	if len(dag.Tasks) != 1 {
		return api.TaskSpec{}, api.PoolPolicy{}, kindErrorf("a pool YAML is one task with a pool: section; %s has %d tasks", name, len(dag.Tasks))
	}
	t := dag.Tasks[0]
	if t.Pool == nil {
		return api.TaskSpec{}, api.PoolPolicy{}, kindErrorf("%s has no pool: section, so it is not a pool YAML; add one (e.g. pool: {workers: 2})", name)
	}
	spec, err := Spec(t)
	if err != nil {
		return api.TaskSpec{}, api.PoolPolicy{}, err
	}
	if len(spec.Resources.Ports) > 0 {
		return api.TaskSpec{}, api.PoolPolicy{}, kindErrorf("Cannot specify ports in a pool.")
	}
	p := t.Pool
	return spec, api.PoolPolicy{Workers: p.Workers, MinWorkers: p.MinWorkers, MaxWorkers: p.MaxWorkers,
		QueueLengthThreshold: p.QueueLengthThreshold, UpscaleDelaySeconds: p.UpscaleDelaySeconds,
		DownscaleDelaySeconds: p.DownscaleDelaySeconds}, nil
}
