package task

import (
	"encoding/json"
	"strings"
)

func intPtr(v any) *int {
	if i, ok := v.(int); ok {
		return &i
	}
	return nil
}

func floatOr(v any, def float64) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	return def
}

// buildService applies the service: rules of spec/service.md that the
// schema cannot express (mutual exclusions, min/max relations, JSON
// post_data) and fills defaults.
func (b *builder) buildService(m map[string]any) *Service {
	s := &Service{
		Raw: m,
		ReadinessProbe: ReadinessProbe{
			Path:                               "/",
			InitialDelaySeconds:                defaultInitialDelaySeconds,
			TimeoutSeconds:                     defaultProbeTimeoutSeconds,
			EndpointProbeIntervalSeconds:       defaultProbeIntervalSeconds,
			ConsecutiveFailureThresholdTimeout: defaultServiceFailureThreshold,
		},
		StreamTimeoutSeconds: defaultStreamTimeoutSeconds,
	}
	probePath := "service.readiness_probe"
	switch rp := m["readiness_probe"].(type) {
	case string:
		s.ReadinessProbe.Path = rp
	case map[string]any:
		probePath += ".path"
		p := &s.ReadinessProbe
		p.Path, _ = rp["path"].(string)
		p.InitialDelaySeconds = floatOr(rp["initial_delay_seconds"], p.InitialDelaySeconds)
		p.TimeoutSeconds = floatOr(rp["timeout_seconds"], p.TimeoutSeconds)
		p.EndpointProbeIntervalSeconds = floatOr(rp["endpoint_probe_interval_seconds"], p.EndpointProbeIntervalSeconds)
		p.ConsecutiveFailureThresholdTimeout = floatOr(rp["consecutive_failure_threshold_timeout"], p.ConsecutiveFailureThresholdTimeout)
		p.PostData = rp["post_data"]
		if str, ok := p.PostData.(string); ok && !json.Valid([]byte(str)) {
			b.fail("service.readiness_probe.post_data", false, "Invalid JSON string for `post_data`; give a mapping or a valid JSON object string")
		}
		if h, ok := rp["headers"].(map[string]any); ok {
			p.Headers = map[string]string{}
			for k, v := range h {
				p.Headers[k], _ = v.(string)
			}
		}
	}
	if !strings.HasPrefix(s.ReadinessProbe.Path, "/") {
		b.fail(probePath, false, "readiness_path must start with a slash (/), got %q; for example /%s", s.ReadinessProbe.Path, s.ReadinessProbe.Path)
	}

	s.Replicas = intPtr(m["replicas"])
	s.Workers = intPtr(m["workers"])
	if s.Replicas != nil && s.Workers != nil {
		b.fail("service.workers", true, "Cannot specify both `replicas` and `workers`; workers is an alias of replicas")
	}
	if rp, ok := m["replica_policy"].(map[string]any); ok {
		if s.Replicas != nil || s.Workers != nil {
			b.fail("service.replica_policy", true, "Cannot specify both `replicas` and `replica_policy`; use replica_policy.min_replicas/max_replicas for autoscaling")
		}
		s.ReplicaPolicy = b.buildReplicaPolicy(rp)
	}
	if p, ok := m["ports"].(int); ok {
		s.Port = p
	}
	if lb, ok := m["load_balancing_policy"].(string); ok {
		s.LoadBalancingPolicy = strings.ToLower(lb)
	}
	if lb, ok := m["load_balancer"].(map[string]any); ok {
		s.StreamTimeoutSeconds = floatOr(lb["stream_timeout_seconds"], s.StreamTimeoutSeconds)
	}
	if tls, ok := m["tls"].(map[string]any); ok {
		s.TLS = &TLS{}
		s.TLS.Keyfile, _ = tls["keyfile"].(string)
		s.TLS.Certfile, _ = tls["certfile"].(string)
	}
	perAccel := s.ReplicaPolicy != nil && s.ReplicaPolicy.TargetQPSPerAccelerator != nil
	if perAccel && s.LoadBalancingPolicy != "instance_aware_least_load" {
		b.fail("service.replica_policy.target_qps_per_replica", false, "target_qps_per_replica as a mapping of accelerators requires load_balancing_policy: instance_aware_least_load")
	}
	if !perAccel && s.LoadBalancingPolicy == "instance_aware_least_load" {
		b.fail("service.load_balancing_policy", false, "load_balancing_policy instance_aware_least_load requires replica_policy.target_qps_per_replica to be a mapping of accelerator to QPS")
	}
	return s
}

func (b *builder) buildReplicaPolicy(m map[string]any) *ReplicaPolicy {
	const base = "service.replica_policy"
	rp := &ReplicaPolicy{
		UpscaleDelaySeconds:   defaultUpscaleDelaySeconds,
		DownscaleDelaySeconds: defaultDownscaleDelaySeconds,
	}
	rp.MinReplicas, _ = m["min_replicas"].(int)
	rp.MaxReplicas = rp.MinReplicas
	maxGiven := false
	if v, ok := m["max_replicas"].(int); ok {
		rp.MaxReplicas, maxGiven = v, true
	}
	switch q := m["target_qps_per_replica"].(type) {
	case int, float64:
		f := floatOr(q, 0)
		rp.TargetQPS = &f
	case map[string]any:
		rp.TargetQPSPerAccelerator = map[string]float64{}
		for k, v := range q {
			rp.TargetQPSPerAccelerator[k] = floatOr(v, 0)
		}
	}
	qpsSet := rp.TargetQPS != nil || rp.TargetQPSPerAccelerator != nil
	switch {
	case rp.MaxReplicas < rp.MinReplicas:
		b.fail(base+".max_replicas", false, "max_replicas must be greater than or equal to min_replicas (%d < %d)", rp.MaxReplicas, rp.MinReplicas)
	case qpsSet && !maxGiven:
		b.fail(base+".target_qps_per_replica", true, "max_replicas must be set where target_qps_per_replica is set.")
	case rp.MaxReplicas != rp.MinReplicas && !qpsSet:
		b.fail(base+".max_replicas", true, "Detected different min_replicas and max_replicas while target_qps_per_replica is not set. To enable autoscaling, please set target_qps_per_replica.")
	}
	if v, ok := m["num_overprovision"].(int); ok {
		rp.NumOverprovision = v
	}
	rp.UpscaleDelaySeconds = floatOr(m["upscale_delay_seconds"], rp.UpscaleDelaySeconds)
	rp.DownscaleDelaySeconds = floatOr(m["downscale_delay_seconds"], rp.DownscaleDelaySeconds)
	if v, ok := m["base_ondemand_fallback_replicas"].(int); ok {
		rp.BaseOndemandFallbackReplicas = v
	}
	rp.DynamicOndemandFallback, _ = m["dynamic_ondemand_fallback"].(bool)
	if sp, ok := m["spot_placer"].(string); ok {
		rp.SpotPlacer = strings.ToLower(sp)
	}
	return rp
}

// buildPool applies the pool: rules; resources is the task's resources
// mapping, because pools also restrict it (no ports, no ordered).
func (b *builder) buildPool(m map[string]any, res map[string]any) *Pool {
	p := &Pool{
		Raw:                   m,
		Workers:               intPtr(m["workers"]),
		MinWorkers:            intPtr(m["min_workers"]),
		MaxWorkers:            intPtr(m["max_workers"]),
		UpscaleDelaySeconds:   floatOr(m["upscale_delay_seconds"], defaultUpscaleDelaySeconds),
		DownscaleDelaySeconds: floatOr(m["downscale_delay_seconds"], defaultDownscaleDelaySeconds),
	}
	if q, ok := m["queue_length_threshold"].(int); ok {
		p.QueueLengthThreshold = q
		if p.MaxWorkers == nil {
			b.fail("pool.queue_length_threshold", true, "queue_length_threshold requires max_workers (it tunes queue-length autoscaling)")
		}
	} else if p.MaxWorkers != nil {
		p.QueueLengthThreshold = 1
	}
	if p.MinWorkers != nil && p.MaxWorkers == nil {
		b.fail("pool.min_workers", true, "min_workers requires max_workers")
	}
	if p.MinWorkers != nil && p.MaxWorkers != nil && *p.MinWorkers > *p.MaxWorkers {
		b.fail("pool.max_workers", false, "max_workers (%d) must be greater than or equal to min_workers (%d)", *p.MaxWorkers, *p.MinWorkers)
	}
	if p.Workers == nil && (p.MinWorkers == nil || p.MaxWorkers == nil) {
		b.fail("pool", true, "One of workers, or both min_workers and max_workers must be set for pool autoscaling.")
	}
	if _, ok := res["ports"]; ok {
		b.fail("resources.ports", true, "Cannot specify ports in a pool.")
	}
	if _, ok := res["ordered"]; ok {
		b.fail("resources.ordered", true, "pools do not support `ordered` resources; use any_of")
	}
	return p
}
