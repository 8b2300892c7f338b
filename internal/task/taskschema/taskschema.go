// Package taskschema checks task and volume YAML against their JSON
// schemas and words the violations for people. It plugs into the task
// loader from the binaries that link it (the API server's operations,
// internal/core, call task.SetSchemaValidator with it; this package does
// not import the loader, so the loader's own tests can use it too): the JSON-Schema library it uses costs start-up time and size
// the CLI must not pay. The CLI has the server validate a YAML instead.
package taskschema

import (
	"bytes"
	_ "embed"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/skygo/skygo/internal/editdist"
	"github.com/skygo/skygo/internal/task/taskdoc"
)

// Validator is the schema check for task.SetSchemaValidator. The schemas
// compile on first use, not at start-up.
type Validator struct{}

// Ready compiles the schemas and reports an error in them.
func (Validator) Ready() error {
	_, _, err := schemas()
	return err
}

// Task checks a decoded task document.
func (Validator) Task(v any, loc taskdoc.Locator) []taskdoc.Issue {
	ts, _, err := schemas()
	if err != nil {
		return []taskdoc.Issue{{Msg: err.Error()}}
	}
	return ts.validate(v, "", loc)
}

// Volume checks a decoded volume spec.
func (Validator) Volume(v any, loc taskdoc.Locator) []taskdoc.Issue {
	_, vs, err := schemas()
	if err != nil {
		return []taskdoc.Issue{{Msg: err.Error()}}
	}
	return vs.validate(v, "", loc)
}

var (
	joinKey   = taskdoc.JoinKey
	joinIndex = taskdoc.JoinIndex
	describe  = taskdoc.Describe
)

// printer renders the library's own messages for the rare error kinds we
// do not reword.
var printer = message.NewPrinter(language.English)

// The schemas are written from spec/task-yaml.md, service.md, storage.md,
// resources.md and config.md. Besides standard keywords they carry an
// "x-expected" note that error messages quote, so users read "expected one
// of MOUNT, COPY, MOUNT_CACHED" instead of a regular expression.
//
//go:embed schema.json
var taskSchemaJSON []byte

//go:embed volume_schema.json
var volumeSchemaJSON []byte

// compiledSchema is a compiled schema plus its raw JSON, kept to look up
// x-expected notes and the list of valid field names for "did you mean".
type compiledSchema struct {
	sch *jsonschema.Schema
	raw any
	url string
}

var (
	schemaOnce               sync.Once
	taskSchema, volumeSchema *compiledSchema
	schemaErr                error
)

func schemas() (*compiledSchema, *compiledSchema, error) {
	schemaOnce.Do(func() {
		taskSchema, schemaErr = compileSchema("https://skygo.invalid/schemas/task.json", taskSchemaJSON)
		if schemaErr != nil {
			return
		}
		volumeSchema, schemaErr = compileSchema("https://skygo.invalid/schemas/volume.json", volumeSchemaJSON)
	})
	return taskSchema, volumeSchema, schemaErr
}

func compileSchema(id string, data []byte) (*compiledSchema, error) {
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("embedded schema %s: %w", id, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, raw); err != nil {
		return nil, fmt.Errorf("embedded schema %s: %w", id, err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		return nil, fmt.Errorf("embedded schema %s: %w", id, err)
	}
	return &compiledSchema{sch: sch, raw: raw, url: id}, nil
}

// validate checks v and converts every violation into a located Issue.
func (cs *compiledSchema) validate(v any, base string, idx taskdoc.Locator) []taskdoc.Issue {
	err := cs.sch.Validate(v)
	if err == nil {
		return nil
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []taskdoc.Issue{{Msg: err.Error()}}
	}
	var leaves []*jsonschema.ValidationError
	collectLeaves(verr, &leaves)
	var out []taskdoc.Issue
	seen := map[string]bool{}
	for _, l := range leaves {
		for _, e := range cs.convert(l, v, base, idx) {
			k := fmt.Sprintf("%d:%d:%s:%s", e.Line, e.Col, e.Path, e.Msg)
			if !seen[k] {
				seen[k] = true
				out = append(out, e)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Col < out[j].Col
	})
	if len(out) > 10 {
		out = out[:10]
	}
	return out
}

// collectLeaves gathers the most specific errors. The schema avoids
// anyOf/oneOf (type unions do the job), so every leaf is a real problem.
func collectLeaves(e *jsonschema.ValidationError, out *[]*jsonschema.ValidationError) {
	if _, ok := e.ErrorKind.(*kind.PropertyNames); ok || len(e.Causes) == 0 {
		*out = append(*out, e)
		return
	}
	for _, c := range e.Causes {
		collectLeaves(c, out)
	}
}

// instancePath turns a JSON-pointer token list into our field path syntax,
// walking the value to know which tokens are list indexes.
func instancePath(base string, v any, tokens []string) (string, any) {
	p := base
	cur := v
	for _, t := range tokens {
		switch x := cur.(type) {
		case []any:
			var i int
			fmt.Sscan(t, &i)
			p = joinIndex(p, i)
			if i >= 0 && i < len(x) {
				cur = x[i]
			} else {
				cur = nil
			}
		case map[string]any:
			p = joinKey(p, t)
			cur = x[t]
		default:
			p = joinKey(p, t)
			cur = nil
		}
	}
	return p, cur
}

func (cs *compiledSchema) convert(l *jsonschema.ValidationError, v any, base string, idx taskdoc.Locator) []taskdoc.Issue {
	path, cur := instancePath(base, v, l.InstanceLocation)
	at := func(p string, preferKey bool, msg string) taskdoc.Issue {
		line, col := idx.Lookup(p, preferKey)
		return taskdoc.Issue{Line: line, Col: col, Path: p, Msg: msg}
	}
	sub := cs.subschema(l.SchemaURL)
	expected, _ := sub["x-expected"].(string)

	switch k := l.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		var out []taskdoc.Issue
		for _, name := range k.Properties {
			p := joinKey(path, name)
			out = append(out, at(p, true, cs.unknownFieldMsg(name, path, sub)))
		}
		return out
	case *kind.FalseSchema:
		// unevaluatedProperties: false reports each extra field on its own.
		if strings.HasSuffix(l.SchemaURL, "/unevaluatedProperties") || strings.HasSuffix(l.SchemaURL, "/additionalProperties") {
			name := ""
			if n := len(l.InstanceLocation); n > 0 {
				name = l.InstanceLocation[n-1]
			}
			parentURL := l.SchemaURL[:strings.LastIndex(l.SchemaURL, "/")]
			parentPath, _ := idx.ParentPath(path)
			parent := cs.subschema(parentURL)
			// A known field whose value failed validation also counts as
			// "unevaluated"; its own error already says what is wrong.
			for _, known := range cs.fieldNames(parent, 0) {
				if known == name {
					return nil
				}
			}
			return []taskdoc.Issue{at(path, true, cs.unknownFieldMsg(name, parentPath, parent))}
		}
		return []taskdoc.Issue{at(path, false, "this field is not allowed here")}
	case *kind.Required:
		names := make([]string, len(k.Missing))
		for i, m := range k.Missing {
			names[i] = "`" + m + "`"
		}
		return []taskdoc.Issue{at(path, false, "missing required field "+strings.Join(names, ", "))}
	case *kind.PropertyNames:
		// The library reuses its location slice for propertyNames errors,
		// so find the mapping holding the bad key in the value instead.
		if found, ok := findKeyOwner(v, base, k.Property); ok {
			path = found
		}
		p := joinKey(path, k.Property)
		if path == "envs" {
			return []taskdoc.Issue{at(p, true, fmt.Sprintf("The `envs` field contains invalid keys: %q (names must match ^[a-zA-Z_][a-zA-Z0-9_]*$)", k.Property))}
		}
		return []taskdoc.Issue{at(p, true, fmt.Sprintf("invalid key %q", k.Property))}
	case *kind.Type:
		want := expected
		if want == "" {
			ws := make([]string, len(k.Want))
			for i, w := range k.Want {
				ws[i] = typeWord(w)
			}
			want = strings.Join(ws, " or ")
		}
		return []taskdoc.Issue{at(path, false, fmt.Sprintf("expected %s, got %s", want, describe(cur)))}
	case *kind.Pattern:
		want := expected
		if want == "" {
			want = "a value matching " + k.Want
		}
		return []taskdoc.Issue{at(path, false, fmt.Sprintf("expected %s, got %s", want, describe(cur)))}
	case *kind.Minimum, *kind.Maximum, *kind.ExclusiveMinimum, *kind.ExclusiveMaximum:
		msg := rangeMsg(l.ErrorKind, cur)
		if expected != "" {
			msg = fmt.Sprintf("expected %s, got %s", expected, describe(cur))
		}
		return []taskdoc.Issue{at(path, false, msg)}
	case *kind.MinProperties, *kind.MaxProperties, *kind.MinItems, *kind.MaxItems:
		msg := "wrong number of entries"
		if expected != "" {
			msg = "expected " + expected
		}
		return []taskdoc.Issue{at(path, false, msg)}
	case *kind.UniqueItems:
		return []taskdoc.Issue{at(path, false, fmt.Sprintf("list items must be unique (items %d and %d are equal)", k.Duplicates[0], k.Duplicates[1]))}
	}
	return []taskdoc.Issue{at(path, false, l.ErrorKind.LocalizedString(printer))}
}

// findKeyOwner returns the path of the only mapping in v that has key.
func findKeyOwner(v any, path, key string) (string, bool) {
	var hits []string
	var walk func(x any, p string)
	walk = func(x any, p string) {
		switch t := x.(type) {
		case map[string]any:
			if _, ok := t[key]; ok {
				hits = append(hits, p)
			}
			for k, c := range t {
				walk(c, joinKey(p, k))
			}
		case []any:
			for i, c := range t {
				walk(c, joinIndex(p, i))
			}
		}
	}
	walk(v, path)
	if len(hits) == 1 {
		return hits[0], true
	}
	return "", false
}

func rangeMsg(k jsonschema.ErrorKind, cur any) string {
	switch k := k.(type) {
	case *kind.Minimum:
		return fmt.Sprintf("must be at least %s, got %s", k.Want.RatString(), describe(cur))
	case *kind.Maximum:
		return fmt.Sprintf("must be at most %s, got %s", k.Want.RatString(), describe(cur))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be greater than %s, got %s", k.Want.RatString(), describe(cur))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be less than %s, got %s", k.Want.RatString(), describe(cur))
	}
	return "value out of range"
}

// fieldHints explain unknown fields that used to be valid or live elsewhere.
var fieldHints = map[string]string{
	"resources.spot_recovery": "it was renamed to job_recovery",
	"resources.hooks":         "lifecycle hooks belong in the task's config.hooks",
}

func (cs *compiledSchema) unknownFieldMsg(name, parentPath string, parent map[string]any) string {
	msg := fmt.Sprintf("unknown field %q", name)
	if parentPath == "" {
		msg = "Invalid task YAML: " + msg
	}
	if hint, ok := fieldHints[joinKey(parentPath, name)]; ok {
		return msg + "; " + hint
	}
	if best := closest(name, cs.fieldNames(parent, 0)); best != "" {
		return msg + fmt.Sprintf("; did you mean %q?", best)
	}
	if names := cs.fieldNames(parent, 0); len(names) > 0 && len(names) <= 12 {
		return msg + "; valid fields: " + strings.Join(names, ", ")
	}
	return msg
}

// fieldNames lists the properties a schema object accepts, following $ref.
func (cs *compiledSchema) fieldNames(s map[string]any, depth int) []string {
	if s == nil || depth > 5 {
		return nil
	}
	var names []string
	if props, ok := s["properties"].(map[string]any); ok {
		for n := range props {
			if !strings.HasPrefix(n, "_") {
				names = append(names, n)
			}
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		names = append(names, cs.fieldNames(cs.subschema(ref), depth+1)...)
	}
	sort.Strings(names)
	return names
}

// subschema resolves a schema location (absolute URL with a JSON-pointer
// fragment, or a local "#/..." ref) inside the raw schema document.
func (cs *compiledSchema) subschema(loc string) map[string]any {
	_, frag, _ := strings.Cut(loc, "#")
	cur := cs.raw
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok, _ = url.PathUnescape(tok)
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case map[string]any:
			cur = x[tok]
		case []any:
			var i int
			fmt.Sscan(tok, &i)
			if i < 0 || i >= len(x) {
				return nil
			}
			cur = x[i]
		default:
			return nil
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

func typeWord(t string) string {
	switch t {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "null":
		return "nothing (null)"
	}
	return t
}

// closest returns the candidate most similar to name, or "" when none is
// similar enough. Similarity is 2*LCS/(len(a)+len(b)), like difflib's
// ratio, with the same 0.6 cut-off SkyPilot uses for its hints.
func closest(name string, candidates []string) string {
	best, bestScore := "", 0.0
	for _, c := range candidates {
		s := editdist.Similarity(strings.ToLower(name), strings.ToLower(c))
		if s > bestScore {
			best, bestScore = c, s
		}
	}
	if bestScore < 0.6 {
		return ""
	}
	return best
}
