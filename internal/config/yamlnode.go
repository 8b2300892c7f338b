package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// doc is one parsed YAML document: the plain value (maps, lists, scalars as
// encoding/json would produce them, but with ints kept as int) plus the node
// tree, kept so validation errors can point at line:column.
type doc struct {
	value any
	root  *yaml.Node // the document's top value node; nil for an empty file
}

// parseYAML decodes data as a single YAML document. An empty document yields
// an empty mapping: an empty config file is valid and means "no settings".
func parseYAML(data []byte) (*doc, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return &doc{value: map[string]any{}}, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("line %d: a config file must hold one YAML document, found a second one", extra.Line)
	}
	root := &n
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return &doc{value: map[string]any{}}, nil
		}
		root = root.Content[0]
	}
	v, err := nodeValue(root)
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = map[string]any{}
	}
	return &doc{value: v, root: root}, nil
}

var lineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// syntaxError turns a YAML parse error into a ValidationError with the line
// number lifted out of the message, so every config error reads the same.
func syntaxError(err error, source string) *ValidationError {
	msg := err.Error()
	e := &ValidationError{Source: source}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	e.Msg = "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")
	return e
}

// maxNodes bounds how many values one document may expand to, so that
// aliases referring to aliases ("billion laughs") cannot exhaust memory.
const maxNodes = 1_000_000

// nodeValue converts a node into plain Go values. Mapping keys become
// strings (YAML allows `1: x`; config keys are always names). Duplicate keys
// are an error, because silently keeping one of them hides a mistake.
func nodeValue(n *yaml.Node) (any, error) {
	budget := maxNodes
	return convert(n, &budget, 0)
}

func convert(n *yaml.Node, budget *int, depth int) (any, error) {
	*budget--
	if *budget < 0 {
		return nil, fmt.Errorf("line %d: the document expands to more than %d values (too many aliases?)", n.Line, maxNodes)
	}
	if depth > 1000 {
		return nil, fmt.Errorf("line %d: the document is nested too deeply", n.Line)
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: unknown alias", n.Line)
		}
		return convert(n.Alias, budget, depth+1)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return convert(n.Content[0], budget, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := convert(c, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		seen := make(map[string]int, len(n.Content)/2)
		merged := map[string]any{} // from << merge keys, applied last
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" { // `<<: *anchor` merges the anchor's keys in
				v, err := convert(vn, budget, depth+1)
				if err != nil {
					return nil, err
				}
				// `<<: *a` or `<<: [*a, *b]`; keys set explicitly (or by an
				// earlier merge source) win.
				srcs, isList := v.([]any)
				if !isList {
					srcs = []any{v}
				}
				for _, src := range srcs {
					m, ok := src.(map[string]any)
					if !ok {
						return nil, fmt.Errorf("line %d: << must merge a mapping or a list of mappings", k.Line)
					}
					for mk, mv := range m {
						if _, set := merged[mk]; !set {
							merged[mk] = mv
						}
					}
				}
				continue
			}
			if line, dup := seen[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q (first at line %d)", k.Line, k.Value, line)
			}
			seen[k.Value] = k.Line
			v, err := convert(vn, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		for mk, mv := range merged {
			if _, set := out[mk]; !set {
				out[mk] = mv
			}
		}
		return out, nil
	case yaml.ScalarNode:
		return scalarValue(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func scalarValue(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, err
		}
		return b, nil
	case "!!int":
		var i int
		if err := n.Decode(&i); err == nil {
			return i, nil
		}
		var f float64 // out of int range: keep it as a number anyway
		if err := n.Decode(&f); err != nil {
			return nil, err
		}
		return f, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, err
		}
		return f, nil
	default: // !!str, !!timestamp, !!binary and custom tags stay text
		return n.Value, nil
	}
}

// locate finds the node at path (mapping keys and list indexes, as the JSON
// Schema validator reports them). When key is true and the last step is a
// mapping key, the key node is returned instead of the value node, which is
// where an "unknown field" error should point.
func locate(root *yaml.Node, path []string, key bool) *yaml.Node {
	n := root
	for i, step := range path {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n == nil {
			return nil
		}
		switch n.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == step {
					if key && i == len(path)-1 {
						return n.Content[j]
					}
					next = n.Content[j+1]
					break
				}
			}
			if next == nil {
				return n
			}
			n = next
		case yaml.SequenceNode:
			idx, err := strconv.Atoi(step)
			if err != nil || idx < 0 || idx >= len(n.Content) {
				return n
			}
			n = n.Content[idx]
		default:
			return n
		}
	}
	return n
}

// dotted renders a validator path as the user writes it: a.b[0].c.
func dotted(path []string) string {
	var sb strings.Builder
	for _, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			sb.WriteString("[" + p + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(p)
	}
	return sb.String()
}
