package task

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/task/taskdoc"
)

// Pos is a place in a source file (1-based line and column).
type Pos struct{ Line, Col int }

// posIndex remembers, for every field path of a converted document, where
// its key and its value were written, so any later check (schema, semantic,
// another package's fielderr path) can point at a line.
type posIndex struct {
	val    map[string]Pos
	key    map[string]Pos
	parent map[string]string
	// lit keeps a scalar's text as written, because a decoded float cannot
	// tell an error message whether the user wrote 1e3, 1000.0 or a huge int.
	lit map[string]string
}

func newPosIndex() *posIndex {
	return &posIndex{val: map[string]Pos{}, key: map[string]Pos{}, parent: map[string]string{}, lit: map[string]string{}}
}

// The path syntax and value wording are shared with the schema check.
var (
	joinKey   = taskdoc.JoinKey
	joinIndex = taskdoc.JoinIndex
	describe  = taskdoc.Describe
)

// Lookup and ParentPath make the index the schema check's locator.
func (ix *posIndex) Lookup(p string, preferKey bool) (line, col int) {
	pos := ix.lookup(p, preferKey)
	return pos.Line, pos.Col
}

func (ix *posIndex) ParentPath(p string) (string, bool) { return ix.parentPath(p) }

// parentPath returns the enclosing path of p. Paths we recorded are looked
// up exactly; others (from other packages) are cut at the last separator.
func (ix *posIndex) parentPath(p string) (string, bool) {
	if par, ok := ix.parent[p]; ok {
		return par, true
	}
	if p == "" {
		return "", false
	}
	cut := strings.LastIndexAny(p, ".[")
	if cut < 0 {
		return "", true
	}
	return p[:cut], true
}

// lookup finds the position of path p, or of its nearest recorded
// ancestor when p itself was not written in the file (a missing field).
// preferKey asks for the key's position (unknown field, duplicate key).
func (ix *posIndex) lookup(p string, preferKey bool) Pos {
	for {
		if preferKey {
			if pos, ok := ix.key[p]; ok {
				return pos
			}
		}
		if pos, ok := ix.val[p]; ok {
			return pos
		}
		par, ok := ix.parentPath(p)
		if !ok {
			return Pos{}
		}
		p = par
	}
}

// Limits that keep hostile input (alias bombs, absurd nesting) from
// exhausting memory or the stack.
const (
	maxNodes = 1_000_000
	maxDepth = 200
)

// converter turns a yaml.Node tree into plain Go values (map[string]any,
// []any, string, int, float64, bool, nil) while filling a posIndex and
// rejecting duplicate keys.
type converter struct {
	file  string
	idx   *posIndex
	nodes int
}

func (c *converter) errAt(n *yaml.Node, path, format string, args ...any) *Error {
	return &Error{File: c.file, Line: n.Line, Col: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)}
}

func (c *converter) convert(n *yaml.Node, path string, depth int) (any, error) {
	c.nodes++
	if c.nodes > maxNodes {
		return nil, c.errAt(n, path, "document is too large (more than %d values after expanding aliases)", maxNodes)
	}
	if depth > maxDepth {
		return nil, c.errAt(n, path, "document is nested too deeply (more than %d levels)", maxDepth)
	}
	if _, seen := c.idx.val[path]; !seen {
		c.idx.val[path] = Pos{n.Line, n.Column}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.convert(n.Content[0], path, depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, c.errAt(n, path, "unknown alias *%s", n.Value)
		}
		return c.convert(n.Alias, path, depth+1)
	case yaml.ScalarNode:
		c.idx.lit[path] = n.Value
		return scalarValue(n), nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			p := joinIndex(path, i)
			c.idx.parent[p] = path
			v, err := c.convert(item, p, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		if err := c.fillMapping(out, n, path, depth, false); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, c.errAt(n, path, "unsupported YAML node")
}

// fillMapping adds n's pairs to out. Merged mappings (<<: *base) only fill
// keys that are not set explicitly, as YAML merge keys specify.
func (c *converter) fillMapping(out map[string]any, n *yaml.Node, path string, depth int, merged bool) error {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return c.errAt(k, path, "mapping keys must be plain values, not lists or mappings")
		}
		key := keyString(k)
		p := joinKey(path, key)
		if _, dup := out[key]; dup {
			if merged {
				continue
			}
			first := c.idx.key[p]
			return c.errAt(k, p, "duplicate key %q (first defined on line %d); remove one of them", key, first.Line)
		}
		c.idx.key[p] = Pos{k.Line, k.Column}
		c.idx.parent[p] = path
		val, err := c.convert(v, p, depth+1)
		if err != nil {
			return err
		}
		out[key] = val
	}
	for _, m := range merges {
		if m.Kind == yaml.AliasNode && m.Alias != nil {
			m = m.Alias
		}
		var srcs []*yaml.Node
		switch m.Kind {
		case yaml.MappingNode:
			srcs = []*yaml.Node{m}
		case yaml.SequenceNode:
			srcs = m.Content
		default:
			return c.errAt(m, path, "merge key << needs a mapping or a list of mappings")
		}
		for _, s := range srcs {
			if s.Kind == yaml.AliasNode && s.Alias != nil {
				s = s.Alias
			}
			if s.Kind != yaml.MappingNode {
				return c.errAt(s, path, "merge key << needs a mapping or a list of mappings")
			}
			if err := c.fillMapping(out, s, path, depth+1, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyString renders a scalar key the way SkyPilot sees it after loading:
// YAML keys are strings in practice; 8080: or true: become their text.
func keyString(k *yaml.Node) string {
	switch v := scalarValue(k).(type) {
	case nil:
		return "null"
	case string:
		return v
	case bool:
		return pyBool(v)
	case int:
		return strconv.Itoa(v)
	case float64:
		return pyFloat(v)
	default:
		return k.Value
	}
}

// scalarValue decodes one scalar by its resolved tag.
func scalarValue(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err == nil {
			return b
		}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			if i >= math.MinInt && i <= math.MaxInt {
				return int(i)
			}
			return float64(i)
		}
		var f float64
		if err := n.Decode(&f); err == nil {
			return f
		}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			return f
		}
	case "!!timestamp":
		// Keep dates as written; nothing in a task is a date.
		return n.Value
	}
	return n.Value
}

// pyBool and pyFloat render values the way Python's str() does, because
// SkyPilot stringifies env values with str(): true -> "True", 1e3 -> "1000.0".
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	a := math.Abs(f)
	if a != 0 && (a >= 1e16 || a < 1e-4) {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// stringify converts an env/secret value to the string SkyPilot would use.
func stringify(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case bool:
		return pyBool(x), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		return pyFloat(x), true
	case time.Time:
		return x.String(), true
	}
	return fmt.Sprint(v), true
}
