// Package configschema checks SkyGo config values against the config
// schema (schema.json, written from SkyPilot's config reference) and words
// the most useful violation for people. It plugs into the config loader
// from the binaries that link it (internal/core calls
// config.SetSchemaValidator with it): the JSON-Schema library costs
// start-up time and size the CLI must not pay. It does not import the
// loader, so the loader's tests can use it too.
package configschema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/skygo/skygo/internal/config/configdoc"
	"github.com/skygo/skygo/internal/infrakind"
)

//go:embed schema.json
var schemaJSON []byte

const schemaURL = "skygo://config.json"

var (
	schemaOnce  sync.Once
	rootSchema  *jsonschema.Schema
	hooksSchema *jsonschema.Schema
	rawSchema   map[string]any // for "did you mean" lookups of allowed keys
	schemaErr   error
	printer     = message.NewPrinter(language.English)
)

func loadSchemas() {
	schemaOnce.Do(func() {
		if err := json.Unmarshal(schemaJSON, &rawSchema); err != nil {
			schemaErr = fmt.Errorf("embedded config schema: %w", err)
			return
		}
		full, err := withKinds(rawSchema, infrakind.All())
		if err != nil {
			schemaErr = fmt.Errorf("embedded config schema: %w", err)
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(full))
		if err != nil {
			schemaErr = fmt.Errorf("embedded config schema: %w", err)
			return
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(schemaURL, doc); err != nil {
			schemaErr = fmt.Errorf("embedded config schema: %w", err)
			return
		}
		if rootSchema, err = c.Compile(schemaURL); err != nil {
			schemaErr = fmt.Errorf("embedded config schema: %w", err)
			return
		}
		if hooksSchema, err = c.Compile(schemaURL + "#/$defs/hooks"); err != nil {
			schemaErr = fmt.Errorf("embedded config schema: %w", err)
		}
	})
}

// withKinds adds what the registered infrastructures describe to the
// schema (which it changes): each kind's name and aliases where a cloud is
// named (allowed_clouds, a workspace's sections), the schema of its config
// section and of its section in a workspace when it brings them, and the
// definitions those share ("$defs" of its section schema), as JSON for
// the validator.
func withKinds(schema map[string]any, kinds []infrakind.Kind) ([]byte, error) {
	defs, _ := schema["$defs"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	cloudName, _ := defs["cloud_name"].(map[string]any)
	wsKey, _ := defs["workspace_key"].(map[string]any)
	ws, _ := defs["workspace"].(map[string]any)
	wsProps, _ := ws["properties"].(map[string]any)
	pattern, _ := cloudName["pattern"].(string)
	names, _ := wsKey["enum"].([]any)
	lo, hi := strings.Index(pattern, "^("), strings.LastIndex(pattern, ")$")
	if defs == nil || props == nil || wsProps == nil || lo < 0 || hi < lo || names == nil {
		return nil, errors.New("no cloud_name pattern, workspace_key enum, workspace or properties to add the infrastructures to")
	}
	alts := strings.Split(pattern[lo+2:hi], "|")
	for _, k := range kinds {
		for _, n := range append([]string{k.Name}, k.Aliases...) {
			if !slices.Contains(alts, n) {
				alts = append(alts, n)
			}
		}
		if !slices.Contains(names, any(k.Name)) {
			names = append(names, k.Name)
		}
		if err := addSection(props, defs, k.Name, k.Schema, true); err != nil {
			return nil, err
		}
		if err := addSection(wsProps, defs, k.Name, k.WorkspaceSchema, false); err != nil {
			return nil, err
		}
	}
	cloudName["pattern"] = pattern[:lo+2] + strings.Join(alts, "|") + pattern[hi:]
	wsKey["enum"] = names
	return json.Marshal(schema)
}

// addSection puts a kind's schema fragment (if any) under its name in
// props; with lift, the fragment's own "$defs" join defs, where a name may
// be taken twice only for the same definition (two kinds sharing one).
func addSection(props, defs map[string]any, name string, raw json.RawMessage, lift bool) error {
	if raw == nil {
		return nil
	}
	if _, dup := props[name]; dup {
		return fmt.Errorf("infrastructure %s brings a config schema, but the embedded schema has its section already", name)
	}
	var frag map[string]any
	if err := json.Unmarshal(raw, &frag); err != nil {
		return fmt.Errorf("config schema of infrastructure %s: %w", name, err)
	}
	if own, ok := frag["$defs"].(map[string]any); ok && lift {
		for n, d := range own {
			if have, taken := defs[n]; taken && !reflect.DeepEqual(have, d) {
				return fmt.Errorf("config schema of infrastructure %s defines %s, which the schema defines otherwise", name, n)
			}
			defs[n] = d
		}
		delete(frag, "$defs")
	}
	props[name] = frag
	return nil
}

type schemaIssue = configdoc.Issue

// Validator is the schema check for config.SetSchemaValidator. The schema
// compiles on first use, not at start-up.
type Validator struct{}

// Check validates v against the whole schema, or the hooks section's.
func (Validator) Check(v any, hooks bool) (*configdoc.Issue, error) {
	loadSchemas()
	if schemaErr != nil {
		return nil, schemaErr
	}
	if hooks {
		return validateValue(hooksSchema, v)
	}
	return validateValue(rootSchema, v)
}

var suggest = configdoc.Suggest

// validateValue checks v against sch and returns the most useful issue, or
// nil. The validator reports a tree (one branch per anyOf alternative); we
// show the deepest leaf, because that is the one closest to the mistake.
func validateValue(sch *jsonschema.Schema, v any) (*schemaIssue, error) {
	loadSchemas()
	if schemaErr != nil {
		return nil, schemaErr
	}
	err := sch.Validate(v)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	return describe(ve, v), nil
}

// leaves flattens the error tree. Errors about a mapping key (propertyNames)
// are reported by the validator at the key's own, empty, location; they are
// rewritten here to the parent's location plus the key.
func leaves(e *jsonschema.ValidationError, under []string, out []*jsonschema.ValidationError, keyLeaves map[*jsonschema.ValidationError]bool) []*jsonschema.ValidationError {
	if pn, ok := e.ErrorKind.(*kind.PropertyNames); ok {
		under = append(append([]string{}, e.InstanceLocation...), pn.Property)
	}
	if len(e.Causes) == 0 {
		if under != nil {
			cp := *e
			cp.InstanceLocation = under
			e = &cp
			keyLeaves[e] = true
		}
		return append(out, e)
	}
	for _, c := range e.Causes {
		out = leaves(c, under, out, keyLeaves)
	}
	return out
}

func describe(top *jsonschema.ValidationError, v any) *schemaIssue {
	keyLeaves := map[*jsonschema.ValidationError]bool{}
	all := leaves(top, nil, nil, keyLeaves)
	// Deepest location wins; among equals prefer errors that are not mere
	// type mismatches (those come from the alternatives that were not meant).
	sort.SliceStable(all, func(i, j int) bool {
		di, dj := depth(all[i]), depth(all[j])
		if di != dj {
			return di > dj
		}
		_, ti := all[i].ErrorKind.(*kind.Type)
		_, tj := all[j].ErrorKind.(*kind.Type)
		return !ti && tj
	})
	best := all[0]
	path := best.InstanceLocation
	if keyLeaves[best] { // the key itself is wrong, not its value
		name := path[len(path)-1]
		msg := fmt.Sprintf("%q is not an allowed name here", name)
		switch k := best.ErrorKind.(type) {
		case *kind.Enum:
			msg += "; expected one of " + enumList(k.Want)
		case *kind.Pattern:
			msg += fmt.Sprintf(" (names must match %s)", k.Want)
		default:
			msg += ": " + k.LocalizedString(printer)
		}
		return &schemaIssue{Path: path, Msg: msg, AtKey: true}
	}
	switch k := best.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		name := k.Properties[0]
		msg := fmt.Sprintf("unknown field %q", name)
		allowed := allowedKeys(path)
		if s := suggest(name, allowed); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else if len(allowed) > 0 && len(allowed) <= 30 {
			msg += "; allowed fields: " + strings.Join(allowed, ", ")
		}
		return &schemaIssue{Path: append(append([]string{}, path...), name), Msg: msg, AtKey: true}
	case *kind.FalseSchema:
		return &schemaIssue{Path: path, Msg: "this field is not allowed here", AtKey: true}
	case *kind.Type:
		// Collect every type the alternatives at this location would accept.
		want := map[string]bool{}
		for _, l := range all {
			if t, ok := l.ErrorKind.(*kind.Type); ok && samePath(l.InstanceLocation, path) {
				for _, w := range t.Want {
					want[w] = true
				}
			}
		}
		return &schemaIssue{Path: path, Msg: fmt.Sprintf("expected %s, got %s", joinSorted(want), k.Got)}
	case *kind.Enum:
		return &schemaIssue{Path: path, Msg: fmt.Sprintf("must be one of %s, got %s", enumList(k.Want), show(k.Got))}
	case *kind.Const:
		return &schemaIssue{Path: path, Msg: fmt.Sprintf("expected %s, got %s", show(k.Want), show(k.Got))}
	case *kind.Pattern:
		return &schemaIssue{Path: path, Msg: fmt.Sprintf("%q does not have the expected form (pattern %s)", k.Got, k.Want)}
	case *kind.Required:
		return &schemaIssue{Path: path, Msg: fmt.Sprintf("missing required field(s): %s", strings.Join(k.Missing, ", "))}
	case *kind.Not:
		return &schemaIssue{Path: path, Msg: "these fields cannot be set together: " + conflicting(path, v)}
	}
	return &schemaIssue{Path: path, Msg: best.ErrorKind.LocalizedString(printer)}
}

func depth(e *jsonschema.ValidationError) int { return len(e.InstanceLocation) }

func samePath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func joinSorted(set map[string]bool) string {
	var s []string
	for k := range set {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, " or ")
}

func enumList(vals []any) string {
	var s []string
	for _, v := range vals {
		s = append(s, show(v))
	}
	return strings.Join(s, ", ")
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// conflicting explains a failed "not": the only use in our schema is
// "labels and instance_tags together", so name the keys actually present.
func conflicting(path []string, v any) string {
	cur := v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "see the config reference"
		}
		cur = m[p]
	}
	if m, ok := cur.(map[string]any); ok {
		_, l := m["labels"]
		_, t := m["instance_tags"]
		if l && t {
			return "labels and instance_tags (instance_tags is the legacy name; keep only labels)"
		}
	}
	return "see the config reference"
}

// allowedKeys walks the raw schema along path and returns the property
// names allowed there. It follows local $refs and looks into allOf/anyOf
// branches, which is all our schema uses.
func allowedKeys(path []string) []string {
	loadSchemas()
	node := resolve(rawSchema)
	for _, step := range path {
		node = child(node, step)
		if node == nil {
			return nil
		}
	}
	set := map[string]bool{}
	collectProps(node, set, 0)
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func resolve(n map[string]any) map[string]any {
	for i := 0; i < 8 && n != nil; i++ {
		ref, ok := n["$ref"].(string)
		if !ok {
			return n
		}
		name := strings.TrimPrefix(ref, "#/$defs/")
		defs, _ := rawSchema["$defs"].(map[string]any)
		n, _ = defs[name].(map[string]any)
	}
	return n
}

func child(n map[string]any, step string) map[string]any {
	if n == nil {
		return nil
	}
	if props, ok := n["properties"].(map[string]any); ok {
		if c, ok := props[step].(map[string]any); ok {
			return resolve(c)
		}
	}
	if c, ok := n["additionalProperties"].(map[string]any); ok {
		return resolve(c)
	}
	if c, ok := n["items"].(map[string]any); ok {
		return resolve(c)
	}
	for _, key := range []string{"allOf", "anyOf"} {
		if branches, ok := n[key].([]any); ok {
			for _, b := range branches {
				if bm, ok := b.(map[string]any); ok {
					if c := child(resolve(bm), step); c != nil {
						return c
					}
				}
			}
		}
	}
	return nil
}

func collectProps(n map[string]any, set map[string]bool, depth int) {
	if n == nil || depth > 4 {
		return
	}
	if props, ok := n["properties"].(map[string]any); ok {
		for k := range props {
			set[k] = true
		}
	}
	for _, key := range []string{"allOf", "anyOf"} {
		if branches, ok := n[key].([]any); ok {
			for _, b := range branches {
				if bm, ok := b.(map[string]any); ok {
					collectProps(resolve(bm), set, depth+1)
				}
			}
		}
	}
}
