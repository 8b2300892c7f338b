package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// cliOverride is one parsed --config value.
type cliOverride struct {
	m      map[string]any
	source string
	file   bool
	text   []byte // a file's bytes
}

// ParseCLIOverride parses one --config value: the path of a YAML config
// file, or `dotted.key=value` where value is YAML (`cpus=4` is the int 4,
// `allowed_contexts=[a,b]` a list, `vpc_name=null` null). The result is the
// mapping to overlay, already validated against the config schema.
func ParseCLIOverride(s string) (map[string]any, error) {
	o, err := parseCLIOverride(s, "")
	if err != nil {
		return nil, err
	}
	return o.m, nil
}

func parseCLIOverride(s, cwd string) (*cliOverride, error) {
	if s == "" {
		return nil, errors.New("--config: empty value; give a config file path or key.path=value")
	}
	path := expandHome(s)
	if cwd != "" && !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", s, err)
		}
		m, err := parseSource(data, path)
		if err != nil {
			return nil, err
		}
		return &cliOverride{m: m, source: path, file: true, text: data}, nil
	}
	key, val, found := strings.Cut(s, "=")
	if !found {
		return nil, fmt.Errorf("--config %s: no such file, and not of the form key.path=value", s)
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return nil, fmt.Errorf("--config %s: the key before = is empty", s)
	}
	if val == "" {
		return nil, fmt.Errorf("--config %s: the value after = is empty (use %s=null to clear it)", s, key)
	}
	parts := strings.Split(key, ".")
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("--config %s: key %q has an empty part between dots", s, key)
		}
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(val), &n); err != nil {
		return nil, fmt.Errorf("--config %s: the value is not valid YAML: %s", s, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	v, err := nodeValue(&n)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", s, err)
	}
	// Build {a: {b: {c: v}}} from a.b.c.
	var cur any = v
	for i := len(parts) - 1; i >= 0; i-- {
		cur = map[string]any{parts[i]: cur}
	}
	m := cur.(map[string]any)
	if err := validateDoc(&doc{value: m}, "--config "+s); err != nil {
		return nil, err
	}
	return &cliOverride{m: m, source: "--config " + s}, nil
}

// parseCLIList parses every --config value; a file must come alone, because
// mixing a whole file with pairs makes the precedence between them unclear.
func parseCLIList(vals []string, cwd string) ([]*cliOverride, error) {
	var out []*cliOverride
	for _, s := range vals {
		o, err := parseCLIOverride(s, cwd)
		if err != nil {
			return nil, err
		}
		if o.file && len(vals) > 1 {
			return nil, fmt.Errorf("--config %s: a config file must be the only --config; put the key=value settings into the file instead", s)
		}
		out = append(out, o)
	}
	return out, nil
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, p[1:])
		}
	}
	return p
}
