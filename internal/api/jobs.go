package api

// Managed jobs: the bodies and results of /jobs/launch, /jobs/queue,
// /jobs/cancel, /jobs/logs and /jobs/events (spec/managed-jobs.md). A
// managed job is one DAG: a single task, a serial pipeline or a parallel
// job group; each task has its own status, the job its schedule state.

// Managed task statuses (ManagedJobStatus), in SkyPilot's enum order.
const (
	ManagedPending          = "PENDING"
	ManagedSubmitted        = "SUBMITTED" // only parsed, never written
	ManagedStarting         = "STARTING"
	ManagedRunning          = "RUNNING"
	ManagedWindingDown      = "WINDING_DOWN"
	ManagedRecovering       = "RECOVERING"
	ManagedCancelling       = "CANCELLING"
	ManagedSucceeded        = "SUCCEEDED"
	ManagedCancelled        = "CANCELLED"
	ManagedFailed           = "FAILED"
	ManagedFailedSetup      = "FAILED_SETUP"
	ManagedFailedPrechecks  = "FAILED_PRECHECKS"
	ManagedFailedNoResource = "FAILED_NO_RESOURCE"
	ManagedFailedController = "FAILED_CONTROLLER"
)

// ManagedStatuses lists every managed status in enum order.
var ManagedStatuses = []string{ManagedPending, ManagedSubmitted, ManagedStarting, ManagedRunning, ManagedWindingDown,
	ManagedRecovering, ManagedCancelling, ManagedSucceeded, ManagedCancelled, ManagedFailed, ManagedFailedSetup,
	ManagedFailedPrechecks, ManagedFailedNoResource, ManagedFailedController}

// ManagedTerminal says whether a managed status is final.
func ManagedTerminal(s string) bool {
	switch s {
	case ManagedSucceeded, ManagedCancelled, ManagedFailed, ManagedFailedSetup, ManagedFailedPrechecks,
		ManagedFailedNoResource, ManagedFailedController:
		return true
	}
	return false
}

// ManagedFailure says whether a managed status is one of the five FAILED_*.
func ManagedFailure(s string) bool {
	return ManagedTerminal(s) && s != ManagedSucceeded && s != ManagedCancelled
}

// Schedule states of a managed job (ManagedJobScheduleState).
const (
	ScheduleInactive     = "INACTIVE"
	ScheduleWaiting      = "WAITING"
	ScheduleLaunching    = "LAUNCHING"
	ScheduleAlive        = "ALIVE"
	ScheduleAliveWaiting = "ALIVE_WAITING"
	ScheduleAliveBackoff = "ALIVE_BACKOFF"
	ScheduleDone         = "DONE"
)

// JobsLaunchBody is the body of /jobs/launch. Tasks are the DAG's tasks
// in order, each resolved by the client as for /launch (uploads
// included); the resources of each carry priority and job_recovery.
type JobsLaunchBody struct {
	Tasks []TaskSpec `json:"tasks"`
	// DAGYAML, instead of Tasks, is what `sky jobs launch` accepts as a
	// file (one task, a pipeline or a job group), as the Python SDK sends
	// it: the server loads and resolves it into Tasks and the header
	// fields, as the CLI does. UploadIDs has one entry per task, in
	// document order ("" for a task with no local files).
	DAGYAML   string   `json:"dag_yaml,omitempty"`
	UploadIDs []string `json:"upload_ids,omitempty"`
	// Name is the DAG's name (-n wins over the YAML).
	Name string `json:"name,omitempty"`
	// Execution is "serial" (one task or a pipeline) or "parallel" (a
	// job group).
	Execution string `json:"execution,omitempty"`
	// PrimaryTasks and TerminationDelay are a job group's header fields;
	// TerminationDelay maps a task name (or "default") to a duration
	// like 30s or 5m.
	PrimaryTasks     []string          `json:"primary_tasks,omitempty"`
	TerminationDelay map[string]string `json:"termination_delay,omitempty"`
	Pool             string            `json:"pool,omitempty"`
	// NumJobs > 1 submits that many jobs (an array); each gets its rank.
	NumJobs   int   `json:"num_jobs,omitempty"`
	DependsOn []int `json:"depends_on,omitempty"`
	// JobGroup attaches the job to another job, by id or unique running
	// job name: it is shown under it and cancelled with it.
	JobGroup string `json:"job_group,omitempty"`
	// YAML is the DAG as the user wrote it, secrets redacted (user_yaml).
	YAML    string `json:"user_yaml,omitempty"`
	Command string `json:"entrypoint_command,omitempty"`
	// EnvVars are the client's settings for this request (ClientEnv).
	EnvVars map[string]string `json:"env_vars,omitempty"`
}

// JobsLaunchResult is what /jobs/launch returns.
type JobsLaunchResult struct {
	JobIDs []int  `json:"job_ids"`
	Name   string `json:"name"`
}

// JobsQueueBody is the body of /jobs/queue.
type JobsQueueBody struct {
	SkipFinished bool     `json:"skip_finished,omitempty"`
	AllUsers     bool     `json:"all_users,omitempty"`
	Statuses     []string `json:"statuses,omitempty"`
	JobIDs       []int    `json:"job_ids,omitempty"`
	// Limit caps the number of jobs (not task rows); 0 is no limit.
	Limit int `json:"limit,omitempty"`
	// BelowJobID, when set, lists only jobs with smaller ids: the cursor
	// of a listing read a page (Limit jobs) at a time, newest first; the
	// next page starts below the last job of this one. Total and
	// InProgress are the first page's (no cursor): they count every job
	// the other fields select, and a page below a cursor leaves them out
	// (with Infra, Total is the jobs below the cursor).
	BelowJobID int `json:"below_job_id,omitempty"`
	// After and Before bound submitted_at (epoch seconds; 0 = open).
	After  float64 `json:"after,omitempty"`
	Before float64 `json:"before,omitempty"`
	// Infra filters by where tasks run: cloud, cloud/region, ...
	Infra string `json:"infra,omitempty"`
	// Verbose fetches the fields of -v (details, schedule_state, ...).
	Verbose bool   `json:"verbose,omitempty"`
	Pool    string `json:"pool,omitempty"`
	// HiddenWorkspaces are the private workspaces the caller may not
	// see; the server sets them, a client cannot.
	HiddenWorkspaces []string `json:"-"`
}

// JobsQueueResult is what /jobs/queue returns: one record per task of
// each job, newest job first, and the count of jobs before the limit.
type JobsQueueResult struct {
	Jobs  []ManagedJobRecord `json:"jobs"`
	Total int                `json:"total"`
	// InProgress counts the non-terminal tasks by status, over every job
	// the filter selects (not only the rows shown).
	InProgress map[string]int `json:"in_progress,omitempty"`
}

// ManagedJobRecord is one task of a managed job as `sky jobs queue -o
// json` prints it (cli-output.md): every field is present, null when not
// fetched.
type ManagedJobRecord struct {
	TaskJobID             *int                 `json:"task_job_id"`
	JobID                 int                  `json:"job_id"`
	TaskID                int                  `json:"task_id"`
	JobName               string               `json:"job_name"`
	TaskName              string               `json:"task_name"`
	JobDuration           float64              `json:"job_duration"`
	Workspace             string               `json:"workspace"`
	Status                string               `json:"status"`
	ScheduleState         *string              `json:"schedule_state"`
	Resources             string               `json:"resources"`
	ClusterResources      *string              `json:"cluster_resources"`
	ClusterResourcesFull  *string              `json:"cluster_resources_full"`
	Cloud                 *string              `json:"cloud"`
	Region                *string              `json:"region"`
	Zone                  *string              `json:"zone"`
	Infra                 *string              `json:"infra"`
	RecoveryCount         int                  `json:"recovery_count"`
	Details               *string              `json:"details"`
	FailureReason         *string              `json:"failure_reason"`
	UserName              *string              `json:"user_name"`
	UserHash              *string              `json:"user_hash"`
	SubmittedAt           float64              `json:"submitted_at"`
	StartAt               *float64             `json:"start_at"`
	EndAt                 *float64             `json:"end_at"`
	UserYAML              *string              `json:"user_yaml"`
	Entrypoint            *string              `json:"entrypoint"`
	Metadata              map[string]any       `json:"metadata"`
	ControllerPID         *int                 `json:"controller_pid"`
	ControllerPIDStarted  *float64             `json:"controller_pid_started_at"`
	DagYAMLPath           *string              `json:"dag_yaml_path"`
	EnvFilePath           *string              `json:"env_file_path"`
	LastRecoveredAt       *float64             `json:"last_recovered_at"`
	RunTimestamp          *string              `json:"run_timestamp"`
	Priority              *int                 `json:"priority"`
	PriorityClass         *string              `json:"priority_class"`
	OriginalUserYAMLPath  *string              `json:"original_user_yaml_path"`
	Pool                  *string              `json:"pool"`
	PoolHash              *string              `json:"pool_hash"`
	CurrentClusterName    *string              `json:"current_cluster_name"`
	ClusterNameOnCloud    *string              `json:"cluster_name_on_cloud"`
	JobIDOnPoolCluster    *int                 `json:"job_id_on_pool_cluster"`
	Accelerators          map[string]float64   `json:"accelerators"`
	Labels                map[string]string    `json:"labels"`
	Links                 map[string]string    `json:"links"`
	NodeNames             []string             `json:"node_names"`
	Execution             string               `json:"execution"`
	IsJobGroup            bool                 `json:"is_job_group"`
	IsPrimaryInJobGroup   *bool                `json:"is_primary_in_job_group"`
	IsBatch               bool                 `json:"is_batch"`
	BatchTotalBatches     *int                 `json:"batch_total_batches"`
	BatchCompletedBatches *int                 `json:"batch_completed_batches"`
	InternalExternalIPs   [][2]string          `json:"internal_external_ips"`
	InternalServices      map[string]string    `json:"internal_services"`
	Events                *ManagedEventSummary `json:"events,omitempty"`
	// ParentJobID is the job this one is attached to (--job-group), if any.
	ParentJobID *int `json:"parent_job_id,omitempty"`
	// DependsOn are the job ids this job waits for (--depends-on).
	DependsOn []int `json:"depends_on,omitempty"`
	// NumJobs and JobRank are the array this job belongs to (1 and 0
	// for a single submission).
	NumJobs int `json:"num_jobs,omitempty"`
	JobRank int `json:"job_rank,omitempty"`
	// TotalDuration is now (or end_at) minus submitted_at, in seconds.
	TotalDuration float64 `json:"total_duration,omitempty"`
}

// ManagedEventSummary is the one-line summary of a job's event timeline
// that `sky jobs queue -v` shows: how many events, and the last one.
type ManagedEventSummary struct {
	Count int          `json:"count"`
	Last  ManagedEvent `json:"last"`
}

// ManagedEvent is one entry of a managed job's timeline (SkyPilot's
// job_events row): TaskID nil is the whole job.
type ManagedEvent struct {
	JobID     int     `json:"job_id"`
	TaskID    *int    `json:"task_id"`
	Status    string  `json:"new_status"`
	Code      string  `json:"code,omitempty"`
	Reason    string  `json:"reason"`
	Timestamp float64 `json:"timestamp"`
}

// JobsCancelBody is the body of /jobs/cancel: exactly one of JobIDs,
// Name, Pool, All or AllUsers selects.
type JobsCancelBody struct {
	JobIDs          []int  `json:"job_ids,omitempty"`
	Name            string `json:"name,omitempty"`
	Pool            string `json:"pool,omitempty"`
	All             bool   `json:"all,omitempty"`
	AllUsers        bool   `json:"all_users,omitempty"`
	Task            string `json:"task,omitempty"`
	Graceful        bool   `json:"graceful,omitempty"`
	GracefulTimeout *int   `json:"graceful_timeout,omitempty"`
}

// JobsCancelResult is what /jobs/cancel returns: Message is SkyPilot's
// reply line ("Job with ID 3 is scheduled to be cancelled." ...).
type JobsCancelResult struct {
	Cancelled []int  `json:"cancelled"`
	Message   string `json:"message"`
}

// JobsLogsBody is the body of /jobs/logs. The log is the request's log;
// the result is a JobsLogsResult.
type JobsLogsBody struct {
	JobID      int    `json:"job_id,omitempty"` // 0: by Name, else the latest job
	Name       string `json:"name,omitempty"`
	Task       string `json:"task,omitempty"` // task id (digits) or name
	Follow     bool   `json:"follow"`
	Controller bool   `json:"controller,omitempty"`
	// Tail is the number of lines from the end; 0 is the whole log.
	Tail int `json:"tail,omitempty"`
	// Events (with Controller) returns the timeline as data instead of
	// printing the controller log.
	Events bool `json:"events,omitempty"`
}

// JobsLogsResult is what /jobs/logs returns: the job's final (or current)
// status and the exit code the CLI ends with (0 succeeded, 100 failed,
// 101 not finished, 102 not found, 103 cancelled).
type JobsLogsResult struct {
	JobID    int            `json:"job_id"`
	Status   string         `json:"status"`
	ExitCode int            `json:"exit_code"`
	Events   []ManagedEvent `json:"events,omitempty"`
}

// JobsDownloadBody is the body of /jobs/download_logs: the logs of the
// selected jobs are left in the request's files directory (as for
// `sky logs --sync-down`) for the client to fetch.
type JobsDownloadBody struct {
	JobIDs     []int  `json:"job_ids,omitempty"`
	Name       string `json:"name,omitempty"`
	Controller bool   `json:"controller,omitempty"`
}
