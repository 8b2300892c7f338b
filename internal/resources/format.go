package resources

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ToMap is the canonical YAML/JSON form of r: only the fields that are
// set, each in one fixed spelling (infra instead of cloud/region/zone,
// accelerators instead of gpus, whole GB, merged port ranges, autostop and
// job_recovery as mappings). Parse(ToMap(r)) gives back r. It includes the
// internal _docker_login_config with its password: use it to store or send
// a task, and MarshalJSON to show one.
func (r *Resources) ToMap() map[string]any {
	m := map[string]any{}
	if r == nil {
		return m
	}
	if s := r.Infra.String(); s != "" {
		m["infra"] = s
	}
	if !r.Accelerators.IsZero() {
		m["accelerators"] = r.Accelerators.toValue()
	}
	if r.AcceleratorArgs != nil {
		m["accelerator_args"] = r.AcceleratorArgs.toValue()
	}
	if r.CPUs != nil {
		m["cpus"] = r.CPUs.String()
	}
	if r.Memory != nil {
		m["memory"] = r.Memory.String()
	}
	if r.InstanceType != "" {
		m["instance_type"] = r.InstanceType
	}
	if r.UseSpot != nil {
		m["use_spot"] = *r.UseSpot
	}
	if r.JobRecovery != nil {
		m["job_recovery"] = r.JobRecovery.toValue()
	}
	if r.DiskSize != 0 {
		m["disk_size"] = r.DiskSize
	}
	if r.EphemeralStorage != 0 {
		m["ephemeral_storage"] = r.EphemeralStorage
	}
	if r.DiskTier != "" {
		m["disk_tier"] = r.DiskTier
	}
	if r.NetworkTier != "" {
		m["network_tier"] = r.NetworkTier
	}
	if r.LocalDisk != nil {
		m["local_disk"] = r.LocalDisk.String()
	}
	if r.MaxHourlyCost != 0 {
		m["max_hourly_cost"] = r.MaxHourlyCost
	}
	if len(r.Ports) > 0 {
		ports := make([]any, len(r.Ports))
		for i, p := range r.Ports {
			ports[i] = p
		}
		m["ports"] = ports
	}
	if len(r.Labels) > 0 {
		labels := make(map[string]any, len(r.Labels))
		for k, v := range r.Labels {
			labels[k] = v
		}
		m["labels"] = labels
	}
	if r.ImageID != nil {
		m["image_id"] = r.ImageID.toValue()
	}
	if r.Autostop != nil {
		m["autostop"] = r.Autostop.toValue()
	}
	if r.Priority != nil {
		m["priority"] = *r.Priority
	}
	if r.PriorityClass != "" {
		m["priority_class"] = r.PriorityClass
	}
	if len(r.Volumes) > 0 {
		vols := make([]any, len(r.Volumes))
		for i, v := range r.Volumes {
			vols[i] = v.toValue()
		}
		m["volumes"] = vols
	}
	if len(r.AnyOf) > 0 {
		m["any_of"] = itemsToList(r.AnyOf)
	}
	if len(r.Ordered) > 0 {
		m["ordered"] = itemsToList(r.Ordered)
	}
	if d := r.DockerLoginConfig; d != nil {
		m["_docker_login_config"] = map[string]any{"username": d.Username, "password": d.Password, "server": d.Server}
	}
	if r.IsImageManaged {
		m["_is_image_managed"] = true
	}
	if r.RequiresFuse {
		m["_requires_fuse"] = true
	}
	if r.ClusterConfigOverrides != nil {
		m["_cluster_config_overrides"] = deepCopyValue(r.ClusterConfigOverrides)
	}
	if r.NoMissingAccelWarnings {
		m["_no_missing_accel_warnings"] = true
	}
	return m
}

func itemsToList(items []*Resources) []any {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it.ToMap()
	}
	return out
}

// redacted replaces secrets in displayed output.
const redacted = "REDACTED"

// MarshalJSON writes ToMap with the docker registry password redacted:
// this is the form for `-o json` and logs, which must never carry
// secrets.
func (r *Resources) MarshalJSON() ([]byte, error) {
	m := r.ToMap()
	if d, ok := m["_docker_login_config"].(map[string]any); ok && d["password"] != "" {
		d["password"] = redacted
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads any form Parse accepts.
func (r *Resources) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	parsed, err := Parse(v)
	if err != nil {
		return err
	}
	*r = *parsed
	return nil
}

// String is the one-line human form, shaped like SkyPilot's display:
//
//	<infra> (<detail>, <detail>, ...)
//
// <infra> is the canonical infra string, or "*" when any infra will do.
// The details, in this order and only when set: the instance type,
// gpus=<accelerators>, cpus=, mem=, spot, disk=<GB>, disk_tier=,
// network_tier=, local_disk=, ports=<a,b-c>, image=, max_cost=$<n>,
// priority=, priority_class=, autostop=<...>, job_recovery=<...>, labels=<k=v,...>.
// With nothing set it is just "*". Alternatives print as
// any_of[<candidate>; ...] or ordered[<candidate>; ...], each candidate
// merged over the base. Secrets (the docker login) are never shown.
func (r *Resources) String() string {
	if r == nil {
		return "<nil>"
	}
	if len(r.AnyOf) > 0 || len(r.Ordered) > 0 {
		cands, ordered := r.Candidates()
		parts := make([]string, len(cands))
		for i, c := range cands {
			parts[i] = c.String()
		}
		name := "any_of"
		if ordered {
			name = "ordered"
		}
		return name + "[" + strings.Join(parts, "; ") + "]"
	}
	where := r.Infra.String()
	if where == "" {
		where = "*"
	}
	var d []string
	add := func(cond bool, format string, args ...any) {
		if cond {
			d = append(d, fmt.Sprintf(format, args...))
		}
	}
	add(r.InstanceType != "", "%s", r.InstanceType)
	add(!r.Accelerators.IsZero(), "gpus=%s", r.Accelerators)
	if r.CPUs != nil {
		add(true, "cpus=%s", r.CPUs)
	}
	if r.Memory != nil {
		add(true, "mem=%s", r.Memory)
	}
	add(r.Spot(), "spot")
	add(r.DiskSize != 0, "disk=%d", r.DiskSize)
	add(r.DiskTier != "", "disk_tier=%s", r.DiskTier)
	add(r.NetworkTier != "", "network_tier=%s", r.NetworkTier)
	if r.LocalDisk != nil {
		add(true, "local_disk=%s", r.LocalDisk)
	}
	add(len(r.Ports) > 0, "ports=%s", strings.Join(r.Ports, ","))
	if r.ImageID != nil {
		add(true, "image=%s", r.ImageID)
	}
	add(r.MaxHourlyCost != 0, "max_cost=$%s", formatNumber(r.MaxHourlyCost))
	if r.Priority != nil {
		add(true, "priority=%d", *r.Priority)
	}
	add(r.PriorityClass != "", "priority_class=%s", r.PriorityClass)
	if r.Autostop != nil {
		add(true, "autostop=%s", r.Autostop)
	}
	if r.JobRecovery != nil {
		add(true, "job_recovery=%s", r.JobRecovery)
	}
	if len(r.Labels) > 0 {
		var kv []string
		for _, k := range sortedKeys(r.Labels) {
			kv = append(kv, k+"="+r.Labels[k])
		}
		add(true, "labels=%s", strings.Join(kv, ","))
	}
	if len(d) == 0 {
		return where
	}
	return where + " (" + strings.Join(d, ", ") + ")"
}
