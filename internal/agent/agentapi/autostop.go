package agentapi

import "time"

// Autostop wait_for modes (runtime.md §Autostop).
const (
	WaitJobsAndSSH = "jobs_and_ssh"
	WaitJobs       = "jobs"
	WaitNone       = "none"
)

// HookEvents are the lifecycle hook events (runtime.md: the values of
// SKYPILOT_HOOK_EVENT); each has its log at ~/.sky/hooks/<event>.log.
var HookEvents = []string{"stop", "preemption", "down"}

// AutostopConfig is the cluster's autostop setting as set-autostop takes
// it. IdleMinutes < 0 disables autostop.
type AutostopConfig struct {
	IdleMinutes int    `json:"idle_minutes"`
	Down        bool   `json:"down"`
	WaitFor     string `json:"wait_for,omitempty"`
	// Hook is a shell command run before stopping (event stop or down),
	// killed after HookTimeout seconds (default 3600); its output is in
	// ~/.sky/hooks/<event>.log.
	Hook        string `json:"hook,omitempty"`
	HookTimeout int    `json:"hook_timeout,omitempty"`
	// IdleSeconds, when set, overrides IdleMinutes (tests, fine control).
	IdleSeconds int `json:"idle_seconds,omitempty"`
}

// AutostopStatus is what status reports about autostop.
type AutostopStatus struct {
	AutostopConfig
	SetAt float64 `json:"set_at"`
	// Autostopping is true once the idle time passed and the stop action
	// was started.
	Autostopping bool     `json:"autostopping"`
	FiredAt      *float64 `json:"fired_at,omitempty"`
	HookLog      string   `json:"hook_log,omitempty"`
	ActionLog    string   `json:"action_log,omitempty"`
}

// Idle is how long the cluster must be idle before autostop fires.
func (a AutostopConfig) Idle() time.Duration {
	if a.IdleSeconds > 0 {
		return time.Duration(a.IdleSeconds) * time.Second
	}
	return time.Duration(a.IdleMinutes) * time.Minute
}

// Enabled reports whether autostop is set at all.
func (a AutostopConfig) Enabled() bool { return a.IdleMinutes >= 0 || a.IdleSeconds > 0 }
