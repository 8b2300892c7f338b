package api

import "fmt"

// SkyServe: the bodies and results of /serve/up, /serve/update,
// /serve/status, /serve/down, /serve/terminate-replica, /serve/logs and
// /serve/sync-down-logs (spec/service.md). A service is a set of replica
// clusters <service>-<replica id>, each running the service task, behind
// one load balancer whose endpoint the status shows.

// Replica statuses (service.md §Statuses).
const (
	ReplicaPending            = "PENDING"
	ReplicaProvisioning       = "PROVISIONING"
	ReplicaStarting           = "STARTING"
	ReplicaReady              = "READY"
	ReplicaNotReady           = "NOT_READY"
	ReplicaShuttingDown       = "SHUTTING_DOWN"
	ReplicaFailed             = "FAILED"
	ReplicaFailedInitialDelay = "FAILED_INITIAL_DELAY"
	ReplicaFailedProbing      = "FAILED_PROBING"
	ReplicaFailedProvision    = "FAILED_PROVISION"
	ReplicaFailedCleanup      = "FAILED_CLEANUP"
	ReplicaPreempted          = "PREEMPTED"
	ReplicaUnknown            = "UNKNOWN"
)

// ReplicaFailedStatus reports whether a replica status is of the failed
// set of service.md.
func ReplicaFailedStatus(s string) bool {
	switch s {
	case ReplicaFailed, ReplicaFailedCleanup, ReplicaFailedInitialDelay, ReplicaFailedProbing, ReplicaFailedProvision, ReplicaUnknown:
		return true
	}
	return false
}

// ReplicaTerminalStatus reports whether a replica status is terminal:
// failed, shutting down or preempted.
func ReplicaTerminalStatus(s string) bool {
	return ReplicaFailedStatus(s) || s == ReplicaShuttingDown || s == ReplicaPreempted
}

// Service statuses (service.md §Statuses).
const (
	ServiceControllerInit   = "CONTROLLER_INIT"
	ServiceReplicaInit      = "REPLICA_INIT"
	ServiceControllerFailed = "CONTROLLER_FAILED"
	ServiceReady            = "READY"
	ServiceShuttingDown     = "SHUTTING_DOWN"
	ServiceFailed           = "FAILED"
	ServiceFailedCleanup    = "FAILED_CLEANUP"
	ServiceNoReplica        = "NO_REPLICA"
)

// Load-balancing policies.
const (
	PolicyRoundRobin             = "round_robin"
	PolicyLeastLoad              = "least_load"
	PolicyInstanceAwareLeastLoad = "instance_aware_least_load"
)

// Update modes of `sky serve update`.
const (
	UpdateRolling   = "rolling"
	UpdateBlueGreen = "blue_green"
)

// ServiceSpec is the service: section of a task, resolved (defaults
// filled, the service port decided) by the client that read the YAML.
type ServiceSpec struct {
	Probe ProbeSpec `json:"readiness_probe"`
	// Replicas is the fixed replica count (replicas: / workers:), or nil
	// with ReplicaPolicy set.
	Replicas      *int               `json:"replicas,omitempty"`
	ReplicaPolicy *ReplicaPolicySpec `json:"replica_policy,omitempty"`
	Port          int                `json:"port"`
	// LoadBalancingPolicy is one of the Policy* constants ("" = least_load).
	LoadBalancingPolicy  string   `json:"load_balancing_policy,omitempty"`
	StreamTimeoutSeconds float64  `json:"stream_timeout_seconds,omitempty"`
	TLS                  *TLSSpec `json:"tls,omitempty"`
}

// ProbeSpec is service.readiness_probe.
type ProbeSpec struct {
	Path                               string  `json:"path"`
	InitialDelaySeconds                float64 `json:"initial_delay_seconds"`
	TimeoutSeconds                     float64 `json:"timeout_seconds"`
	EndpointProbeIntervalSeconds       float64 `json:"endpoint_probe_interval_seconds"`
	ConsecutiveFailureThresholdTimeout float64 `json:"consecutive_failure_threshold_timeout"`
	// PostData is the JSON body of a POST probe; empty means GET.
	PostData string            `json:"post_data,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// ReplicaPolicySpec is service.replica_policy.
type ReplicaPolicySpec struct {
	MinReplicas int `json:"min_replicas"`
	MaxReplicas int `json:"max_replicas"`
	// TargetQPS is target_qps_per_replica as a number; TargetQPSPerAccelerator
	// its mapping form (instance_aware_least_load).
	TargetQPS                    *float64           `json:"target_qps_per_replica,omitempty"`
	TargetQPSPerAccelerator      map[string]float64 `json:"target_qps_per_accelerator,omitempty"`
	NumOverprovision             int                `json:"num_overprovision,omitempty"`
	UpscaleDelaySeconds          float64            `json:"upscale_delay_seconds"`
	DownscaleDelaySeconds        float64            `json:"downscale_delay_seconds"`
	BaseOndemandFallbackReplicas int                `json:"base_ondemand_fallback_replicas,omitempty"`
	DynamicOndemandFallback      bool               `json:"dynamic_ondemand_fallback,omitempty"`
	SpotPlacer                   string             `json:"spot_placer,omitempty"`
}

// TLSSpec is service.tls: absolute paths of the key and certificate on
// the API server's machine (the client resolves them).
type TLSSpec struct {
	Keyfile  string `json:"keyfile"`
	Certfile string `json:"certfile"`
}

// MinReplicas is the fewest replicas the service keeps.
func (s ServiceSpec) MinReplicas() int {
	if s.ReplicaPolicy != nil {
		return s.ReplicaPolicy.MinReplicas
	}
	if s.Replicas != nil {
		return *s.Replicas
	}
	return 1
}

// MaxReplicas is the most replicas the service may ever have, updates
// included.
func (s ServiceSpec) MaxReplicas() int {
	if s.ReplicaPolicy != nil {
		return max(s.ReplicaPolicy.MaxReplicas, s.ReplicaPolicy.MinReplicas)
	}
	return s.MinReplicas()
}

// PolicyString says how many replicas the service keeps, in the words of
// SkyPilot's service spec: "Fixed 2 replicas", "Autoscaling from 1 to 3
// replicas (target QPS per replica: 5)".
func (s ServiceSpec) PolicyString() string {
	lo, hi := s.MinReplicas(), s.MaxReplicas()
	if lo == hi {
		if lo == 1 {
			return "Fixed 1 replica"
		}
		return fmt.Sprintf("Fixed %d replicas", lo)
	}
	out := fmt.Sprintf("Autoscaling from %d to %d replicas", lo, hi)
	if p := s.ReplicaPolicy; p != nil {
		switch {
		case p.TargetQPS != nil:
			out += fmt.Sprintf(" (target QPS per replica: %g)", *p.TargetQPS)
		case len(p.TargetQPSPerAccelerator) > 0:
			out += " (target QPS per accelerator)"
		}
		if p.NumOverprovision > 0 {
			out += fmt.Sprintf(", overprovisioning %d", p.NumOverprovision)
		}
	}
	return out
}

// ServeUpBody is the body of /serve/up.
type ServeUpBody struct {
	// Name is the service name; "" lets the server generate
	// sky-service-<4 hex>.
	Name    string      `json:"service_name,omitempty"`
	Task    TaskSpec    `json:"task"`
	Service ServiceSpec `json:"service"`
	// TaskYAML, instead of Task and Service, is the service YAML (one
	// task with its service: section) as the Python SDK sends it; its
	// local files were uploaded to UploadID.
	TaskYAML string `json:"task_yaml,omitempty"`
	UploadID string `json:"upload_id,omitempty"`
	// EnvVars are the client's settings for this request (ClientEnv).
	EnvVars map[string]string `json:"env_vars,omitempty"`
}

// ServeUpResult is what /serve/up returns.
type ServeUpResult struct {
	Name     string `json:"service_name"`
	Endpoint string `json:"endpoint"`
}

// ServeUpdateBody is the body of /serve/update: a new version of the
// service's task and service section.
type ServeUpdateBody struct {
	Name    string      `json:"service_name"`
	Task    TaskSpec    `json:"task"`
	Service ServiceSpec `json:"service"`
	// Mode is rolling (default) or blue_green.
	Mode string `json:"mode,omitempty"`
	// TaskYAML and UploadID are as in ServeUpBody.
	TaskYAML string            `json:"task_yaml,omitempty"`
	UploadID string            `json:"upload_id,omitempty"`
	EnvVars  map[string]string `json:"env_vars,omitempty"`
}

// ServeUpdateResult is what /serve/update returns.
type ServeUpdateResult struct {
	Name    string `json:"service_name"`
	Version int    `json:"version"`
}

// ServeStatusBody is the body of /serve/status: no names is every service
// the user may see.
type ServeStatusBody struct {
	Names []string `json:"service_names,omitempty"`
}

// ServiceRecord is one service as /serve/status returns it (the field
// names of SkyPilot's service records).
type ServiceRecord struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Version is the newest version; ActiveVersions those some replica
	// of which is serving (or, before any is, the newest).
	Version        int   `json:"version"`
	ActiveVersions []int `json:"active_versions"`
	// Uptime is when a replica was first READY (unix seconds), nil before.
	Uptime           *float64 `json:"uptime"`
	CreatedAt        float64  `json:"created_at"`
	UserName         string   `json:"user_name"`
	UserHash         string   `json:"user_hash"`
	LoadBalancerPort int      `json:"load_balancer_port"`
	// Endpoint is host:port of the load balancer as the server binds it
	// ("" until it listens); the client prints http(s)://Endpoint,
	// replacing an unspecified host (0.0.0.0) by its API server's.
	Endpoint            string `json:"endpoint"`
	TLSEncrypted        bool   `json:"tls_encrypted"`
	Policy              string `json:"policy"` // e.g. "Fixed 2 replicas", "Autoscaling from 1 to 3 replicas"
	RequestedResources  string `json:"requested_resources_str"`
	LoadBalancingPolicy string `json:"load_balancing_policy"`
	UpdateMode          string `json:"update_mode,omitempty"`
	// Target is the replica count the autoscaler wants now
	// (overprovision included); QPS the request rate it last measured.
	Target int     `json:"target_num_replicas"`
	QPS    float64 `json:"qps"`
	// Reason says why the service is FAILED or CONTROLLER_FAILED.
	Reason   string          `json:"reason,omitempty"`
	Replicas []ReplicaRecord `json:"replica_info"`
}

// ReplicaRecord is one replica of a service.
type ReplicaRecord struct {
	ID      int    `json:"replica_id"`
	Name    string `json:"name"` // the replica's cluster
	Version int    `json:"version"`
	Status  string `json:"status"`
	// Endpoint is http://head-ip:port once the cluster is up.
	Endpoint   string   `json:"endpoint"`
	LaunchedAt *float64 `json:"launched_at"`
	Infra      string   `json:"infra"`
	Resources  string   `json:"resources_str"`
	IsSpot     bool     `json:"is_spot"`
	// Reason says why a replica failed or is being replaced.
	Reason string `json:"reason,omitempty"`
}

// ServeDownBody is the body of /serve/down.
type ServeDownBody struct {
	Names []string `json:"service_names,omitempty"`
	All   bool     `json:"all,omitempty"`
	Purge bool     `json:"purge,omitempty"`
}

// ServeDownResult is what /serve/down returns: the services removed.
type ServeDownResult struct {
	Down []string `json:"down"`
}

// ServeTerminateReplicaBody is the body of /serve/terminate-replica
// (`sky serve down NAME --replica-id N`).
type ServeTerminateReplicaBody struct {
	Name      string `json:"service_name"`
	ReplicaID int    `json:"replica_id"`
	Purge     bool   `json:"purge,omitempty"`
}

// ServeLogsBody is the body of /serve/logs: one replica's log (its
// launch log, then its job's output), the controller's or the load
// balancer's.
type ServeLogsBody struct {
	Name         string `json:"service_name"`
	ReplicaID    int    `json:"replica_id,omitempty"`
	Controller   bool   `json:"controller,omitempty"`
	LoadBalancer bool   `json:"load_balancer,omitempty"`
	Follow       bool   `json:"follow"`
	Tail         int    `json:"tail,omitempty"` // 0: all
}

// ServeSyncDownBody is the body of /serve/sync-down-logs: the controller
// log, the load balancer log and the replicas' logs (narrowed by the
// flags) are left in the request's files directory as <service>/<file>;
// the result is a LogsDownload.
type ServeSyncDownBody struct {
	Name         string `json:"service_name"`
	ReplicaIDs   []int  `json:"replica_ids,omitempty"`
	Controller   bool   `json:"controller,omitempty"`
	LoadBalancer bool   `json:"load_balancer,omitempty"`
}
