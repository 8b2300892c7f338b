package resources

import (
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
	"github.com/skygo/skygo/internal/infrakind"
)

// fieldKeys are the resources fields, in the order Parse reads them (so
// the first error reported does not depend on map order).
var fieldKeys = []string{
	"infra", "cloud", "region", "zone",
	"accelerators", "gpus", "accelerator_args",
	"cpus", "memory", "instance_type", "use_spot", "job_recovery",
	"disk_size", "ephemeral_storage", "disk_tier", "network_tier", "local_disk",
	"max_hourly_cost", "ports", "labels", "image_id", "autostop",
	"priority", "priority_class", "volumes", "any_of", "ordered",
}

// internalKeys are written by SkyGo (and SkyPilot) when they store a task;
// accepted on input, never suggested.
var internalKeys = []string{
	"_docker_login_config", "_is_image_managed", "_requires_fuse",
	"_cluster_config_overrides", "_no_missing_accel_warnings",
}

// misplacedKeys are keys users put under resources that live elsewhere;
// they get a message saying where to put them instead of a bare "unknown".
var misplacedKeys = map[string]string{
	"spot_recovery": `unknown field "spot_recovery" (it was renamed); did you mean "job_recovery"?`,
	"hooks":         "hooks are not a resources field: lifecycle hooks belong in the task's config.hooks (config: {hooks: [...]})",
	"num_nodes":     "num_nodes is a task field, not a resources field: put it at the top level of the task",
}

// PriorityMin and PriorityMax bound the priority field.
const (
	PriorityMin = -1000
	PriorityMax = 1000
)

// Parse validates v (a value decoded from YAML: map[string]any, []any,
// string, int, float64, bool or nil) and returns the Resources.
// Errors are *fielderr.Error with a path relative to resources.
// Nil or an empty mapping is the zero Resources (run anywhere, defaults).
func Parse(v any) (*Resources, error) {
	if v == nil {
		return &Resources{}, nil
	}
	m, ok := asMap(v)
	if !ok {
		return nil, fielderr.New("", fmt.Sprintf("resources must be a mapping (e.g. {accelerators: A100:1, cpus: 4+}), got %s; for alternatives use any_of: [...] or ordered: [...]", kindOf(v)))
	}
	r, err := parseMapping(m, "", false)
	if err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// parseMapping reads one resources mapping: the top level, or (item true)
// one any_of/ordered item, which may not nest alternatives.
func parseMapping(raw map[string]any, path string, item bool) (*Resources, error) {
	// Null values count as absent, like SkyPilot.
	m := make(map[string]any, len(raw))
	for k, v := range raw {
		if v != nil {
			m[k] = v
		}
	}
	if err := checkResourceKeys(m, path, item); err != nil {
		return nil, err
	}
	_, hasAnyOf := m["any_of"]
	_, hasOrdered := m["ordered"]
	if hasAnyOf && hasOrdered {
		return nil, fielderr.New(join(path, "ordered"), `Cannot specify both "any_of" and "ordered" in resources.`)
	}
	_, hasGPUs := m["gpus"]
	_, hasAccs := m["accelerators"]
	if hasGPUs && hasAccs {
		return nil, fielderr.New(join(path, "gpus"), "Cannot specify both gpus and accelerators in config. (gpus is an alias of accelerators; keep one)")
	}
	if _, hasInfra := m["infra"]; hasInfra {
		for _, k := range []string{"cloud", "region", "zone"} {
			if _, ok := m[k]; ok {
				return nil, fielderr.New(join(path, "infra"), fmt.Sprintf("Cannot specify both `infra` and `cloud`, `region`, or `zone` parameters (got infra and %s); write it all in infra, e.g. infra: aws/us-east-1", k))
			}
		}
	}

	r := &Resources{}
	for _, k := range append(append([]string(nil), fieldKeys...), internalKeys...) {
		v, ok := m[k]
		if !ok {
			continue
		}
		if err := r.setField(k, v, join(path, k)); err != nil {
			return nil, err
		}
	}
	if err := r.setLegacyInfra(m, path); err != nil {
		return nil, err
	}
	return r, nil
}

// checkResourceKeys rejects unknown keys with a "did you mean" hint.
func checkResourceKeys(m map[string]any, path string, item bool) error {
	for _, k := range sortedKeys(m) {
		if item && (k == "any_of" || k == "ordered") {
			return fielderr.New(join(path, k), "an any_of/ordered item may not itself contain any_of or ordered; flatten the alternatives into one list")
		}
		if contains(fieldKeys, k) || contains(internalKeys, k) {
			continue
		}
		if msg, ok := misplacedKeys[k]; ok {
			return fielderr.New(join(path, k), msg)
		}
		msg := fmt.Sprintf("unknown field %q in resources", k)
		if s := suggest(k, fieldKeys); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else {
			msg += "; valid fields: " + strings.Join(fieldKeys, ", ")
		}
		return fielderr.New(join(path, k), msg)
	}
	return nil
}

// setField parses one non-null field into r.
func (r *Resources) setField(key string, v any, path string) error {
	var err error
	switch key {
	case "infra":
		var s string
		if s, err = getString(v, path); err != nil {
			return err
		}
		if r.Infra, err = ParseInfra(s); err != nil {
			return fielderr.New(path, err.Error())
		}
	case "cloud", "region", "zone":
		// Collected by setLegacyInfra once all three are known.
		_, err = getString(v, path)
	case "accelerators", "gpus":
		r.Accelerators, err = parseAccelerators(v, path)
	case "accelerator_args":
		r.AcceleratorArgs, err = parseAcceleratorArgs(v, path)
	case "cpus":
		r.CPUs, err = parseCPUs(v, path)
	case "memory":
		r.Memory, err = parseMemory(v, path)
	case "instance_type":
		r.InstanceType, err = parseNonEmpty(v, path, "instance_type")
	case "use_spot":
		r.UseSpot, err = boolPtr(v, path)
	case "job_recovery":
		r.JobRecovery, err = parseJobRecovery(v, path)
	case "disk_size":
		r.DiskSize, err = parseSizeGB(v, path, "disk_size")
	case "ephemeral_storage":
		r.EphemeralStorage, err = parseSizeGB(v, path, "ephemeral_storage")
	case "disk_tier":
		r.DiskTier, err = parseDiskTier(v, path)
	case "network_tier":
		r.NetworkTier, err = parseNetworkTier(v, path)
	case "local_disk":
		r.LocalDisk, err = parseLocalDisk(v, path)
	case "max_hourly_cost":
		r.MaxHourlyCost, err = parseMaxCost(v, path)
	case "ports":
		r.Ports, err = parsePorts(v, path)
	case "labels":
		r.Labels, err = parseLabels(v, path)
	case "image_id":
		r.ImageID, err = parseImageID(v, path)
	case "autostop":
		r.Autostop, err = parseAutostop(v, path)
	case "priority":
		r.Priority, err = parsePriority(v, path)
	case "priority_class":
		var s string
		s, err = getString(v, path)
		r.PriorityClass = strings.TrimSpace(s)
	case "volumes":
		r.Volumes, err = parseVolumes(v, path)
	case "any_of":
		r.AnyOf, err = parseItems(v, path)
	case "ordered":
		r.Ordered, err = parseItems(v, path)
	case "_docker_login_config":
		r.DockerLoginConfig, err = parseDockerLogin(v, path)
	case "_is_image_managed":
		r.IsImageManaged, err = getBool(v, path)
	case "_requires_fuse":
		r.RequiresFuse, err = getBool(v, path)
	case "_no_missing_accel_warnings":
		r.NoMissingAccelWarnings, err = getBool(v, path)
	case "_cluster_config_overrides":
		m, ok := asMap(v)
		if !ok {
			return fielderr.New(path, fmt.Sprintf("expected a mapping, got %s", kindOf(v)))
		}
		if len(m) > 0 {
			r.ClusterConfigOverrides = deepCopyValue(m).(map[string]any)
		}
	}
	return err
}

// setLegacyInfra turns cloud/region/zone into Infra.
func (r *Resources) setLegacyInfra(m map[string]any, path string) error {
	cloud, _ := m["cloud"].(string)
	region, _ := m["region"].(string)
	zone, _ := m["zone"].(string)
	if cloud == "" && region == "" && zone == "" {
		return nil
	}
	inf, key, err := legacyInfra(cloud, region, zone)
	if err != nil {
		return fielderr.New(join(path, key), err.Error())
	}
	r.Infra = inf
	return nil
}

func parseItems(v any, path string) ([]*Resources, error) {
	l, ok := asList(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("expected a list of resource mappings, got %s", kindOf(v)))
	}
	if len(l) == 0 {
		return nil, nil
	}
	out := make([]*Resources, len(l))
	for i, item := range l {
		p := index(path, i)
		if item == nil {
			out[i] = &Resources{}
			continue
		}
		m, ok := asMap(item)
		if !ok {
			return nil, fielderr.New(p, fmt.Sprintf("expected a resources mapping (e.g. {infra: aws, accelerators: A100:1}), got %s", kindOf(item)))
		}
		r, err := parseMapping(m, p, true)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

func parseNonEmpty(v any, path, field string) (string, error) {
	s, err := getString(v, path)
	if err != nil {
		return "", err
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fielderr.New(path, field+" must not be empty")
	}
	return s, nil
}

func parseMaxCost(v any, path string) (float64, error) {
	f, ok := toFloat(v)
	if !ok || f <= 0 {
		return 0, fielderr.New(path, fmt.Sprintf("max_hourly_cost must be a number of dollars per hour greater than 0, got %v", v))
	}
	return f, nil
}

func parsePriority(v any, path string) (*int, error) {
	n, ok := toInt(v)
	if !ok || n < PriorityMin || n > PriorityMax {
		return nil, fielderr.New(path, fmt.Sprintf("priority must be an integer from %d to %d (higher runs first), got %v", PriorityMin, PriorityMax, v))
	}
	return &n, nil
}

func parseLabels(v any, path string) (map[string]string, error) {
	m, ok := asMap(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("labels must be a mapping of string keys to string values, got %s", kindOf(v)))
	}
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		s, ok := m[k].(string)
		if !ok {
			return nil, fielderr.New(join(path, k), fmt.Sprintf("label values must be strings, got %s (quote it: %s: \"%v\")", kindOf(m[k]), k, m[k]))
		}
		if k == "" {
			return nil, fielderr.New(path, "label keys must not be empty")
		}
		out[k] = s
	}
	return out, nil
}

// validate checks rules that span fields or alternatives.
func (r *Resources) validate() error {
	if len(r.AnyOf) > 0 {
		if r.Accelerators.Ordered {
			return fielderr.New("accelerators", "a list of accelerators (tried in order) cannot be combined with any_of; use a set {A100: 1, H100: 1} or give each accelerator its own any_of item")
		}
		for i, it := range r.AnyOf {
			if it.Accelerators.Ordered {
				return fielderr.New(index("any_of", i)+".accelerators", "a list of accelerators (tried in order) cannot be used inside any_of; use a set {A100: 1, H100: 1}")
			}
		}
	}
	if len(r.Ordered) > 0 {
		if len(r.Accelerators.List) > 1 {
			return fielderr.New("accelerators", `Cannot specify multiple "accelerators" with "ordered" in resources. Give each accelerator its own ordered item`)
		}
		for i, it := range r.Ordered {
			if len(it.Accelerators.List) > 1 {
				return fielderr.New(index("ordered", i)+".accelerators", `Cannot specify multiple "accelerators" with "ordered" in resources. Give each accelerator its own ordered item`)
			}
		}
	}

	// Per-alternative checks run on each item merged over the base; an
	// error points at the item when the item set the field.
	items, listName := r.AnyOf, "any_of"
	if len(r.Ordered) > 0 {
		items, listName = r.Ordered, "ordered"
	}
	if len(items) == 0 {
		return checkCandidate(r, r, "")
	}
	var first *Resources
	for i, it := range items {
		merged := mergeOver(r, it)
		p := index(listName, i)
		if err := checkCandidate(merged, it, p); err != nil {
			return err
		}
		if first == nil {
			first = merged
			continue
		}
		if !equalPtr(first.Priority, merged.Priority) {
			return fielderr.New(pick(it.Priority != nil, p, "priority"), "Priority is not consistent across resources; every alternative must have the same priority (set it once in the base resources)")
		}
		if !equalPtr(first.Autostop, merged.Autostop) {
			return fielderr.New(pick(it.Autostop != nil, p, "autostop"), "All resources must have the same autostop config. (set autostop once in the base resources)")
		}
	}
	return nil
}

// pick returns "<item path>.<field>" when the item set the field, else the
// base field.
func pick(itemSet bool, itemPath, field string) string {
	if itemSet {
		return join(itemPath, field)
	}
	return field
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// checkCandidate checks one alternative (merged) whose fields came from
// item (or the base); itemPath is "" for the base itself.
func checkCandidate(merged, item *Resources, itemPath string) error {
	fieldPath := func(set bool, field string) string {
		if itemPath == "" {
			return field
		}
		return pick(set, itemPath, field)
	}
	cloud := merged.Infra.Cloud
	for _, a := range merged.Accelerators.List {
		if !a.IsTPU() {
			continue
		}
		if k, _ := infrakind.Lookup(cloud); cloud != "" && !k.TPUs {
			return fielderr.New(fieldPath(!item.Infra.IsZero(), "infra"), fmt.Sprintf("TPU %s is only available on %s, but infra is %s", a.Name, kindsWith(func(k infrakind.Kind) bool { return k.TPUs }), merged.Infra))
		}
		if merged.InstanceType != "" && merged.InstanceType != "TPU-VM" && merged.AcceleratorArgs.IsTPUVM() {
			return fielderr.New(fieldPath(item.InstanceType != "", "instance_type"), fmt.Sprintf("a TPU VM (%s) cannot set instance_type %q; remove instance_type, or set accelerator_args.tpu_vm: false for a TPU node", a.Name, merged.InstanceType))
		}
	}
	if k, _ := infrakind.Lookup(cloud); merged.Memory != nil && merged.Memory.Value == 0 && !k.ZeroMemory {
		return fielderr.New(fieldPath(item.Memory != nil, "memory"), "memory must be greater than 0 (0 is only allowed on "+kindsWith(func(k infrakind.Kind) bool { return k.ZeroMemory })+")")
	}
	return nil
}

// kindsWith names the kinds that have what has says, for a message:
// "A or B".
func kindsWith(has func(infrakind.Kind) bool) string {
	var names []string
	for _, k := range infrakind.All() {
		if has(k) {
			names = append(names, k.Display)
		}
	}
	return strings.Join(names, " or ")
}
