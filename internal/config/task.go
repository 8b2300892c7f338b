package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
	"github.com/skygo/skygo/internal/infrakind"
)

// taskOverridable are the only config paths a task's `config:` may set:
// settings that can differ per cluster. Everything else (allowed_clouds,
// credentials, per-region sections, ...) is server or user policy. Each
// infrastructure names its own (infrakind.Kind.TaskKeys).
func taskOverridable() map[string][]string {
	m := map[string][]string{
		"docker":           {"run_options"},
		"nvidia_gpus":      {"disable_ecc"},
		"active_workspace": nil,
		"hooks":            nil, // task-only: lifecycle hooks
	}
	for _, k := range infrakind.All() {
		if len(k.TaskKeys) > 0 {
			m[k.Name] = k.TaskKeys
		}
	}
	return m
}

// TaskOverridableKeys lists every dotted path a task's config may set.
func TaskOverridableKeys() []string {
	var out []string
	for top, subs := range taskOverridable() {
		if subs == nil {
			out = append(out, top)
		}
		for _, s := range subs {
			out = append(out, top+"."+s)
		}
	}
	sort.Strings(out)
	return out
}

// ValidateTaskConfig checks a task's `config:` section (decoded YAML):
// only override-able keys are allowed, and their values must match the
// config schema. Errors are *fielderr.Error with a path relative to config.
func ValidateTaskConfig(v any) error {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fielderr.New("", fmt.Sprintf("must be a mapping of config keys, got %s", kindOf(v)))
	}
	allowedList := "allowed keys: " + strings.Join(TaskOverridableKeys(), ", ")
	keys := sortedKeys(m)
	overridable := taskOverridable()
	for _, k := range keys {
		subs, known := overridable[k]
		if !known {
			msg := fmt.Sprintf("%q cannot be set in a task's config (it is not overridable per task)", k)
			if s := suggest(k, sortedKeys(overridable)); s != "" && s != k {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			return fielderr.New(k, msg+"; "+allowedList)
		}
		if subs == nil {
			continue
		}
		sec, ok := m[k].(map[string]any)
		if !ok {
			if m[k] == nil {
				continue
			}
			return fielderr.New(k, fmt.Sprintf("must be a mapping, got %s", kindOf(m[k])))
		}
		for _, sk := range sortedKeys(sec) {
			if !slices.Contains(subs, sk) {
				msg := fmt.Sprintf("%q cannot be set in a task's config", k+"."+sk)
				if s := suggest(sk, subs); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", k+"."+s)
				}
				return fielderr.New(k+"."+sk, msg+"; "+allowedList)
			}
		}
	}

	rest := make(map[string]any, len(m))
	for k, val := range m {
		if k != "hooks" {
			rest[k] = val
		}
	}
	issue, err := schemaCheck(rest, false)
	if err != nil {
		return err
	}
	if issue != nil {
		return fielderr.New(dotted(issue.Path), issue.Msg)
	}
	if hooks, ok := m["hooks"]; ok {
		issue, err := schemaCheck(hooks, true)
		if err != nil {
			return err
		}
		if issue != nil {
			return fielderr.New(dotted(issue.Path), issue.Msg).Under("hooks")
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
