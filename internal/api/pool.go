package api

// Pools of workers for managed jobs: the bodies and results of
// /jobs/pool_apply, /jobs/pool_status, /jobs/pool_down and
// /jobs/pool_logs (spec/managed-jobs.md §Pools, service.md §pool). A
// pool's workers are clusters <pool>-<worker id> kept UP, each having
// run the pool task's setup once; `sky jobs launch --pool` runs jobs on
// them.

// Worker statuses: the replica statuses of service.md that a worker
// goes through.
const (
	WorkerPending         = "PENDING"
	WorkerProvisioning    = "PROVISIONING"
	WorkerStarting        = "STARTING"
	WorkerReady           = "READY"
	WorkerNotReady        = "NOT_READY"
	WorkerShuttingDown    = "SHUTTING_DOWN"
	WorkerFailed          = "FAILED"
	WorkerFailedProvision = "FAILED_PROVISION"
	WorkerPreempted       = "PREEMPTED"
)

// Pool statuses (service statuses of service.md).
const (
	PoolControllerInit = "CONTROLLER_INIT"
	PoolReplicaInit    = "REPLICA_INIT"
	PoolReady          = "READY"
	PoolShuttingDown   = "SHUTTING_DOWN"
	PoolFailed         = "FAILED"
	PoolNoReplica      = "NO_REPLICA"
)

// PoolPolicy is the pool: section: a fixed number of workers, or
// queue-length autoscaling between MinWorkers and MaxWorkers.
type PoolPolicy struct {
	Workers               *int    `json:"workers,omitempty"`
	MinWorkers            *int    `json:"min_workers,omitempty"`
	MaxWorkers            *int    `json:"max_workers,omitempty"`
	QueueLengthThreshold  int     `json:"queue_length_threshold,omitempty"`
	UpscaleDelaySeconds   float64 `json:"upscale_delay_seconds,omitempty"`
	DownscaleDelaySeconds float64 `json:"downscale_delay_seconds,omitempty"`
}

// Autoscaling says whether the policy scales with the queue.
func (p PoolPolicy) Autoscaling() bool { return p.MaxWorkers != nil }

// Min is the fewest workers the pool keeps: min_workers, else workers.
func (p PoolPolicy) Min() int {
	switch {
	case p.MinWorkers != nil:
		return *p.MinWorkers
	case p.Workers != nil:
		return *p.Workers
	}
	return 0
}

// Max is the most workers the pool may have.
func (p PoolPolicy) Max() int {
	if p.MaxWorkers != nil {
		return *p.MaxWorkers
	}
	return p.Min()
}

// PoolApplyBody is the body of /jobs/pool_apply: a new pool or a new
// version of one (Task and Policy set), or a resize (Workers only).
type PoolApplyBody struct {
	Name   string      `json:"pool_name,omitempty"`
	Task   *TaskSpec   `json:"task,omitempty"`
	Policy *PoolPolicy `json:"policy,omitempty"`
	// Mode is rolling (default) or blue_green.
	Mode    string `json:"mode,omitempty"`
	Workers *int   `json:"workers,omitempty"`
	// TaskYAML, instead of Task and Policy, is the pool YAML (one task
	// with its pool: section) as the Python SDK sends it; its local
	// files were uploaded to UploadID.
	TaskYAML string `json:"task_yaml,omitempty"`
	UploadID string `json:"upload_id,omitempty"`
	// EnvVars are the client's settings for this request (ClientEnv).
	EnvVars map[string]string `json:"env_vars,omitempty"`
}

// PoolApplyResult is what /jobs/pool_apply returns.
type PoolApplyResult struct {
	Name    string `json:"pool_name"`
	Version int    `json:"version"`
	Created bool   `json:"created"`
}

// PoolStatusBody is the body of /jobs/pool_status: no names is every pool.
type PoolStatusBody struct {
	Names []string `json:"pool_names,omitempty"`
}

// PoolRecord is one pool as /jobs/pool_status returns it.
type PoolRecord struct {
	Name               string             `json:"name"`
	Status             string             `json:"status"`
	Version            int                `json:"version"`
	UpdateMode         string             `json:"update_mode,omitempty"`
	CreatedAt          float64            `json:"created_at"`
	UptimeSince        *float64           `json:"uptime_since"`
	UserName           string             `json:"user_name"`
	Policy             PoolPolicy         `json:"policy"`
	Target             int                `json:"target"`
	ReadyWorkers       int                `json:"ready_workers"`
	RequestedResources string             `json:"requested_resources_str"`
	PendingJobs        int                `json:"pending_jobs"`
	Workers            []PoolWorkerRecord `json:"replica_info"`
}

// PoolWorkerRecord is one worker of a pool.
type PoolWorkerRecord struct {
	ID         int      `json:"replica_id"`
	Name       string   `json:"name"` // the worker's cluster
	Version    int      `json:"version"`
	Status     string   `json:"status"`
	LaunchedAt *float64 `json:"launched_at"`
	Infra      string   `json:"infra"`
	Resources  string   `json:"resources_str"`
	Reason     string   `json:"reason,omitempty"`
	// UsedBy are the managed jobs running on the worker now.
	UsedBy []int `json:"used_by"`
}

// PoolDownBody is the body of /jobs/pool_down.
type PoolDownBody struct {
	Names []string `json:"pool_names,omitempty"`
	All   bool     `json:"all,omitempty"`
	Purge bool     `json:"purge,omitempty"`
}

// PoolDownResult is what /jobs/pool_down returns: the pools that were
// torn down.
type PoolDownResult struct {
	Down []string `json:"down"`
}

// PoolLogsBody is the body of /jobs/pool_logs: the controller's log of
// the pool, or one worker's setup log.
type PoolLogsBody struct {
	Name       string `json:"pool_name"`
	WorkerID   int    `json:"worker_id,omitempty"`
	Controller bool   `json:"controller,omitempty"`
	Follow     bool   `json:"follow"`
	Tail       int    `json:"tail,omitempty"` // 0: all
}

// PoolSyncDownBody is the body of /jobs/pool_sync-down-logs: the pool's
// controller log and its workers' logs (narrowed by Controller or
// WorkerIDs) are left in the request's files directory as <pool>/<file>;
// the result is a LogsDownload.
type PoolSyncDownBody struct {
	Name       string `json:"pool_name"`
	WorkerIDs  []int  `json:"worker_ids,omitempty"`
	Controller bool   `json:"controller,omitempty"`
}
