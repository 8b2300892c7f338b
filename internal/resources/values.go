package resources

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/editdist"
	"github.com/skygo/skygo/internal/fielderr"
)

// This file holds the small helpers that read values decoded from YAML or
// JSON into `any`. yaml.v3 gives int for integers and float64 for floats;
// encoding/json gives float64 for every number, so integer fields accept an
// integral float64 too.

// kindOf names the type of a decoded value for error messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return "a number"
	case []any, []string:
		return "a list"
	case map[string]any, map[any]any, map[string]string:
		return "a mapping"
	}
	return fmt.Sprintf("a %T", v)
}

// asMap returns v as a string-keyed mapping. yaml.v3 decodes a mapping with
// any non-string key (a null or a number) into map[any]any; such keys are
// turned into strings here, and a null key becomes "" (image_id uses a null
// key for "any region").
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[string]string:
		out := make(map[string]any, len(m))
		for k, val := range m {
			out[k] = val
		}
		return out, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, val := range m {
			if k == nil {
				out[""] = val
			} else {
				out[fmt.Sprint(k)] = val
			}
		}
		return out, true
	}
	return nil, false
}

// asList returns v as a list of values.
func asList(v any) ([]any, bool) {
	switch l := v.(type) {
	case []any:
		return l, true
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

// sortedKeys returns the keys of m in order, so that the first error
// reported for a mapping does not depend on Go's map iteration order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// toFloat reads a number. Booleans are not numbers here even though YAML
// 1.1 tools sometimes treat them so.
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float32:
		return float64(n), !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0)
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	}
	return 0, false
}

// toInt reads an integer; an integral float (from JSON) counts.
func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	case uint64:
		if n > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	}
	f, ok := toFloat(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// parseNumber reads a float from a string, refusing NaN and infinities
// that strconv would otherwise accept.
func parseNumber(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// formatNumber prints a float without a trailing ".0" (4 not 4.0, 0.5).
func formatNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// getString reads a string field.
func getString(v any, path string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fielderr.New(path, fmt.Sprintf("expected a string, got %s", kindOf(v)))
	}
	return s, nil
}

// getBool reads a boolean field.
func getBool(v any, path string) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, fielderr.New(path, fmt.Sprintf("expected true or false, got %s", kindOf(v)))
	}
	return b, nil
}

// checkKeys rejects keys of m that are not in allowed, suggesting the
// closest allowed key. what names the mapping in the message.
func checkKeys(m map[string]any, allowed []string, path, what string) error {
	for _, k := range sortedKeys(m) {
		if contains(allowed, k) {
			continue
		}
		msg := fmt.Sprintf("unknown field %q in %s", k, what)
		if s := suggest(k, allowed); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else {
			msg += "; valid fields: " + strings.Join(allowed, ", ")
		}
		return fielderr.New(join(path, k), msg)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// join builds a field path: join("any_of[1]", "cpus") = "any_of[1].cpus".
func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	if strings.HasPrefix(key, "[") {
		return prefix + key
	}
	return prefix + "." + key
}

func index(prefix string, i int) string {
	return fmt.Sprintf("%s[%d]", prefix, i)
}

// suggest returns the candidate closest to s by edit distance, or "" when
// nothing is close enough to be a plausible typo (more than half of the
// word would have to change).
func suggest(s string, candidates []string) string {
	best, bestDist := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := editdist.OSA(ls, strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := max(len(s), len(best)) / 2
	if bestDist < 0 || bestDist > limit || bestDist > 5 {
		return ""
	}
	return best
}
