package resources

import (
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
)

// Recovery strategies known to SkyGo's managed jobs.
const (
	RecoveryEagerNextRegion = "EAGER_NEXT_REGION" // default for managed jobs
	RecoveryFailover        = "FAILOVER"
	RecoveryNone            = "NONE" // `job_recovery: none`: do not recover
)

// JobRecovery is the job_recovery field of a managed job.
type JobRecovery struct {
	// Strategy is upper-cased; "" means the managed-jobs default.
	Strategy string
	// MaxRestartsOnErrors is how many user-code failures are restarted.
	MaxRestartsOnErrors int
	// RecoverOnExitCodes always restart (without using the budget).
	RecoverOnExitCodes []int
	// Extra holds other keys, which plugins may register; the server
	// validates them, so the parser passes them through.
	Extra map[string]any
}

// Disabled reports whether recovery was turned off with `none`.
func (j JobRecovery) Disabled() bool { return j.Strategy == RecoveryNone }

func (j JobRecovery) copy() *JobRecovery {
	out := j
	out.RecoverOnExitCodes = append([]int(nil), j.RecoverOnExitCodes...)
	if j.Extra != nil {
		out.Extra = make(map[string]any, len(j.Extra))
		for k, v := range j.Extra {
			out.Extra[k] = v
		}
	}
	return &out
}

// toValue is always the mapping form, so both input spellings of one
// strategy print the same.
func (j JobRecovery) toValue() map[string]any {
	m := make(map[string]any, 3+len(j.Extra))
	for k, v := range j.Extra {
		m[k] = v
	}
	if j.Strategy != "" {
		m["strategy"] = j.Strategy
	}
	if j.MaxRestartsOnErrors != 0 {
		m["max_restarts_on_errors"] = j.MaxRestartsOnErrors
	}
	if len(j.RecoverOnExitCodes) > 0 {
		codes := make([]any, len(j.RecoverOnExitCodes))
		for i, c := range j.RecoverOnExitCodes {
			codes[i] = c
		}
		m["recover_on_exit_codes"] = codes
	}
	return m
}

func (j JobRecovery) String() string {
	s := j.Strategy
	if s == "" {
		s = "default"
	}
	if j.MaxRestartsOnErrors > 0 {
		s += fmt.Sprintf(", max_restarts_on_errors=%d", j.MaxRestartsOnErrors)
	}
	if len(j.RecoverOnExitCodes) > 0 {
		s += fmt.Sprintf(", recover_on_exit_codes=%v", j.RecoverOnExitCodes)
	}
	return s
}

// parseJobRecovery reads a strategy name or a mapping {strategy,
// max_restarts_on_errors, recover_on_exit_codes, ...}.
func parseJobRecovery(v any, path string) (*JobRecovery, error) {
	if s, ok := v.(string); ok {
		st, err := parseStrategy(s, path)
		if err != nil {
			return nil, err
		}
		return &JobRecovery{Strategy: st}, nil
	}
	m, ok := asMap(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("job_recovery must be a strategy name (EAGER_NEXT_REGION, FAILOVER, none) or a mapping with strategy, max_restarts_on_errors, recover_on_exit_codes; got %s", kindOf(v)))
	}
	j := &JobRecovery{}
	for _, k := range sortedKeys(m) {
		val := m[k]
		p := join(path, k)
		switch k {
		case "strategy":
			if val == nil {
				continue
			}
			s, err := getString(val, p)
			if err != nil {
				return nil, err
			}
			if j.Strategy, err = parseStrategy(s, p); err != nil {
				return nil, err
			}
		case "max_restarts_on_errors":
			if val == nil {
				continue
			}
			n, ok := toInt(val)
			if !ok || n < 0 {
				return nil, fielderr.New(p, fmt.Sprintf("max_restarts_on_errors must be an integer >= 0, got %v", val))
			}
			j.MaxRestartsOnErrors = n
		case "recover_on_exit_codes":
			codes, err := parseExitCodes(val, p)
			if err != nil {
				return nil, err
			}
			j.RecoverOnExitCodes = codes
		default:
			if j.Extra == nil {
				j.Extra = map[string]any{}
			}
			j.Extra[k] = val
		}
	}
	return j, nil
}

func parseStrategy(s, path string) (string, error) {
	st := strings.ToUpper(strings.TrimSpace(s))
	if st == "" {
		return "", fielderr.New(path, "empty job recovery strategy; use EAGER_NEXT_REGION, FAILOVER or none")
	}
	return st, nil
}

// parseExitCodes reads one exit code or a list of unique ones, each 0..255.
func parseExitCodes(v any, path string) ([]int, error) {
	if v == nil {
		return nil, nil
	}
	items, isList := asList(v)
	if !isList {
		items = []any{v}
	}
	var codes []int
	seen := map[int]bool{}
	for i, item := range items {
		p := path
		if isList {
			p = index(path, i)
		}
		n, ok := toInt(item)
		if !ok || n < 0 || n > 255 {
			return nil, fielderr.New(p, fmt.Sprintf("exit codes must be integers 0..255, got %v", item))
		}
		if seen[n] {
			return nil, fielderr.New(p, fmt.Sprintf("exit code %d is listed twice", n))
		}
		seen[n] = true
		codes = append(codes, n)
	}
	return codes, nil
}
