package resources

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
)

// Autostop wait_for values: what counts as activity that keeps a cluster
// from being idle.
const (
	WaitForJobsAndSSH = "jobs_and_ssh" // running jobs or open SSH sessions (default)
	WaitForJobs       = "jobs"         // only running jobs
	WaitForNone       = "none"         // nothing: stop after idle_minutes regardless
)

// Autostop is the autostop field. Enabled false is an explicit "no
// autostop" (it cancels one set earlier); a nil *Autostop means the field
// was not given. When Enabled, WaitFor is always filled in.
type Autostop struct {
	Enabled     bool
	IdleMinutes int
	Down        bool   // tear the cluster down instead of stopping it
	WaitFor     string // one of the WaitFor* constants
	// Hook and HookTimeout are the legacy autostop hook: a script run
	// before the stop/down, now a lifecycle hook (see LegacyHookEvent).
	Hook        string
	HookTimeout int // seconds; 0 = the hook default
}

// LegacyHookEvent is the lifecycle hook event the legacy hook turns into.
func (a Autostop) LegacyHookEvent() string {
	if a.Down {
		return "down"
	}
	return "stop"
}

// String is a short human form: "off", "10m", "10m, down".
func (a Autostop) String() string {
	if !a.Enabled {
		return "off"
	}
	s := strconv.Itoa(a.IdleMinutes) + "m"
	if a.Down {
		s += ", down"
	}
	if a.WaitFor != WaitForJobsAndSSH {
		s += ", wait_for=" + a.WaitFor
	}
	return s
}

func (a Autostop) toValue() any {
	if !a.Enabled {
		return false
	}
	m := map[string]any{"idle_minutes": a.IdleMinutes, "down": a.Down, "wait_for": a.WaitFor}
	if a.Hook != "" {
		m["hook"] = a.Hook
	}
	if a.HookTimeout != 0 {
		m["hook_timeout"] = a.HookTimeout
	}
	return m
}

var autostopKeys = []string{"idle_minutes", "down", "wait_for", "hook", "hook_timeout"}

// autostopDuration is "N" or "N<unit>", unit m (default), h, d or w.
var autostopDuration = regexp.MustCompile(`^(\d+)\s*([mMhHdDwW]?)$`)

var minutesPer = map[string]int{"": 1, "m": 1, "h": 60, "d": 24 * 60, "w": 7 * 24 * 60}

// parseAutostop reads false, true, minutes, "10m"/"1h"/"2d"/"1w" or a
// mapping {idle_minutes, down, wait_for, hook, hook_timeout}.
func parseAutostop(v any, path string) (*Autostop, error) {
	on := &Autostop{Enabled: true, WaitFor: WaitForJobsAndSSH}
	switch x := v.(type) {
	case bool:
		if !x {
			return &Autostop{}, nil
		}
		return on, nil
	case string:
		m := autostopDuration.FindStringSubmatch(strings.TrimSpace(x))
		if m == nil {
			return nil, fielderr.New(path, fmt.Sprintf(`autostop string must be minutes with an optional unit m, h, d or w (e.g. "30", "10m", "1h"); got %q`, x))
		}
		n, err := strconv.Atoi(m[1])
		unit := minutesPer[strings.ToLower(m[2])]
		if err != nil || n > (1<<31-1)/unit {
			return nil, fielderr.New(path, fmt.Sprintf("autostop %q is too long", x))
		}
		on.IdleMinutes = n * unit
		return on, nil
	}
	if n, ok := toInt(v); ok {
		if n < 0 {
			return nil, fielderr.New(path, fmt.Sprintf("autostop idle minutes must be >= 0, got %d (use false to disable autostop)", n))
		}
		on.IdleMinutes = n
		return on, nil
	}
	m, ok := asMap(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("autostop must be true/false, idle minutes (e.g. 10 or \"1h\") or a mapping with idle_minutes, down, wait_for; got %s", kindOf(v)))
	}
	if err := checkKeys(m, autostopKeys, path, "autostop"); err != nil {
		return nil, err
	}
	if x, ok := m["idle_minutes"]; ok && x != nil {
		n, ok := toInt(x)
		if !ok || n < 0 {
			return nil, fielderr.New(join(path, "idle_minutes"), fmt.Sprintf("idle_minutes must be an integer >= 0, got %v", x))
		}
		on.IdleMinutes = n
	}
	if x, ok := m["down"]; ok && x != nil {
		b, err := getBool(x, join(path, "down"))
		if err != nil {
			return nil, err
		}
		on.Down = b
	}
	if x, ok := m["wait_for"]; ok && x != nil {
		s, _ := x.(string)
		w := strings.ToLower(strings.TrimSpace(s))
		if w != WaitForJobsAndSSH && w != WaitForJobs && w != WaitForNone {
			return nil, fielderr.New(join(path, "wait_for"), fmt.Sprintf("wait_for must be one of jobs_and_ssh, jobs, none (case-insensitive); got %v", x))
		}
		on.WaitFor = w
	}
	if x, ok := m["hook"]; ok && x != nil {
		s, err := getString(x, join(path, "hook"))
		if err != nil {
			return nil, err
		}
		on.Hook = s
	}
	if x, ok := m["hook_timeout"]; ok && x != nil {
		n, ok := toInt(x)
		if !ok || n < 1 {
			return nil, fielderr.New(join(path, "hook_timeout"), fmt.Sprintf("hook_timeout must be an integer number of seconds >= 1, got %v", x))
		}
		on.HookTimeout = n
	}
	return on, nil
}
