// Package agentapi is the node agent's protocol: what `sky agent <verb>
// --json` reads on stdin and prints on stdout. The backend writes and
// reads these records through any CommandRunner, the CLI shows the job
// rows the API server passes on, and the agent serves them; all three
// import this package rather than the agent itself, so a change to a
// field is a change in one place. It imports only provision (whose
// ClusterInfo a Config is built from).
//
// Field names follow SkyPilot (`sky queue -o json`, runtime.md); they are
// the contract with tools that read our JSON.
package agentapi

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

// MetaGitCommit is the job metadata key of the workdir's git commit
// (`sky queue`'s GIT COMMIT).
const MetaGitCommit = "git_commit"

// SubmitResult is what `sky agent submit` prints.
type SubmitResult struct {
	JobID int `json:"job_id"`
}

// Job is one row of the job table as verbs report it (`sky agent queue`
// prints a list of them, `status` includes them). The API server passes
// them on unchanged, so they are also the rows of `sky queue -o json`.
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

// CancelResult is what `sky agent cancel` prints, and what the API
// server's cancel operation returns.
type CancelResult struct {
	Cancelled []int `json:"cancelled"`
}

// StatusReport is what `sky agent status` prints.
type StatusReport struct {
	Daemon   DaemonHealth    `json:"daemon"`
	Autostop *AutostopStatus `json:"autostop,omitempty"`
	Jobs     []Job           `json:"jobs"`
}

// DaemonHealth says whether the head's daemon answers.
type DaemonHealth struct {
	Alive     bool    `json:"alive"`
	Pid       int     `json:"pid,omitempty"`
	StartedAt float64 `json:"started_at,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// Failure is what a verb prints instead of its answer when it fails (exit
// code 1, or 2 for a bad command line). Code is stable ("bad_request",
// "agent_not_running", "internal"); Error is for people.
type Failure struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}
