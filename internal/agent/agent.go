// Package agent is the node runtime: the job table, the gang scheduler,
// rank processes, logs and autostop, driven through the hidden
// `sky agent <verb> --json` command on each node.
//
// # How the backend drives it
//
// Every verb prints one JSON value on stdout ({"error": ..., "code": ...}
// with exit code 1 on failure), so it works through any CommandRunner:
//
//	sky agent start --json  < config.json    # on every node; idempotent
//	sky agent submit --json < job.json       # on the head: {"job_id": 3}
//	sky agent queue --json [--skip-finished]
//	sky agent status --json [JOB_ID...]      # statuses + daemon health
//	sky agent cancel --json (JOB_ID... | --all) [--user-hash H]
//	sky agent logs [--job N] [--rank R] [--follow] [--tail N]  # raw text; exit code per runtime.md
//	sky agent set-autostop --json --idle-minutes N [--down] [--wait-for M] [--hook CMD] [--hook-timeout S]
//	sky agent stop-daemon --json
//
// Config (see Config) lists the cluster's nodes head first, how the head
// reaches each node (Transport) and this node's index. On the head,
// `start` spawns a daemon (one per node HOME, guarded by a lock file and a
// unix socket in ~/.sky/agent/); on workers it only records the config:
// ranks on workers are started by the head through the worker's runner
// with `sky agent exec-rank` (spec on stdin) and killed with
// `sky agent kill-rank`, so an SSH or Kubernetes transport plugs in by
// implementing NodeRunner.
//
// # Jobs
//
// The job table is SQLite in ~/.sky/agent/jobs.db; the daemon is its only
// writer and read-only verbs (queue, status, logs) open it directly, so they
// answer even when the daemon is down. submit talks to the daemon over the
// socket; the daemon inserts the row and dispatches within milliseconds.
// Setup is a phase of the job (detached setup, SETTING_UP, FAILED_SETUP
// on failure) when the spec carries one; the backend runs non-detached
// setup itself before submitting (exec-rank can do it per node).
//
// Scheduling is strict FIFO with gang placement (Schedule): a job needing
// N nodes starts only when N nodes have its CPU demand (default 0.5) and
// GPUs free; later jobs never overtake it. If the daemon dies, a restarted
// daemon kills what is left of the jobs it was running and marks them
// FAILED_DRIVER; pending jobs are kept.
package agent

import (
	"fmt"
	"time"
)

// Status is a cluster job status (runtime.md §Cluster job statuses).
type Status string

// Job statuses, in SkyPilot's order.
const (
	StatusInit         Status = "INIT"
	StatusPending      Status = "PENDING"
	StatusSettingUp    Status = "SETTING_UP"
	StatusRunning      Status = "RUNNING"
	StatusFailedDriver Status = "FAILED_DRIVER"
	StatusSucceeded    Status = "SUCCEEDED"
	StatusFailed       Status = "FAILED"
	StatusFailedSetup  Status = "FAILED_SETUP"
	StatusCancelled    Status = "CANCELLED"
)

// Terminal reports whether no further transition is possible.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusFailedSetup, StatusFailedDriver, StatusCancelled:
		return true
	}
	return false
}

// transitions is the status machine; terminal statuses have no entry.
var transitions = map[Status][]Status{
	StatusInit:      {StatusPending, StatusCancelled, StatusFailedDriver},
	StatusPending:   {StatusSettingUp, StatusRunning, StatusCancelled, StatusFailedDriver},
	StatusSettingUp: {StatusRunning, StatusFailedSetup, StatusCancelled, StatusFailedDriver},
	StatusRunning:   {StatusSucceeded, StatusFailed, StatusCancelled, StatusFailedDriver},
}

// CanTransition reports whether a job may move from one status to another.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// ExitCode is the exit code `sky logs --status` uses for a job status:
// 0 succeeded, 100 failed, 101 not finished, 103 cancelled (102, job not
// found, is ExitNotFound).
func (s Status) ExitCode() int {
	switch s {
	case StatusSucceeded:
		return 0
	case StatusFailed, StatusFailedSetup, StatusFailedDriver:
		return 100
	case StatusCancelled:
		return 103
	}
	return 101
}

// ExitNotFound is the `sky logs` exit code for a job that does not exist.
const ExitNotFound = 102

// DefaultCPUDemand is the per-node CPU a job reserves when it asks for none.
const DefaultCPUDemand = 0.5

// JobSpec is what `sky agent submit` reads on stdin.
type JobSpec struct {
	Name  string `json:"name"`
	Run   string `json:"run"`
	Setup string `json:"setup,omitempty"`
	// Envs and Secrets are exported to setup and run. Secrets are stored
	// in the node's job table (0600) and never printed by any verb.
	Envs    map[string]string `json:"envs,omitempty"`
	Secrets map[string]string `json:"secrets,omitempty"`
	// NumNodes defaults to 1.
	NumNodes int `json:"num_nodes,omitempty"`
	// CPUs is the per-node CPU demand; nil means DefaultCPUDemand.
	CPUs *float64 `json:"cpus,omitempty"`
	// GPUs per node by accelerator name, e.g. {"A100": 0.5}.
	GPUs     map[string]float64 `json:"gpus,omitempty"`
	User     string             `json:"user,omitempty"`
	UserHash string             `json:"user_hash,omitempty"`
	// RunTimestamp names the log dir ~/sky_logs/<run_timestamp>; generated
	// (sky-YYYY-MM-DD-HH-MM-SS-ffffff) when empty.
	RunTimestamp string `json:"run_timestamp,omitempty"`
	// TaskID overrides SKYPILOT_TASK_ID (managed jobs keep theirs).
	TaskID   string         `json:"task_id,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// SubmitKey makes submit idempotent: a second submit with the same key
	// returns the first job's id.
	SubmitKey string `json:"submit_key,omitempty"`
}

// Job is one row of the job table as verbs report it. Field names follow
// `sky queue -o json`.
type Job struct {
	JobID         int            `json:"job_id"`
	JobName       string         `json:"job_name"`
	Username      string         `json:"username"`
	UserHash      string         `json:"user_hash"`
	SubmittedAt   float64        `json:"submitted_at"`
	StartAt       *float64       `json:"start_at"`
	EndAt         *float64       `json:"end_at"`
	Resources     string         `json:"resources"`
	Status        Status         `json:"status"`
	LogPath       string         `json:"log_path"`
	Metadata      map[string]any `json:"metadata"`
	NumNodes      int            `json:"num_nodes"`
	ReturnCodes   []int          `json:"return_codes,omitempty"`
	FailureReason string         `json:"failure_reason,omitempty"`
	// Nodes are the cluster node indexes the job runs on, by rank.
	Nodes []int `json:"nodes,omitempty"`
	// Pids are the rank processes (process group leaders), by rank.
	Pids []int `json:"pids,omitempty"`
}

// unixSeconds is the time format of the job table and of -o json.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// runTimestamp formats t like SkyPilot's log dir names.
func runTimestamp(t time.Time) string {
	return "sky-" + t.Format("2006-01-02-15-04-05") + fmt.Sprintf("-%06d", t.Nanosecond()/1000)
}
