package slurm

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
)

// Settings are the slurm config keys resolved for one cluster and
// partition: global `slurm.*` < `slurm.cluster_configs.<c>.*` <
// `...partition_configs.<p>.*` < the task's `config: slurm:`.
type Settings struct {
	Cluster, Partition string // what the settings were resolved for ("" partition = cluster level)

	// SbatchOptions is final: keys normalised (`_` -> `-`, `t` -> `time`),
	// protected keys dropped, true -> "" (a bare flag), false/null removed.
	SbatchOptions map[string]string
	// Warnings are shown to the user (protected keys dropped, ...).
	Warnings []string
	// GPUPartitionMap is GPU name -> partitions (a string or a list in YAML).
	GPUPartitionMap map[string][]string
	CPUPartition    []string
	Pricing         infra.Pricing // slurm.pricing
	// ProvisionTimeout is slurm.provision_timeout in seconds; nil = unset.
	ProvisionTimeout *int
	Workdir, Tmpdir  string
}

// protectedOptions are the sbatch options SkyGo writes itself; a user value
// would break the allocation (a second job name, another log file, ...).
// The one-letter forms are sbatch's short aliases of the same options.
var protectedOptions = map[string]string{
	"job-name": "job-name", "J": "job-name",
	"output": "output", "o": "output",
	"error": "error", "e": "error",
	"nodes": "nodes", "N": "nodes",
	"wait-all-nodes": "wait-all-nodes",
	"no-requeue":     "no-requeue",
	"cpus-per-task":  "cpus-per-task", "c": "cpus-per-task",
	"mem":       "mem",
	"gres":      "gres",
	"partition": "partition", "p": "partition",
}

// ResolveSettings reads cfg (the server user's merged config, already seen
// from the active workspace) and the task's `config:` mapping (may be nil;
// its "slurm" key is read) for one cluster and partition.
func ResolveSettings(cfg *config.Config, cluster, partition string, task map[string]any) (Settings, error) {
	s := Settings{Cluster: cluster, Partition: partition, SbatchOptions: map[string]string{}}
	where := "slurm/" + cluster
	if partition != "" {
		where += "/" + partition
	}
	bad := func(format string, args ...any) (Settings, error) {
		return Settings{}, &provision.ConfigError{Where: where, Msg: fmt.Sprintf(format, args...)}
	}

	clusterSec := mapAt(cfg, "slurm", "cluster_configs", cluster)
	partSec := map[string]any{}
	if partition != "" {
		partSec = mapAt(cfg, "slurm", "cluster_configs", cluster, "partition_configs", partition)
	}
	var taskSec map[string]any
	if task != nil {
		taskSec, _ = task["slurm"].(map[string]any)
	}

	// sbatch_options: later layers win key by key.
	layers := []struct {
		name string
		v    any
	}{
		{"slurm.sbatch_options", valueAt(cfg, "slurm", "sbatch_options")},
		{"slurm.cluster_configs." + cluster + ".sbatch_options", clusterSec["sbatch_options"]},
		{"slurm.cluster_configs." + cluster + ".partition_configs." + partition + ".sbatch_options", partSec["sbatch_options"]},
		{"task config slurm.sbatch_options", taskSec["sbatch_options"]},
	}
	merged := map[string]any{}
	for _, l := range layers {
		if l.v == nil {
			continue
		}
		m, ok := l.v.(map[string]any)
		if !ok {
			return bad("%s must be a mapping of option to value, got %s", l.name, kind(l.v))
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			nk := normaliseOption(k)
			if nk == "" {
				return bad("%s has an empty option name", l.name)
			}
			merged[nk] = m[k]
		}
	}
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		if canon, ok := protectedOptions[k]; ok {
			s.Warnings = append(s.Warnings, fmt.Sprintf("slurm sbatch_options: --%s is set by SkyGo and cannot be overridden; ignoring it.", canon))
			continue
		}
		v, keep, err := optionValue(merged[k])
		if err != nil {
			return bad("slurm sbatch_options.%s: %v", k, err)
		}
		if !keep {
			continue
		}
		if k == "time" && !ValidTime(v) {
			return bad("slurm sbatch_options.time %q is not a Slurm time: use minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes or days-hours:minutes:seconds", v)
		}
		s.SbatchOptions[k] = v
	}

	// Per-cluster values replace global ones (the config's per-region rule).
	gpm, err := gpuPartitionMap(cfg.RegionValue("slurm", cluster, "gpu_partition_map"))
	if err != nil {
		return bad("slurm gpu_partition_map: %v", err)
	}
	s.GPUPartitionMap = gpm

	cpuPart, _ := cfg.RegionValue("slurm", cluster, "cpu_partition")
	if v, ok := taskSec["cpu_partition"]; ok {
		cpuPart = v
	}
	if s.CPUPartition, err = stringList(cpuPart); err != nil {
		return bad("slurm cpu_partition: %v", err)
	}

	// pricing is deep-merged: cloud < cluster < partition.
	for _, p := range []any{valueAt(cfg, "slurm", "pricing"), clusterSec["pricing"], partSec["pricing"]} {
		if err := s.Pricing.Overlay(p); err != nil {
			return bad("slurm pricing: %v", err)
		}
	}

	if v, ok := cfg.Lookup("slurm", "provision_timeout"); ok && v != nil {
		n, ok := wholeNumber(v)
		if !ok {
			return bad("slurm.provision_timeout must be a whole number of seconds, got %v", v)
		}
		s.ProvisionTimeout = &n
	}
	if s.Workdir, err = optString(clusterSec["workdir"]); err != nil {
		return bad("slurm.cluster_configs.%s.workdir: %v", cluster, err)
	}
	if s.Tmpdir, err = optString(clusterSec["tmpdir"]); err != nil {
		return bad("slurm.cluster_configs.%s.tmpdir: %v", cluster, err)
	}
	return s, nil
}

// ProvisionWait is how long to wait for the allocation's nodes: the
// configured timeout, else 24 h when the user named the partition (there
// is nothing to fail over to) and 120 s otherwise. forever is true for a
// negative timeout.
func (s Settings) ProvisionWait(partitionRequested bool) (d time.Duration, forever bool) {
	if s.ProvisionTimeout != nil {
		if *s.ProvisionTimeout < 0 {
			return 0, true
		}
		return time.Duration(*s.ProvisionTimeout) * time.Second, false
	}
	if partitionRequested {
		return 24 * time.Hour, false
	}
	return 120 * time.Second, false
}

// GPUPartitions is gpu_partition_map's entry for a GPU name (matched
// ignoring case); ok is false when the map has none.
func (s Settings) GPUPartitions(gpu string) (parts []string, ok bool) {
	if p, ok := s.GPUPartitionMap[gpu]; ok {
		return p, true
	}
	for _, k := range slices.Sorted(maps.Keys(s.GPUPartitionMap)) {
		if strings.EqualFold(k, gpu) {
			return s.GPUPartitionMap[k], true
		}
	}
	return nil, false
}

// CheckPartitions warns about partitions named by cpu_partition or
// gpu_partition_map that the cluster does not have (nothing fits there).
func (s Settings) CheckPartitions(parts []Partition) []string {
	have := map[string]bool{}
	for _, p := range parts {
		have[p.Name] = true
	}
	var warn []string
	for _, p := range s.CPUPartition {
		if !have[p] {
			warn = append(warn, fmt.Sprintf("slurm cpu_partition %q is not a partition of Slurm cluster %q; CPU-only tasks cannot run there.", p, s.Cluster))
		}
	}
	for _, g := range slices.Sorted(maps.Keys(s.GPUPartitionMap)) {
		for _, p := range s.GPUPartitionMap[g] {
			if !have[p] {
				warn = append(warn, fmt.Sprintf("slurm gpu_partition_map[%s] names %q, which is not a partition of Slurm cluster %q.", g, p, s.Cluster))
			}
		}
	}
	return warn
}

// AllowedClusters filters the Host aliases of ~/.slurm/config by
// slurm.allowed_clusters (a list, or "all" / unset for every host). The
// list's order is kept, since it is the user's preference; names that are
// not hosts are warned about and ignored.
func AllowedClusters(cfg *config.Config, hosts []string) (kept []string, warnings []string) {
	v, ok := cfg.Lookup("slurm", "allowed_clusters")
	if !ok || v == nil {
		return append([]string(nil), hosts...), nil
	}
	if s, ok := v.(string); ok && s == "all" {
		return append([]string(nil), hosts...), nil
	}
	list, err := stringList(v)
	if err != nil {
		return nil, []string{fmt.Sprintf("slurm.allowed_clusters: %v; no Slurm cluster is allowed.", err)}
	}
	known := map[string]bool{}
	for _, h := range hosts {
		known[h] = true
	}
	seen := map[string]bool{}
	for _, c := range list {
		if seen[c] {
			continue
		}
		seen[c] = true
		if !known[c] {
			warnings = append(warnings, fmt.Sprintf("slurm.allowed_clusters: %q is not a Host in ~/.slurm/config; ignoring it.", c))
			continue
		}
		kept = append(kept, c)
	}
	return kept, warnings
}

// normaliseOption turns an sbatch_options key into sbatch's long option
// name: `_` -> `-`, leading dashes dropped, and `t` (sbatch's -t) is
// `time` so that both spellings merge into one value.
func normaliseOption(k string) string {
	k = strings.TrimLeft(strings.TrimSpace(k), "-")
	k = strings.ReplaceAll(k, "_", "-")
	if k == "t" {
		return "time"
	}
	return k
}

// optionValue renders one sbatch_options value. keep is false for
// false/null (the option is not written).
func optionValue(v any) (s string, keep bool, err error) {
	switch t := v.(type) {
	case nil:
		return "", false, nil
	case bool:
		return "", t, nil
	case string:
		if strings.ContainsAny(t, "\n\r") {
			return "", false, fmt.Errorf("value must not contain a newline")
		}
		return t, true, nil
	case int:
		return strconv.Itoa(t), true, nil
	case int64:
		return strconv.FormatInt(t, 10), true, nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), true, nil
	}
	return "", false, fmt.Errorf("value must be a string, number, bool or null, got %s", kind(v))
}

func gpuPartitionMap(v any, _ bool) (map[string][]string, error) {
	out := map[string][]string{}
	if v == nil {
		return out, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a mapping of GPU name to partition(s), got %s", kind(v))
	}
	for k, pv := range m {
		l, err := stringList(pv)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		out[k] = l
	}
	return out, nil
}

// stringList accepts a string (one item) or a list of strings.
func stringList(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		if t == "" {
			return nil, nil
		}
		return []string{t}, nil
	case []string:
		return append([]string(nil), t...), nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("list items must be strings, got %s", kind(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a string or a list of strings, got %s", kind(v))
}

func number(v any) (float64, bool) {
	switch t := v.(type) {
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case float64:
		return t, true
	}
	return 0, false
}

func wholeNumber(v any) (int, bool) {
	f, ok := number(v)
	if !ok || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

func optString(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	}
	return "", fmt.Errorf("must be a string, got %s", kind(v))
}

// valueAt is cfg.Lookup without the bool.
func valueAt(cfg *config.Config, keys ...string) any {
	v, _ := cfg.Lookup(keys...)
	return v
}

// mapAt is the mapping under keys, or an empty one.
func mapAt(cfg *config.Config, keys ...string) map[string]any {
	if m, ok := valueAt(cfg, keys...).(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case int, int64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
