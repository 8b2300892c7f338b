package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// docSource is one YAML document of a file with the positions of its
// fields; every later error about the document is located through it.
type docSource struct {
	file string
	idx  *posIndex
}

func (s *docSource) errAt(path string, preferKey bool, format string, args ...any) *Error {
	pos := Pos{}
	if s != nil && s.idx != nil {
		pos = s.idx.lookup(path, preferKey)
	}
	file := ""
	if s != nil {
		file = s.file
	}
	return &Error{File: file, Line: pos.Line, Col: pos.Col, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// literal is the scalar at path as written in the file, for messages about
// values whose decoded form hides what the user typed.
func (s *docSource) literal(path string) string {
	if s != nil && s.idx != nil {
		if v, ok := s.idx.lit[path]; ok {
			return v
		}
	}
	return "?"
}

// Load reads a task YAML file. See LoadBytes.
func Load(path string, opts LoadOptions) (*DAG, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading task YAML: %w", err)
	}
	return LoadBytes(path, data, opts)
}

// LoadBytes parses and validates a task file's contents. name is used in
// error messages (usually the file path). The result is a DAG of one task
// for ordinary files, several for pipelines and job groups. Errors are
// *Error or ErrorList values that name file:line:column and the field.
func LoadBytes(name string, data []byte, opts LoadOptions) (*DAG, error) {
	if !utf8.Valid(data) {
		return nil, &Error{File: name, Msg: "not a valid UTF-8 text file"}
	}
	if err := schemaReady(); err != nil {
		return nil, err
	}
	ov, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	docs, err := splitDocuments(name, data)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, &Error{File: name, Line: 1, Col: 1, Msg: "is empty or contains no task definition. Add at least a `run:` (or `setup:`) field."}
	}
	first := docs[0]
	if len(docs) >= 2 && first.Kind == yaml.MappingNode && mappingString(first, "execution") == string(Parallel) {
		return loadJobGroup(name, docs, ov)
	}
	return loadPipeline(name, docs, ov)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// splitDocuments parses every document and keeps the non-empty ones.
func splitDocuments(name string, data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			msg := err.Error()
			if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
				line, _ := strconv.Atoi(m[1])
				return nil, &Error{File: name, Line: line, Col: 1, Msg: "invalid YAML: " + m[2]}
			}
			return nil, &Error{File: name, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
		}
		if len(doc.Content) == 0 {
			continue
		}
		n := doc.Content[0]
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			continue
		}
		docs = append(docs, n)
	}
	return docs, nil
}

// mappingValue returns the value node of key in mapping n.
func mappingValue(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

func mappingString(n *yaml.Node, key string) string {
	_, v := mappingValue(n, key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

// convertDoc turns a document into plain values with positions.
func convertDoc(file string, n *yaml.Node) (map[string]any, *docSource, error) {
	src := &docSource{file: file, idx: newPosIndex()}
	c := &converter{file: file, idx: src.idx}
	v, err := c.convert(n, "", 0)
	if err != nil {
		return nil, nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		if _, isStr := v.(string); isStr {
			return nil, nil, &Error{File: file, Line: n.Line, Col: n.Column, Msg: "YAML loaded as str, not as dict: a task document must be a mapping of fields (name, resources, run, ...)"}
		}
		return nil, nil, &Error{File: file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf("a task document must be a mapping of fields (name, resources, run, ...), got %s", describe(v))}
	}
	return m, src, nil
}

var pipelineHeaderKeys = map[string]bool{"name": true, "execution": true}

func loadPipeline(file string, docs []*yaml.Node, ov *overrides) (*DAG, error) {
	dag := &DAG{Execution: Serial}
	first := docs[0]
	if isPipelineHeader(first) {
		hm, hsrc, err := convertDoc(file, first)
		if err != nil {
			return nil, err
		}
		name, ok := hm["name"].(string)
		if !ok {
			return nil, hsrc.errAt("name", false, "the pipeline name must be a string, got %s", describe(hm["name"]))
		}
		dag.Name = name
		if ex, has := hm["execution"]; has && ex != string(Serial) {
			if len(docs) == 1 && ex == string(Parallel) {
				return nil, hsrc.errAt("execution", false, "a job group (execution: parallel) needs at least one job document after the header")
			}
			return nil, hsrc.errAt("execution", false, "Invalid execution mode for pipeline: %s. Pipelines run serially (execution: serial, or leave it out). Use execution: parallel for job groups.", describe(ex))
		}
		docs = docs[1:]
		if len(docs) == 0 {
			// A header alone describes one empty task with that name.
			dag.Tasks = []*Task{{Name: name, NumNodes: 1, APIServerAccess: true, src: hsrc}}
			return dag, nil
		}
	}
	var errs ErrorList
	for _, d := range docs {
		t, err := loadTask(file, d, ov)
		if err != nil {
			errs = appendErr(errs, err)
			continue
		}
		dag.Tasks = append(dag.Tasks, t)
	}
	if len(errs) > 0 {
		return nil, errs.asError()
	}
	if len(dag.Tasks) == 1 && dag.Name == "" {
		dag.Name = dag.Tasks[0].Name
	}
	if len(dag.Tasks) > 1 && dag.Name != "" {
		for i, t := range dag.Tasks {
			if t.Name == "" {
				t.Name = fmt.Sprintf("%s-%d", dag.Name, i)
			}
		}
	}
	return dag, nil
}

// isPipelineHeader: the first document's keys are exactly {name} or
// {name, execution}.
func isPipelineHeader(n *yaml.Node) bool {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return false
	}
	hasName := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if !pipelineHeaderKeys[k] {
			return false
		}
		hasName = hasName || k == "name"
	}
	return hasName
}

func appendErr(list ErrorList, err error) ErrorList {
	var l ErrorList
	var e *Error
	switch {
	case errors.As(err, &l):
		return append(list, l...)
	case errors.As(err, &e):
		return append(list, e)
	}
	return append(list, &Error{Msg: err.Error()})
}

var jobNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

var jobGroupHeaderKeys = map[string]bool{"name": true, "execution": true, "primary_tasks": true, "termination_delay": true}

func loadJobGroup(file string, docs []*yaml.Node, ov *overrides) (*DAG, error) {
	hm, hsrc, err := convertDoc(file, docs[0])
	if err != nil {
		return nil, err
	}
	dag := &DAG{Execution: Parallel}
	var errs ErrorList
	keys := sortedKeys(hm)
	for _, k := range keys {
		if !jobGroupHeaderKeys[k] {
			dag.Warnings = append(dag.Warnings, hsrc.errAt(k, true, "job group header field %q is ignored (allowed: name, execution, primary_tasks, termination_delay)", k).Error())
		}
	}
	name, ok := hm["name"].(string)
	switch {
	case hm["name"] == nil:
		errs = append(errs, hsrc.errAt("", false, "a job group header needs a `name`"))
	case !ok || !jobNameRE.MatchString(name):
		errs = append(errs, hsrc.errAt("name", false, "job group name must use only letters, digits, - and _, got %s", describe(hm["name"])))
	}
	dag.Name = name

	seen := map[string]int{}
	for _, d := range docs[1:] {
		t, err := loadTask(file, d, ov)
		if err != nil {
			errs = appendErr(errs, err)
			continue
		}
		switch {
		case t.Name == "":
			errs = append(errs, &Error{File: file, Line: d.Line, Col: d.Column, Msg: "every job in a job group needs a `name`; add name: <job-name> to this document"})
			continue
		case !jobNameRE.MatchString(t.Name):
			errs = append(errs, t.src.errAt("name", false, "job name must use only letters, digits, - and _, got %q", t.Name))
		}
		if line, dup := seen[t.Name]; dup {
			errs = append(errs, t.src.errAt("name", false, "Duplicate job name in JobGroup: %q (first used on line %d); job names must be unique", t.Name, line))
			continue
		}
		seen[t.Name] = t.src.idx.lookup("name", false).Line
		dag.Tasks = append(dag.Tasks, t)
	}

	switch pt := hm["primary_tasks"].(type) {
	case nil:
	case []any:
		for i, p := range pt {
			s, ok := p.(string)
			path := joinIndex("primary_tasks", i)
			if !ok {
				errs = append(errs, hsrc.errAt(path, false, "expected a job name, got %s", describe(p)))
				continue
			}
			if _, exists := seen[s]; !exists && len(seen) > 0 {
				errs = append(errs, hsrc.errAt(path, false, "primary task %q is not a job of this group (jobs: %s)", s, strings.Join(sortedKeys(seen), ", ")))
				continue
			}
			dag.PrimaryTasks = append(dag.PrimaryTasks, s)
		}
	default:
		errs = append(errs, hsrc.errAt("primary_tasks", false, "expected a list of job names, got %s", describe(pt)))
	}

	if td, has := hm["termination_delay"]; has && td != nil {
		delay, tdErrs := parseTerminationDelay(td, hsrc, seen)
		errs = append(errs, tdErrs...)
		dag.TerminationDelay = delay
	}
	if len(errs) > 0 {
		return nil, errs.asError()
	}
	return dag, nil
}

var delayRE = regexp.MustCompile(`^\s*([0-9]+)\s*([smhdw]?)\s*$`)

var delayUnits = map[string]time.Duration{"": time.Second, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}

// ParseDelay parses a termination delay: NUMBER[s|m|h|d|w] (plain number =
// seconds) given as a string or an integer.
func ParseDelay(v any) (time.Duration, error) {
	switch x := v.(type) {
	case int:
		if x < 0 {
			return 0, fmt.Errorf("must not be negative, got %d", x)
		}
		return time.Duration(x) * time.Second, nil
	case string:
		m := delayRE.FindStringSubmatch(x)
		if m == nil {
			return 0, fmt.Errorf("expected NUMBER[s|m|h|d|w] such as 30s, 5m or 1h, got %q", x)
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n > 1<<31 {
			return 0, fmt.Errorf("delay %q is too large", x)
		}
		return time.Duration(n) * delayUnits[m[2]], nil
	}
	return 0, fmt.Errorf("expected NUMBER[s|m|h|d|w] such as 30s, 5m or 1h, got %s", describe(v))
}

func parseTerminationDelay(v any, src *docSource, jobs map[string]int) (TerminationDelay, ErrorList) {
	var td TerminationDelay
	var errs ErrorList
	m, isMap := v.(map[string]any)
	if !isMap {
		d, err := ParseDelay(v)
		if err != nil {
			return td, ErrorList{src.errAt("termination_delay", false, "%v", err)}
		}
		td.Default = d
		return td, nil
	}
	for _, k := range sortedKeys(m) {
		path := joinKey("termination_delay", k)
		d, err := ParseDelay(m[k])
		if err != nil {
			errs = append(errs, src.errAt(path, false, "%v", err))
			continue
		}
		if k == "default" {
			td.Default = d
			continue
		}
		if _, ok := jobs[k]; !ok && len(jobs) > 0 {
			errs = append(errs, src.errAt(path, true, "termination_delay names %q, which is not a job of this group", k))
			continue
		}
		if td.PerJob == nil {
			td.PerJob = map[string]time.Duration{}
		}
		td.PerJob[k] = d
	}
	return td, errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
