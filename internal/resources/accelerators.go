package resources

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
)

// Accelerator is one accelerator type and how many of it each node needs.
// Count may be fractional (T4:0.5) to share a device between tasks.
type Accelerator struct {
	Name  string
	Count float64
}

// String is NAME:COUNT, the form Parse reads back.
func (a Accelerator) String() string { return a.Name + ":" + formatNumber(a.Count) }

// IsTPU reports whether the name is a TPU (GCP or GKE).
func (a Accelerator) IsTPU() bool { return strings.Contains(strings.ToLower(a.Name), "tpu") }

// MemoryBased reports whether the name asks for "any device with this much
// memory" (80GB, 80GB+, nvidia:48GB) rather than a device model; the
// catalog expands it into concrete devices.
func (a Accelerator) MemoryBased() bool {
	i := strings.LastIndex(a.Name, ":")
	return memoryAccRe.MatchString(a.Name[i+1:])
}

// memoryAccRe matches the memory part of a memory-based accelerator.
var memoryAccRe = regexp.MustCompile(`(?i)^\d+(\.\d+)?(GB|MB|TB)\+?$`)

// Accelerators is the accelerators (alias gpus) field. With one entry it is
// a plain request. With several, each entry is an alternative: a mapping
// or YAML set ({A100: 1, H100: 1}) lets the optimizer pick any (Ordered
// false; entries are kept sorted by name), a list ([A100:1, H100:1]) is
// tried in order (Ordered true). A one-entry list is the same as a plain
// request, so Ordered is only ever true with two or more entries.
type Accelerators struct {
	List    []Accelerator
	Ordered bool
}

// IsZero reports whether no accelerator was asked for.
func (a Accelerators) IsZero() bool { return len(a.List) == 0 }

func (a Accelerators) copy() Accelerators {
	if a.List == nil {
		return Accelerators{}
	}
	return Accelerators{List: append([]Accelerator(nil), a.List...), Ordered: a.Ordered}
}

// String is NAME:COUNT for one entry, {A:1,B:1} for a set and [A:1,B:1]
// for an ordered list.
func (a Accelerators) String() string {
	if len(a.List) == 0 {
		return ""
	}
	if len(a.List) == 1 {
		return a.List[0].String()
	}
	parts := make([]string, len(a.List))
	for i, x := range a.List {
		parts[i] = x.String()
	}
	if a.Ordered {
		return "[" + strings.Join(parts, ",") + "]"
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// toValue is the canonical YAML/JSON form: a string, a list of strings, or
// a mapping name -> count.
func (a Accelerators) toValue() any {
	switch {
	case len(a.List) == 1:
		return a.List[0].String()
	case a.Ordered:
		out := make([]any, len(a.List))
		for i, x := range a.List {
			out[i] = x.String()
		}
		return out
	default:
		// Set form as a list of NAME:COUNT keys with null values would
		// need map[any]any; a mapping name -> count says the same unless
		// one name appears twice, where we fall back to NAME:COUNT keys.
		out := make(map[string]any, len(a.List))
		for _, x := range a.List {
			if _, dup := out[x.Name]; dup {
				return a.setWithCountKeys()
			}
			out[x.Name] = countValue(x.Count)
		}
		return out
	}
}

func (a Accelerators) setWithCountKeys() map[string]any {
	out := make(map[string]any, len(a.List))
	for _, x := range a.List {
		out[x.String()] = nil
	}
	return out
}

// countValue is an int when the count is whole, so YAML shows 8 not 8.0.
func countValue(f float64) any {
	if f == float64(int(f)) {
		return int(f)
	}
	return f
}

const accFormHint = "expected NAME or NAME:COUNT (e.g. A100:8), a mapping {NAME: COUNT, ...} of alternatives, or a list [NAME:COUNT, ...] in order of preference"

// parseAccelerators reads every accepted form of the accelerators field.
func parseAccelerators(v any, path string) (Accelerators, error) {
	switch x := v.(type) {
	case string:
		a, err := parseAccString(x, path)
		if err != nil {
			return Accelerators{}, err
		}
		return Accelerators{List: []Accelerator{a}}, nil
	}
	if m, ok := asMap(v); ok {
		list, err := parseAccMap(m, path)
		if err != nil {
			return Accelerators{}, err
		}
		return normalizeAccs(Accelerators{List: list}), nil
	}
	if l, ok := asList(v); ok {
		var list []Accelerator
		for i, item := range l {
			p := index(path, i)
			switch it := item.(type) {
			case string:
				a, err := parseAccString(it, p)
				if err != nil {
					return Accelerators{}, err
				}
				list = append(list, a)
			default:
				m, ok := asMap(item)
				if !ok {
					return Accelerators{}, fielderr.New(p, fmt.Sprintf("expected NAME:COUNT, got %s", kindOf(item)))
				}
				sub, err := parseAccMap(m, p)
				if err != nil {
					return Accelerators{}, err
				}
				list = append(list, sub...)
			}
		}
		if len(list) == 0 {
			return Accelerators{}, fielderr.New(path, "empty accelerator list; "+accFormHint)
		}
		return normalizeAccs(Accelerators{List: list, Ordered: true}), nil
	}
	return Accelerators{}, fielderr.New(path, fmt.Sprintf("got %s; %s", kindOf(v), accFormHint))
}

// normalizeAccs sorts sets (so two spellings of one set compare equal) and
// drops the ordered flag from one-entry lists.
func normalizeAccs(a Accelerators) Accelerators {
	if len(a.List) < 2 {
		a.Ordered = false
	}
	if !a.Ordered {
		sort.SliceStable(a.List, func(i, j int) bool {
			if a.List[i].Name != a.List[j].Name {
				return a.List[i].Name < a.List[j].Name
			}
			return a.List[i].Count < a.List[j].Count
		})
	}
	return a
}

// parseAccMap reads {NAME: COUNT}; a null value means count 1, which is
// also how YAML decodes the flow set {A100:1, H100:1} (keys "A100:1").
func parseAccMap(m map[string]any, path string) ([]Accelerator, error) {
	if len(m) == 0 {
		return nil, fielderr.New(path, "empty accelerator mapping; "+accFormHint)
	}
	var list []Accelerator
	for _, k := range sortedKeys(m) {
		val := m[k]
		p := join(path, k)
		if val == nil {
			a, err := parseAccString(k, p)
			if err != nil {
				return nil, err
			}
			list = append(list, a)
			continue
		}
		n, ok := toFloat(val)
		if !ok {
			if s, isStr := val.(string); isStr {
				n, ok = parseNumber(s)
			}
		}
		if !ok {
			return nil, fielderr.New(p, fmt.Sprintf("accelerator count must be a positive number, got %s", kindOf(val)))
		}
		if n <= 0 {
			return nil, fielderr.New(p, fmt.Sprintf("Accelerator count must be a positive number, got %s", formatNumber(n)))
		}
		name := strings.TrimSpace(k)
		if name == "" {
			return nil, fielderr.New(path, "empty accelerator name")
		}
		if strings.Contains(name, ":") && !memoryAccRe.MatchString(name[strings.LastIndex(name, ":")+1:]) {
			return nil, fielderr.New(p, fmt.Sprintf("write either %q with no value or %s: %v, not both", name, name[:strings.Index(name, ":")], val))
		}
		list = append(list, Accelerator{Name: name, Count: n})
	}
	return list, nil
}

// parseAccString reads NAME, NAME:COUNT and the memory-based forms 80GB,
// 80GB+, 48GB:2, nvidia:80GB and nvidia:80GB:2.
func parseAccString(s, path string) (Accelerator, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Accelerator{}, fielderr.New(path, "empty accelerator name; "+accFormHint)
	}
	parts := strings.Split(s, ":")
	for _, p := range parts {
		if strings.TrimSpace(p) == "" {
			return Accelerator{}, fielderr.New(path, fmt.Sprintf("invalid accelerator %q: should be <name> or <name>:<cnt>", s))
		}
	}
	name, countStr := s, ""
	switch len(parts) {
	case 1:
	case 2:
		if _, isNum := parseNumber(parts[1]); isNum || !memoryAccRe.MatchString(parts[1]) {
			name, countStr = parts[0], parts[1]
		}
		// else manufacturer:memory, count 1
	case 3:
		if !memoryAccRe.MatchString(parts[1]) {
			return Accelerator{}, fielderr.New(path, fmt.Sprintf("invalid accelerator %q: should be <name> or <name>:<cnt> (three parts only for <manufacturer>:<memory>:<cnt>, e.g. nvidia:80GB:2)", s))
		}
		name, countStr = parts[0]+":"+parts[1], parts[2]
	default:
		return Accelerator{}, fielderr.New(path, fmt.Sprintf("invalid accelerator %q: should be <name> or <name>:<cnt>", s))
	}
	count := 1.0
	if countStr != "" {
		n, ok := parseNumber(countStr)
		if !ok || n <= 0 {
			return Accelerator{}, fielderr.New(path, fmt.Sprintf("Accelerator count must be a positive number, got %q in %q", countStr, s))
		}
		count = n
	}
	return Accelerator{Name: strings.TrimSpace(name), Count: count}, nil
}
