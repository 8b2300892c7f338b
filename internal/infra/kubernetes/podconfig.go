package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/skygo/skygo/internal/editdist"
	"github.com/skygo/skygo/internal/fielderr"
)

// Lists whose items are matched by their "name" and merged, instead of
// appended (config.md). An unnamed item is appended, except that an
// unnamed container merges into the first container: pod_config fragments
// usually patch the one container SkyGo creates without naming it.
var namedLists = map[string]bool{
	"containers": true, "initContainers": true, "volumes": true,
	"volumeMounts": true, "env": true, "ports": true,
}

// Lists an overlay replaces: appending to a command would make a new one.
var atomicLists = map[string]bool{"command": true, "args": true}

// mergePodConfig merges a kubernetes.pod_config fragment into pod the way
// SkyPilot does: mappings merge recursively, lists are appended, named lists
// merge items by name, imagePullSecrets merges its first item, command and
// args are replaced, an empty list or null replaces. The fragment is checked
// against the Pod type first, so an unknown field or a value of the wrong
// type is reported with its path (a *fielderr.Error) and pod is unchanged.
func mergePodConfig(pod *corev1.Pod, overlay map[string]any) error {
	if len(overlay) == 0 {
		return nil
	}
	over, err := normalize(overlay, "")
	if err != nil {
		return err
	}
	if err := checkType(reflect.TypeFor[corev1.Pod](), over, ""); err != nil {
		return err
	}
	base, err := toMap(pod)
	if err != nil {
		return err
	}
	mergeMaps(base, over.(map[string]any))
	raw, err := json.Marshal(base)
	if err != nil {
		return fmt.Errorf("encoding the merged pod: %w", err)
	}
	var merged corev1.Pod
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&merged); err != nil {
		return fmt.Errorf("decoding the merged pod: %w", err)
	}
	*pod = merged
	return nil
}

func toMap(pod *corev1.Pod) (map[string]any, error) {
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encoding pod %s: %w", pod.Name, err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decoding pod %s: %w", pod.Name, err)
	}
	return m, nil
}

func mergeMaps(base, over map[string]any) {
	for k, ov := range over {
		switch o := ov.(type) {
		case map[string]any:
			if b, ok := base[k].(map[string]any); ok {
				mergeMaps(b, o)
			} else {
				base[k] = o
			}
		case []any:
			b, ok := base[k].([]any)
			if !ok || len(b) == 0 || len(o) == 0 || atomicLists[k] {
				base[k] = o
				continue
			}
			base[k] = mergeLists(k, b, o)
		default:
			base[k] = ov
		}
	}
}

func mergeLists(key string, base, over []any) []any {
	if key == "imagePullSecrets" {
		if b, ok := base[0].(map[string]any); ok {
			if o, ok := over[0].(map[string]any); ok {
				mergeMaps(b, o)
				return append(base, over[1:]...)
			}
		}
		return append(base, over...)
	}
	if !namedLists[key] {
		return append(base, over...)
	}
	for _, item := range over {
		o, ok := item.(map[string]any)
		if !ok {
			base = append(base, item)
			continue
		}
		target := -1
		if name, ok := o["name"].(string); ok {
			target = slices.IndexFunc(base, func(b any) bool {
				bm, ok := b.(map[string]any)
				return ok && bm["name"] == name
			})
		} else if key == "containers" {
			target = 0
		}
		if target < 0 {
			base = append(base, o)
			continue
		}
		if b, ok := base[target].(map[string]any); ok {
			mergeMaps(b, o)
		} else {
			base[target] = o
		}
	}
	return base
}

// normalize copies v into the shapes encoding/json produces, so the merge
// has only map[string]any and []any to deal with whatever YAML decoder made
// the config, and so merging never aliases the caller's config (the same
// pod_config is applied to every pod of a cluster).
func normalize(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalize(e, joinKey(path, k))
			if err != nil {
				return nil, err
			}
			m[k] = n
		}
		return m, nil
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, fielderr.New(path, fmt.Sprintf("key %v is not a string; quote it", k))
			}
			n, err := normalize(e, joinKey(path, ks))
			if err != nil {
				return nil, err
			}
			m[ks] = n
		}
		return m, nil
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			n, err := normalize(e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			l[i] = n
		}
		return l, nil
	case []map[string]any:
		l := make([]any, len(x))
		for i, e := range x {
			n, err := normalize(e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			l[i] = n
		}
		return l, nil
	case []string:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return l, nil
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = e
		}
		return m, nil
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64,
		float32, float64, json.Number:
		return x, nil
	}
	return nil, fielderr.New(path, fmt.Sprintf("unsupported value of type %T", v))
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkType reports the first place where v (normalized) does not fit Go
// type t the way encoding/json would decode it. null is accepted anywhere:
// it clears the field.
func checkType(t reflect.Type, v any, path string) error {
	if v == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// Quantities, IntOrString, times: let their own decoder judge.
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		raw, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(raw, reflect.New(t).Interface())
		}
		if err != nil {
			return fielderr.New(path, fmt.Sprintf("invalid value %s: %v", describe(v), err))
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return wrongType(path, "a mapping", v)
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ft, ok := fields[k]
			if !ok {
				return fielderr.New(joinKey(path, k), "unknown field"+suggest(k, fields))
			}
			if err := checkType(ft, m[k], joinKey(path, k)); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return wrongType(path, "a mapping", v)
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := checkType(t.Elem(), m[k], joinKey(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			if _, ok := v.(string); !ok {
				return wrongType(path, "a base64 string", v)
			}
			return nil
		}
		l, ok := v.([]any)
		if !ok {
			return wrongType(path, "a list", v)
		}
		for i, e := range l {
			if err := checkType(t.Elem(), e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return wrongType(path, "a string (quote numbers and booleans)", v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrongType(path, "true or false", v)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !isInteger(v) {
			return wrongType(path, "an integer", v)
		}
		raw, _ := json.Marshal(v)
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return fielderr.New(path, fmt.Sprintf("%s is out of range", describe(v)))
		}
	case reflect.Float32, reflect.Float64:
		if !isNumber(v) {
			return wrongType(path, "a number", v)
		}
	case reflect.Interface:
	default:
		return fielderr.New(path, fmt.Sprintf("internal error: cannot check field of type %s", t))
	}
	return nil
}

// jsonFields maps the JSON names of t's fields, inlined structs included,
// to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" || strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				maps.Copy(out, jsonFields(ft))
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func suggest(k string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if d := editdist.OSA(strings.ToLower(k), strings.ToLower(name)); d < bestD {
			best, bestD = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func wrongType(path, want string, v any) error {
	return fielderr.New(path, fmt.Sprintf("want %s, got %s", want, describe(v)))
}

func describe(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return strconv.Quote(x)
	}
	return fmt.Sprint(v)
}

func isNumber(v any) bool {
	switch x := v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return true
	case json.Number:
		_, err := x.Float64()
		return err == nil
	}
	return false
}

func isInteger(v any) bool {
	switch x := v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	case float32:
		return float64(x) == float64(int64(x))
	case float64:
		return x == float64(int64(x))
	case json.Number:
		_, err := x.Int64()
		return err == nil
	}
	return false
}
