// Package api holds the records that travel between the CLI
// (internal/client) and the API server (internal/server and the
// operations in internal/core): request bodies and results, the request
// record, health, the port and headers. Each has exactly one Go type, so
// the two sides cannot drift apart. Of SkyGo it imports only the
// resources vocabulary (a task's resources travel typed, checked as they
// are decoded) and what that links, the standard library alone, so every
// layer above may use it (state scans request rows into Request).
package api

import "github.com/skygo/skygo/internal/resources"

// TaskSpec is a task as the CLI resolved it: YAML loaded and validated,
// --env/--secret applied, resource flags applied, paths made absolute.
// The server runs exactly this; it never reads the user's files, only
// the copies uploaded under UploadID.
type TaskSpec struct {
	Name     string `json:"name,omitempty"`
	NumNodes int    `json:"num_nodes"`
	// Resources travel as their canonical mapping (resources.ToMap) and
	// are checked as they are decoded: a body or record whose resources
	// are not valid fails to decode, naming the field.
	Resources resources.Spec    `json:"resources,omitzero"`
	Envs      map[string]string `json:"envs,omitempty"`
	// Secrets travel to the node but are redacted in request records and
	// never printed.
	Secrets map[string]string `json:"secrets,omitempty"`
	// Workdir is an absolute local directory, or a git URL with a ref.
	Workdir    string `json:"workdir,omitempty"`
	WorkdirGit string `json:"workdir_git,omitempty"`
	WorkdirRef string `json:"workdir_ref,omitempty"`
	// GitCommit is the commit WorkdirRef resolved to, set by the server
	// once it has checked the workdir out; the job records it.
	GitCommit string `json:"git_commit,omitempty"`
	// FileMounts maps a node path to an absolute local path.
	FileMounts map[string]string `json:"file_mounts,omitempty"`
	// Volumes are the task's `volumes:` entries, by mount path; the
	// backend attaches them after provisioning (backend/volumes.go).
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// UploadID names the tree the client uploaded the workdir and local
	// file-mount sources to (internal/upload): the server syncs those
	// copies, never the paths above, which name the client's files.
	UploadID string `json:"upload_id,omitempty"`
	// Storage are the bucket mounts (file_mounts mapping entries and
	// cloud-URI sources), sorted by Dst: the backend makes the buckets
	// ready after provisioning and mounts them after the file sync.
	Storage []StorageMount `json:"storage,omitempty"`
	Setup   string         `json:"setup,omitempty"`
	Run     string         `json:"run,omitempty"`
	// YAML is the task as dumped with secrets redacted, for records.
	YAML string `json:"yaml,omitempty"`
	// Config is the task's `config:` overrides (internal/config), which
	// infrastructures read where the spec lets a task override a key
	// (config.<kind>.<key> for the keys of infrakind.Kind.TaskKeys).
	Config map[string]any `json:"config,omitempty"`
	// WaitForSchedulingTimeout (seconds) is job.wait_for_scheduling_timeout
	// of a managed job's task; 0 waits as long as it takes.
	WaitForSchedulingTimeout float64 `json:"wait_for_scheduling_timeout,omitempty"`
}

// StorageMount is one bucket mount of a task.
type StorageMount struct {
	// Dst is the path on every node.
	Dst string `json:"dst"`
	// Name is the bucket's name.
	Name string `json:"name"`
	// Store is the store type, upper-case (S3).
	Store string `json:"store"`
	// Source are local paths uploaded into the bucket (absolute; the
	// client's, rebased by the server onto its upload tree); with
	// SourceIsList each goes under its base name.
	Source       []string `json:"source,omitempty"`
	SourceIsList bool     `json:"source_is_list,omitempty"`
	// SourceNames are the base names of a list's sources, the keys they
	// get in the bucket (the server's copies have other names).
	SourceNames []string `json:"source_names,omitempty"`
	// URI is set when the source is an existing bucket (s3://b/prefix):
	// Name is then its bucket and SubPath its prefix.
	URI     string `json:"uri,omitempty"`
	SubPath string `json:"sub_path,omitempty"`
	// Mode is MOUNT, COPY or MOUNT_CACHED.
	Mode       string         `json:"mode"`
	Persistent bool           `json:"persistent"`
	Type       string         `json:"type,omitempty"`
	Config     map[string]any `json:"config,omitempty"`
}

// StorageRecord is one row of `sky storage ls` (sky.storage_ls).
type StorageRecord struct {
	Name       string   `json:"name"`
	LaunchedAt float64  `json:"launched_at"`
	Store      []string `json:"store"`
	LastUse    string   `json:"last_use"`
	Status     string   `json:"status"`
}

// StorageBody names one storage (sky.storage_delete).
type StorageBody struct {
	Name string `json:"name"`
}

// LaunchBody is the body of /launch.
type LaunchBody struct {
	Task TaskSpec `json:"task"`
	// TaskYAML, instead of Task, is one task as YAML (the Python SDK
	// sends it): the server loads, checks and resolves it as the CLI
	// does a file, into Task. Its local paths are the client's, absolute;
	// UploadID names the tree their contents were uploaded to.
	TaskYAML    string `json:"task_yaml,omitempty"`
	UploadID    string `json:"upload_id,omitempty"`
	ClusterName string `json:"cluster_name"`
	Dryrun      bool   `json:"dryrun,omitempty"`
	Detach      bool   `json:"detach_run,omitempty"`
	NoSetup     bool   `json:"no_setup,omitempty"`
	Fast        bool   `json:"fast,omitempty"`
	// IdleMinutes < 0 means not set.
	IdleMinutes *int `json:"idle_minutes_to_autostop,omitempty"`
	Down        bool `json:"down,omitempty"`
	// WaitFor is --wait-for (jobs_and_ssh, jobs, none); "" keeps the
	// task's autostop.wait_for.
	WaitFor      string `json:"wait_for,omitempty"`
	Retry        bool   `json:"retry_until_up,omitempty"`
	Verbose      bool   `json:"verbose,omitempty"`
	Command      string `json:"entrypoint_command,omitempty"`
	OptimizeTime bool   `json:"optimize_time,omitempty"`
	// PlanShown says the client already showed the optimizer table (it
	// asked `optimize` before its prompt): the launch does not print it
	// again unless failover plans anew.
	PlanShown bool `json:"plan_shown,omitempty"`
	// Workspace is where a new cluster is recorded: the request config's
	// active_workspace, set by the server (never read from the client).
	Workspace string `json:"-"`
	// EnvVars are the client's settings for this request (ClientEnv).
	EnvVars map[string]string `json:"env_vars,omitempty"`
	// Managed is set by the managed-jobs controller (never by a client):
	// the cluster is recorded as managed and the job on it carries the
	// tag, by which a controller cut off after submitting finds it.
	Managed *ManagedLaunch `json:"-"`
}

// ManagedLaunch marks a launch the managed-jobs controller makes.
type ManagedLaunch struct {
	// Tag is "<job id>/<task id>/<attempt>".
	Tag string
	// TaskID is the task's SKYPILOT_TASK_ID.
	TaskID string
	// Progress receives the infrastructure's launch-progress texts
	// (provision.ClusterSpec.Progress).
	Progress func(text string)
}

// MetaManagedTag is the agent job metadata key holding ManagedLaunch.Tag.
const MetaManagedTag = "skygo_managed"

// OptimizeBody is the body of /optimize: a launch body (task or
// task_yaml), or DAGYAML, whose every task is planned in turn.
type OptimizeBody struct {
	LaunchBody
	DAGYAML string `json:"dag_yaml,omitempty"`
}

// LaunchResult is what /launch and /exec return.
type LaunchResult struct {
	ClusterName string `json:"cluster_name"`
	JobID       int    `json:"job_id,omitempty"`
	// Status is the job's final status when the run was followed.
	Status string `json:"status,omitempty"`
	// SSH says whether `ssh <cluster>` reaches the head node (the CLI's
	// hints name it only then).
	SSH bool `json:"ssh,omitempty"`
	// Existing says a dry run found the user's UP cluster, which the
	// launch would have reused (the hints then name no job).
	Existing bool `json:"existing,omitempty"`
}

// ExecBody is the body of /exec.
type ExecBody struct {
	Task TaskSpec `json:"task"`
	// TaskYAML and UploadID are as in LaunchBody.
	TaskYAML    string `json:"task_yaml,omitempty"`
	UploadID    string `json:"upload_id,omitempty"`
	ClusterName string `json:"cluster_name"`
	Detach      bool   `json:"detach_run,omitempty"`
	Dryrun      bool   `json:"dryrun,omitempty"`
	Command     string `json:"entrypoint_command,omitempty"`
	// Managed is set by the managed-jobs controller (never by a client)
	// for a job it runs on a pool worker: the job carries the tag, and a
	// submit repeated after a cut-off lands once.
	Managed *ManagedLaunch `json:"-"`
}

// ClustersBody selects clusters: /status, /stop, /start, /down, /queue...
type ClustersBody struct {
	ClusterNames []string `json:"cluster_names,omitempty"`
	All          bool     `json:"all,omitempty"`
	AllUsers     bool     `json:"all_users,omitempty"`
	Refresh      bool     `json:"refresh,omitempty"`
	Purge        bool     `json:"purge,omitempty"`
	SkipFinished bool     `json:"skip_finished,omitempty"`
	// Force is start's --force: restart the agents of an UP cluster too.
	Force bool `json:"force,omitempty"`
	// Retry is start's -r: keep starting while the infra has no capacity.
	Retry bool `json:"retry_until_up,omitempty"`
	// Graceful (stop, down): cancel the cluster's jobs and wait for them
	// to end first, for at most GracefulTimeout seconds when set.
	Graceful        bool `json:"graceful,omitempty"`
	GracefulTimeout *int `json:"graceful_timeout,omitempty"`
}

// AutostopBody is the body of /autostop.
type AutostopBody struct {
	ClusterNames []string `json:"cluster_names,omitempty"`
	All          bool     `json:"all,omitempty"`
	AllUsers     bool     `json:"all_users,omitempty"`
	IdleMinutes  int      `json:"idle_minutes"`
	Down         bool     `json:"down,omitempty"`
	WaitFor      string   `json:"wait_for,omitempty"`
	Cancel       bool     `json:"cancel,omitempty"`
}

// CancelBody is the body of /cancel.
type CancelBody struct {
	ClusterName string `json:"cluster_name"`
	JobIDs      []int  `json:"job_ids,omitempty"`
	All         bool   `json:"all,omitempty"`
	AllUsers    bool   `json:"all_users,omitempty"`
}

// LogsBody is the body of /logs and /job_status.
type LogsBody struct {
	ClusterName string `json:"cluster_name"`
	JobIDs      []int  `json:"job_ids,omitempty"`
	Follow      bool   `json:"follow"`
	Tail        int    `json:"tail,omitempty"`
	Worker      *int   `json:"worker,omitempty"`
	// Hook is the lifecycle hook event whose log /hook_logs shows
	// (stop, down, preemption); "" is whichever exists.
	Hook string `json:"hook,omitempty"`
}

// JobStatusResult is the answer of /job_status and /logs: the job and its
// status ("" when the job does not exist).
type JobStatusResult struct {
	JobID  int    `json:"job_id"`
	Status string `json:"status"`
}

// EndpointsBody is the body of /endpoints: the URLs of a cluster's
// exposed ports (one port, or all when Port is 0).
type EndpointsBody struct {
	Cluster string `json:"cluster"`
	Port    int    `json:"port,omitempty"`
}

// LogsDownload is what /download_logs returns: the jobs' log files are
// left on the server, and the client fetches each with GET /api/download
// (request_id, path "<run_timestamp>/<file>").
type LogsDownload struct {
	RequestID string    `json:"request_id"`
	Jobs      []JobLogs `json:"jobs"`
}

// JobLogs is one job's log directory: its files by path relative to
// ~/sky_logs/<run_timestamp>.
type JobLogs struct {
	JobID        int      `json:"job_id"`
	RunTimestamp string   `json:"run_timestamp"`
	Files        []string `json:"files"`
}

// CheckBody is the body of /check.
type CheckBody struct {
	Infras  []string `json:"clouds,omitempty"`
	Verbose bool     `json:"verbose,omitempty"`
}

// GPUsBody is the body of /list_accelerators.
type GPUsBody struct {
	Name       string  `json:"gpus_only_name,omitempty"`
	Count      float64 `json:"quantity_filter,omitempty"`
	All        bool    `json:"all,omitempty"`
	Infra      string  `json:"clouds,omitempty"`
	AllRegions bool    `json:"all_regions,omitempty"`
	// Verbose is -v: cells are printed in full, not shortened.
	Verbose bool `json:"verbose,omitempty"`
	// EnvVars are the client's settings for this request (ClientEnv).
	EnvVars map[string]string `json:"env_vars,omitempty"`
}

// GPUsLabelBody is the body of /kubernetes_label_gpus (`sky gpus label`).
type GPUsLabelBody struct {
	// Context is the kubeconfig context; "" means every allowed one.
	Context string `json:"context,omitempty"`
	// Cleanup only removes the labelling's own objects (SkyGo makes none).
	Cleanup bool `json:"cleanup,omitempty"`
}

// GPUNodeLabel is one GPU node that `sky gpus label` labelled or left.
type GPUNodeLabel struct {
	Context string `json:"context"`
	Node    string `json:"node"`
	// Label is the skypilot.co/accelerator value set; "" when skipped.
	Label string `json:"label,omitempty"`
	// Skipped says why the node was not labelled.
	Skipped string `json:"skipped,omitempty"`
}

// KubernetesNodeInfoBody is the body of /kubernetes_node_info.
type KubernetesNodeInfoBody struct {
	Context string `json:"context,omitempty"`
}

// KubernetesNodeInfo is one node of a context, as SkyPilot's
// models.KubernetesNodeInfo.
type KubernetesNodeInfo struct {
	Name            string         `json:"name"`
	AcceleratorType *string        `json:"accelerator_type"`
	Total           map[string]int `json:"total"` // accelerator_count
	Free            map[string]int `json:"free"`  // accelerators_available
	IPAddress       *string        `json:"ip_address"`
	CPUCount        float64        `json:"cpu_count"`
	MemoryGB        float64        `json:"memory_gb"`
	CPUFree         float64        `json:"cpu_free"`
	MemoryFreeGB    float64        `json:"memory_free_gb"`
	IsReady         bool           `json:"is_ready"`
}

// KubernetesNodesInfo is the result of /kubernetes_node_info.
type KubernetesNodesInfo struct {
	NodeInfoDict map[string]KubernetesNodeInfo `json:"node_info_dict"`
	Hint         string                        `json:"hint"`
}

// RealtimeGPUAvailabilityBody is the body of
// /realtime_kubernetes_gpu_availability.
type RealtimeGPUAvailabilityBody struct {
	Context        string `json:"context,omitempty"`
	NameFilter     string `json:"name_filter,omitempty"`
	QuantityFilter int    `json:"quantity_filter,omitempty"`
	IsSSH          bool   `json:"is_ssh,omitempty"`
}

// CostReportBody is the body of /cost_report.
type CostReportBody struct {
	// Days is the window; nil means 30, 0 means all time.
	Days *int `json:"days,omitempty"`
	All  bool `json:"all,omitempty"`
}

// ValidateBody is the body of /validate: the YAML text and the client's
// overrides already resolved (task.LoadOptions.Resolved), so the server
// needs none of the client's files. Secrets travel as a map so that
// request records redact them.
type ValidateBody struct {
	Name string `json:"name"`
	YAML string `json:"yaml"`
	// DAGYAML, instead of YAML, is a DAG as the Python SDK sends it: its
	// local paths are the client's, absolute, and are checked to be so
	// (their existence is the client's to check).
	DAGYAML string `json:"dag_yaml,omitempty"`
	// VolumeYAML, instead of YAML, is a volume spec (`sky volumes apply`)
	// checked as the server would load it; the result lists no tasks.
	VolumeYAML string `json:"volume_yaml,omitempty"`
	// ConfigSources, alone, are the config sources a client read (its
	// config files and --config values), each checked against the config
	// schema as the client would have; the result lists no tasks.
	ConfigSources []ConfigSource    `json:"config_sources,omitempty"`
	Env           []string          `json:"env,omitempty"`
	Secrets       map[string]string `json:"secrets,omitempty"`
}

// ConfigSource is one config source as a client read it: a file's text,
// or a --config key=value as the mapping it makes. Name is what errors
// call it (the file's path, "--config KEY=VALUE").
type ConfigSource struct {
	Name  string         `json:"name"`
	YAML  string         `json:"yaml,omitempty"`
	Value map[string]any `json:"value,omitempty"`
}

// ValidateResult lists each task of a validated YAML.
type ValidateResult struct {
	Tasks []ValidatedTask `json:"tasks"`
}

// ValidatedTask is one task as the server loaded it.
type ValidatedTask struct {
	Name      string `json:"name"`
	Resources string `json:"resources"`
	NumNodes  int    `json:"num_nodes"`
}

// SSHUpBody is the body of /ssh_up.
type SSHUpBody struct {
	// Infra is one node pool; "" means every pool (that
	// ssh.allowed_node_pools allows).
	Infra string `json:"infra,omitempty"`
	// PoolsYAML, when set, is a node pools file sent by the client
	// (`sky ssh up --file`) used instead of ~/.sky/ssh_node_pools.yaml.
	PoolsYAML string `json:"pools_yaml,omitempty"`
}

// SSHDownBody is the body of /ssh_down.
type SSHDownBody struct {
	Infra string `json:"infra,omitempty"`
}
