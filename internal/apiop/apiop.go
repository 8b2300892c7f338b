// Package apiop is the API's contract, one descriptor per operation: its
// name (and so its path and request name), the Go types of its body and
// result, the worker pool it runs on, whether it ends with its last
// follower, and who may run it. The server serves each descriptor with
// op.Handle (internal/core, the infrastructures' Ops), the command line
// submits it by descriptor (internal/cli's callOp), and the API
// description (docs/openapi.json, from which the Python SDK's operation
// table is generated) is made from the same values.
//
// Adding an operation is one descriptor here, one handler served with
// op.Handle, and the command that calls it.
package apiop

import (
	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/op"
)

// Clusters and their jobs.
var (
	Validate         = op.Desc[api.ValidateBody, api.ValidateResult]{Name: "validate", Schedule: op.Short}
	Check            = op.Desc[api.CheckBody, []check.Result]{Name: "check", Schedule: op.Short}
	ListAccelerators = op.Desc[api.GPUsBody, api.GPUsResult]{Name: "list_accelerators", Schedule: op.Short}
	// ListAcceleratorCounts is, for each accelerator list_accelerators
	// offers, the counts it comes in.
	ListAcceleratorCounts = op.Desc[api.GPUsBody, map[string][]float64]{Name: "list_accelerator_counts", Schedule: op.Short}
	Launch                = op.Desc[api.LaunchBody, api.LaunchResult]{Name: "launch", Schedule: op.Long}
	// Optimize's result is unused: the plan is the text of its log.
	Optimize = op.Desc[api.OptimizeBody, string]{Name: "optimize", Schedule: op.Short}
	Exec     = op.Desc[api.ExecBody, api.LaunchResult]{Name: "exec", Schedule: op.Long}
	Status   = op.Desc[api.ClustersBody, []api.ClusterRecord]{Name: "status", Schedule: op.Short}
	Stop     = op.Desc[api.ClustersBody, []string]{Name: "stop", Schedule: op.Short}
	Start    = op.Desc[api.ClustersBody, []string]{Name: "start", Schedule: op.Long}
	Down     = op.Desc[api.ClustersBody, []string]{Name: "down", Schedule: op.Short}
	Autostop = op.Desc[api.AutostopBody, []string]{Name: "autostop", Schedule: op.Short}
	Queue    = op.Desc[api.ClustersBody, map[string][]agentapi.Job]{Name: "queue", Schedule: op.Short}
	Cancel   = op.Desc[api.CancelBody, agentapi.CancelResult]{Name: "cancel", Schedule: op.Short}
	// A log tail is only of use to the client reading it: it runs beside,
	// not among, the workers of launch and down, and ends with its client.
	Logs           = op.Desc[api.LogsBody, api.JobStatusResult]{Name: "logs", Schedule: op.Follow, CancelWhenUnfollowed: true}
	JobStatus      = op.Desc[api.LogsBody, api.JobStatusResult]{Name: "job_status", Schedule: op.Short}
	Workspaces     = op.Desc[op.NoBody, map[string]any]{Name: "workspaces", Schedule: op.Short}
	ClusterJobSpec = op.Desc[api.ClusterJobSpecBody, *api.ClusterJobSpec]{Name: "cluster_job_spec", Schedule: op.Short}
	DownloadLogs   = op.Desc[api.LogsBody, api.LogsDownload]{Name: "download_logs", Schedule: op.Short}
	HookLogs       = op.Desc[api.LogsBody, op.Null]{Name: "hook_logs", Schedule: op.Short, CancelWhenUnfollowed: true}
	CostReport     = op.Desc[api.CostReportBody, []api.CostRecord]{Name: "cost_report", Schedule: op.Short}
	Endpoints      = op.Desc[api.EndpointsBody, map[string]string]{Name: "endpoints", Schedule: op.Short}
)

// Storage and volumes.
var (
	StorageLs     = op.Desc[op.NoBody, []api.StorageRecord]{Name: "storage.ls", Schedule: op.Short}
	StorageDelete = op.Desc[api.StorageBody, op.Null]{Name: "storage.delete", Schedule: op.Long}
	VolumesApply  = op.Desc[api.VolumeApplyBody, op.Null]{Name: "volumes.apply", Schedule: op.Long}
	VolumesLs     = op.Desc[api.VolumeLsBody, []api.VolumeRecord]{Name: "volumes.ls", Schedule: op.Short}
	VolumesDelete = op.Desc[api.VolumeDeleteBody, []string]{Name: "volumes.delete", Schedule: op.Long}
)

// Managed jobs and their pools.
var (
	JobsLaunch       = op.Desc[api.JobsLaunchBody, api.JobsLaunchResult]{Name: "jobs.launch", Schedule: op.Short}
	JobsQueue        = op.Desc[api.JobsQueueBody, api.JobsQueueResult]{Name: "jobs.queue", Schedule: op.Short}
	JobsCancel       = op.Desc[api.JobsCancelBody, api.JobsCancelResult]{Name: "jobs.cancel", Schedule: op.Short}
	JobsLogs         = op.Desc[api.JobsLogsBody, api.JobsLogsResult]{Name: "jobs.logs", Schedule: op.Follow, CancelWhenUnfollowed: true}
	JobsDownloadLogs = op.Desc[api.JobsDownloadBody, api.LogsDownload]{Name: "jobs.download_logs", Schedule: op.Short}
	PoolApply        = op.Desc[api.PoolApplyBody, api.PoolApplyResult]{Name: "jobs.pool_apply", Schedule: op.Long}
	PoolStatus       = op.Desc[api.PoolStatusBody, []api.PoolRecord]{Name: "jobs.pool_status", Schedule: op.Short}
	PoolDown         = op.Desc[api.PoolDownBody, api.PoolDownResult]{Name: "jobs.pool_down", Schedule: op.Long}
	PoolLogs         = op.Desc[api.PoolLogsBody, op.Null]{Name: "jobs.pool_logs", Schedule: op.Follow, CancelWhenUnfollowed: true}
	PoolSyncDownLogs = op.Desc[api.PoolSyncDownBody, api.LogsDownload]{Name: "jobs.pool_sync-down-logs", Schedule: op.Short}
)

// SkyServe.
var (
	ServeUp               = op.Desc[api.ServeUpBody, api.ServeUpResult]{Name: "serve.up", Schedule: op.Long}
	ServeUpdate           = op.Desc[api.ServeUpdateBody, api.ServeUpdateResult]{Name: "serve.update", Schedule: op.Long}
	ServeStatus           = op.Desc[api.ServeStatusBody, []api.ServiceRecord]{Name: "serve.status", Schedule: op.Short}
	ServeDown             = op.Desc[api.ServeDownBody, api.ServeDownResult]{Name: "serve.down", Schedule: op.Long}
	ServeTerminateReplica = op.Desc[api.ServeTerminateReplicaBody, op.Null]{Name: "serve.terminate-replica", Schedule: op.Short}
	ServeLogs             = op.Desc[api.ServeLogsBody, op.Null]{Name: "serve.logs", Schedule: op.Follow, CancelWhenUnfollowed: true}
	ServeSyncDownLogs     = op.Desc[api.ServeSyncDownBody, api.LogsDownload]{Name: "serve.sync-down-logs", Schedule: op.Short}
)

// The infrastructures' own operations. Those that act on infrastructure
// every user shares, rather than on the caller's own objects, are for
// admins: `sky local down` removes every user's local clusters.
var (
	LocalUp                           = op.Desc[op.NoBody, map[string]bool]{Name: "local_up", Schedule: op.Long, AdminOnly: "`sky local up`"}
	LocalDown                         = op.Desc[op.NoBody, map[string]bool]{Name: "local_down", Schedule: op.Long, AdminOnly: "`sky local down`"}
	SSHUp                             = op.Desc[api.SSHUpBody, []*api.SSHPoolRecord]{Name: "ssh_up", Schedule: op.Long, AdminOnly: "`sky ssh up`"}
	SSHDown                           = op.Desc[api.SSHDownBody, []string]{Name: "ssh_down", Schedule: op.Long, AdminOnly: "`sky ssh down`"}
	KubernetesLabelGPUs               = op.Desc[api.GPUsLabelBody, []api.GPUNodeLabel]{Name: "kubernetes_label_gpus", Schedule: op.Short, AdminOnly: "`sky gpus label`"}
	KubernetesNodeInfo                = op.Desc[api.KubernetesNodeInfoBody, api.KubernetesNodesInfo]{Name: "kubernetes_node_info", Schedule: op.Short}
	RealtimeKubernetesGPUAvailability = op.Desc[api.RealtimeGPUAvailabilityBody, [][]any]{Name: "realtime_kubernetes_gpu_availability", Schedule: op.Short}
)

// The server's own.
var (
	// DebugSleep runs a real child `sleep`, so that tests (and operators)
	// can prove that cancelling a request kills the work it started.
	DebugSleep = op.Desc[api.DebugSleepBody, api.DebugSleepResult]{Name: "debug.sleep", Schedule: op.Long}
)
