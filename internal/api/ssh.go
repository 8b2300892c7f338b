package api

import "time"

// SSHPoolRecord is what the last `sky ssh up` learnt about one SSH node pool;
// /ssh_up returns them.
type SSHPoolRecord struct {
	Pool     string          `json:"pool"`
	ProbedAt time.Time       `json:"probed_at"`
	Hosts    []SSHHostRecord `json:"hosts"`
}

// SSHHostRecord is one probed host. Error is set when the host could not
// be used (unreachable, auth refused, wrong OS/arch, install failed).
type SSHHostRecord struct {
	Name     string         `json:"name"`
	Address  string         `json:"address,omitempty"` // user@addr:port
	Error    string         `json:"error,omitempty"`
	OS       string         `json:"os,omitempty"`
	Arch     string         `json:"arch,omitempty"`
	CPUs     int            `json:"cpus,omitempty"`
	MemoryGB float64        `json:"memory_gb,omitempty"`
	GPUs     map[string]int `json:"gpus,omitempty"`
	// Binary is "copied" or "up to date" (the node runtime at ~/.sky/bin/sky-node).
	Binary string `json:"binary,omitempty"`
}

// Ready says whether the host can take clusters.
func (h SSHHostRecord) Ready() bool { return h.Error == "" }
