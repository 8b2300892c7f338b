// Package config is SkyPilot's layered configuration: the user file
// (~/.sky/config.yaml), the project file (.sky.yaml), `--config` overrides
// and a task's `config:` section, deep-merged in that order and validated
// against the config schema (schema.json), with errors that point at
// file:line:column.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infrakind"
)

// Environment variables that choose config files (names as in SkyPilot).
const (
	EnvGlobalConfig  = "SKYPILOT_GLOBAL_CONFIG"  // user/server file instead of ~/.sky/config.yaml; must exist
	EnvProjectConfig = "SKYPILOT_PROJECT_CONFIG" // project file instead of ./.sky.yaml; must exist
	EnvConfig        = "SKYPILOT_CONFIG"         // internal: this file alone replaces user+project files
	EnvDBURI         = "SKYPILOT_DB_CONNECTION_URI"
	EnvCatalogDir    = "SKYPILOT_CATALOG_DIR"
)

// Config is a merged, validated configuration. The zero value and a nil
// *Config are both usable and empty.
type Config struct {
	m       map[string]any
	sources []string
	// unchecked are the sources read without the schema check (in a
	// binary that does not link it: the CLI), for the server to check.
	unchecked []api.ConfigSource
}

// New wraps an already-merged map (deep-copied). It does not validate.
func New(m map[string]any) *Config {
	if m == nil {
		return &Config{m: map[string]any{}}
	}
	return &Config{m: deepCopy(m).(map[string]any)}
}

// LoadOptions says where to look. Empty Home/Cwd mean the user's home and
// the process's working directory.
type LoadOptions struct {
	Home       string
	Cwd        string
	TaskConfig map[string]any // the task's `config:` section, laid on top of everything
	CLI        []string       // --config values: one FILE, or any number of key.path=value
	// Client marks the CLI's own load, whose result is sent with each
	// request: workspaces: is the server's to define, so whether
	// active_workspace names one is checked there (CheckWorkspace).
	Client bool
}

// Load reads every source, validates each one separately and merges them:
// user file, then project file, then --config, then the task's config.
func Load(opts LoadOptions) (*Config, error) {
	home, cwd := opts.Home, opts.Cwd
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("finding the home directory for ~/.sky/config.yaml: %w", err)
		}
		home = h
	}
	if cwd == "" {
		c, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("finding the current directory for .sky.yaml: %w", err)
		}
		cwd = c
	}
	cfg := &Config{m: map[string]any{}}
	layer := func(m map[string]any, source string) {
		cfg.m = Overlay(cfg.m, m)
		cfg.sources = append(cfg.sources, source)
	}
	// text is a file source's bytes; nil for a key=value, whose mapping
	// is what gets checked.
	unchecked := func(m map[string]any, source string, text []byte) {
		if schemaValidator.Load() != nil {
			return
		}
		if text != nil {
			cfg.unchecked = append(cfg.unchecked, api.ConfigSource{Name: source, YAML: string(text)})
		} else {
			cfg.unchecked = append(cfg.unchecked, api.ConfigSource{Name: source, Value: m})
		}
	}

	if only := os.Getenv(EnvConfig); only != "" {
		m, text, err := loadFile(only, true, EnvConfig)
		if err != nil {
			return nil, err
		}
		layer(m, only)
		unchecked(m, only, text)
	} else {
		for _, f := range []struct{ env, def string }{
			{EnvGlobalConfig, filepath.Join(home, ".sky", "config.yaml")},
			{EnvProjectConfig, filepath.Join(cwd, ".sky.yaml")},
		} {
			path, required := f.def, false
			if v := os.Getenv(f.env); v != "" {
				path, required = v, true
			}
			m, text, err := loadFile(path, required, f.env)
			if err != nil {
				return nil, err
			}
			if m != nil {
				layer(m, path)
				unchecked(m, path, text)
			}
		}
	}

	cli, err := parseCLIList(opts.CLI, cwd)
	if err != nil {
		return nil, err
	}
	for _, o := range cli {
		layer(o.m, o.source)
		unchecked(o.m, o.source, o.text)
	}

	if opts.TaskConfig != nil {
		if err := ValidateTaskConfig(opts.TaskConfig); err != nil {
			return nil, fmt.Errorf("task config: %w", err)
		}
		layer(opts.TaskConfig, "task config")
	}

	if opts.Client {
		return cfg, nil
	}
	if err := cfg.checkMerged(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// CheckWorkspace checks that active_workspace names a defined workspace
// (or default): the check a server makes once a request's client config
// is laid over its own.
func (c *Config) CheckWorkspace() error { return c.checkMerged() }

// loadFile reads and validates one config file, and returns its text too.
// A missing optional file returns nils; a missing required one names the
// variable that chose it.
func loadFile(path string, required bool, env string) (map[string]any, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if required {
				return nil, nil, fmt.Errorf("config file %s (from $%s) does not exist; create it or unset %s", path, env, env)
			}
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading config file %s: %w", path, err)
	}
	m, err := parseSource(data, path)
	return m, data, err
}

// Unchecked are the sources Load read without the schema check, because
// this binary does not link it (the CLI): the API server checks them
// (CheckSources) before the config is used.
func (c *Config) Unchecked() []api.ConfigSource {
	if c == nil {
		return nil
	}
	return c.unchecked
}

// CheckSources checks config sources as Load checks each one it reads,
// in order, and returns the first error, worded as Load would word it.
func CheckSources(srcs []api.ConfigSource) error {
	for _, s := range srcs {
		if s.Value != nil {
			if err := validateDoc(&doc{value: s.Value}, s.Name); err != nil {
				return err
			}
			continue
		}
		if _, err := parseSource([]byte(s.YAML), s.Name); err != nil {
			return err
		}
	}
	return nil
}

// parseSource parses and validates one YAML source (a file's bytes).
func parseSource(data []byte, source string) (map[string]any, error) {
	d, err := parseYAML(data)
	if err != nil {
		return nil, syntaxError(err, source)
	}
	if err := validateDoc(d, source); err != nil {
		return nil, err
	}
	return d.value.(map[string]any), nil
}

// checkMerged applies the rules that only make sense on the merged result.
func (c *Config) checkMerged() error {
	ws := c.ActiveWorkspace()
	if ws == "default" {
		return nil
	}
	if _, ok := c.Lookup("workspaces", ws); !ok {
		return &ValidationError{
			Source: strings.Join(c.sources, " + "),
			Path:   "active_workspace",
			Msg:    fmt.Sprintf("Workspace %s does not exist; define it under workspaces: or use one of: %s", ws, strings.Join(c.WorkspaceNames(), ", ")),
		}
	}
	return nil
}

// Sources lists the sources merged into c, lowest precedence first.
func (c *Config) Sources() []string {
	if c == nil {
		return nil
	}
	return append([]string(nil), c.sources...)
}

// Map returns a deep copy of the merged config.
func (c *Config) Map() map[string]any {
	if c == nil || c.m == nil {
		return map[string]any{}
	}
	return deepCopy(c.m).(map[string]any)
}

// Get returns the value at a dotted path such as "jobs.controller.resources".
// Use Lookup when a key itself contains a dot (e.g. a context name).
func (c *Config) Get(path string) (any, bool) {
	if path == "" {
		return nil, false
	}
	return c.Lookup(strings.Split(path, ".")...)
}

// Lookup returns the value under the given keys, one key per level.
func (c *Config) Lookup(keys ...string) (any, bool) {
	if c == nil {
		return nil, false
	}
	var cur any = c.m
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// GetString returns the string at path, or def when absent or not a string.
func (c *Config) GetString(path, def string) string {
	if v, ok := c.Get(path); ok {
		if s, ok := v.(string); ok {
			return s
		}
	}
	return def
}

// GetBool returns the bool at path, or def when absent or not a bool.
func (c *Config) GetBool(path string, def bool) bool {
	if v, ok := c.Get(path); ok {
		if b, ok := v.(bool); ok {
			return b
		}
	}
	return def
}

// GetInt returns the integer at path (a whole float counts), or def.
func (c *Config) GetInt(path string, def int) int {
	v, ok := c.Get(path)
	if !ok {
		return def
	}
	switch n := v.(type) {
	case int:
		return n
	case float64:
		if n == float64(int(n)) {
			return int(n)
		}
	}
	return def
}

// GetStringSlice returns the list at path as strings (scalars are printed;
// a lone string is a one-item list). An explicit empty list returns an empty,
// non-nil slice; an absent key or a mapping returns def.
func (c *Config) GetStringSlice(path string, def []string) []string {
	v, ok := c.Get(path)
	if !ok {
		return def
	}
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			switch e.(type) {
			case map[string]any, []any, nil:
				continue
			}
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return def
}

// ActiveWorkspace is active_workspace, or "default".
func (c *Config) ActiveWorkspace() string {
	return c.GetString("active_workspace", "default")
}

// WorkspaceNames lists the configured workspaces plus "default", sorted.
func (c *Config) WorkspaceNames() []string {
	set := map[string]bool{"default": true}
	if v, ok := c.Get("workspaces"); ok {
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				set[k] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ForWorkspace returns the config as seen from workspace name: each cloud
// section of workspaces.<name> is deep-merged over the global section of
// the same cloud (so a workspace's <kind>.allowed_contexts wins).
// The workspace-wide keys (private, allowed_users) stay where they are.
func (c *Config) ForWorkspace(name string) *Config {
	out := &Config{m: c.Map(), sources: c.Sources()}
	v, ok := c.Lookup("workspaces", name)
	if !ok {
		return out
	}
	ws, ok := v.(map[string]any)
	if !ok {
		return out
	}
	over := map[string]any{}
	for k, sec := range ws {
		if k == "private" || k == "allowed_users" {
			continue
		}
		if m, ok := sec.(map[string]any); ok {
			over[strings.ToLower(k)] = m
		}
	}
	out.m = Overlay(out.m, over)
	return out
}

// RegionValue reads key for one region of a cloud (under its section's
// infrakind.Kind.RegionSection): the per-region value first, then the
// cloud-wide one. The bool is false when neither is set.
func (c *Config) RegionValue(cloud, region, key string) (any, bool) {
	if k, ok := infrakind.Lookup(cloud); ok && k.RegionSection != "" && region != "" {
		sec := k.RegionSection
		if v, ok := c.Lookup(cloud, sec, region, key); ok {
			return v, true
		}
	}
	return c.Lookup(cloud, key)
}

// DBConnectionURI is the database for a team API server:
// $SKYPILOT_DB_CONNECTION_URI wins over the `db` key. Empty means the
// embedded SQLite store.
func (c *Config) DBConnectionURI() string {
	if v := os.Getenv(EnvDBURI); v != "" {
		return v
	}
	return c.GetString("db", "")
}

// CatalogDir is where catalogs are read from: $SKYPILOT_CATALOG_DIR wins
// over `catalog.dir`; a leading ~ is expanded. Empty means the default.
func (c *Config) CatalogDir() string {
	dir := os.Getenv(EnvCatalogDir)
	if dir == "" {
		dir = c.GetString("catalog.dir", "")
	}
	if dir == "~" || strings.HasPrefix(dir, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(h, dir[1:])
		}
	}
	return dir
}
