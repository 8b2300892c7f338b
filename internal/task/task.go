// Package task is a SkyPilot task YAML in memory: loading (one task, a
// pipeline, a job group, a service or pool), JSON-Schema and structural
// validation with file:line:column errors, env/secret overrides and
// substitution, secret redaction, volume specs, and a canonical dump.
package task

import (
	"math"
	"time"

	"github.com/skygo/skygo/internal/resources"
)

// MaxNumNodes bounds num_nodes like the spec's other counts (32-bit ints):
// a larger value is a typo, never a cluster anyone can provision.
const MaxNumNodes = math.MaxInt32

// Execution is how the tasks of a DAG run.
type Execution string

const (
	// Serial runs tasks one after another (a pipeline; managed jobs only).
	Serial Execution = "serial"
	// Parallel runs all jobs together on the same infra (a job group).
	Parallel Execution = "parallel"
)

// DAG is what one YAML file describes: a single task, a pipeline of tasks,
// or a job group.
type DAG struct {
	Name      string
	Execution Execution
	Tasks     []*Task

	// Job-group settings (Execution == Parallel).
	// PrimaryTasks empty means every job is primary.
	PrimaryTasks     []string
	TerminationDelay TerminationDelay

	// Warnings are non-fatal remarks made while loading (unknown header
	// keys of a job group, ...). Callers print them.
	Warnings []string
}

// IsJobGroup reports whether the file was a job group (parallel header).
func (d *DAG) IsJobGroup() bool { return d.Execution == Parallel }

// IsPipeline reports whether the file holds more than one serial task.
func (d *DAG) IsPipeline() bool { return d.Execution != Parallel && len(d.Tasks) > 1 }

// TerminationDelay is how long auxiliary jobs of a job group keep running
// after all primary jobs finished.
type TerminationDelay struct {
	Default time.Duration
	PerJob  map[string]time.Duration
}

// For returns the delay for one job.
func (t TerminationDelay) For(job string) time.Duration {
	if d, ok := t.PerJob[job]; ok {
		return d
	}
	return t.Default
}

// Task is one task document.
type Task struct {
	Name     string
	Workdir  *Workdir // nil when absent
	NumNodes int      // 1..MaxNumNodes

	// Resources is the parsed resources: section; ResourcesConfig is the
	// same section as written (null keys dropped), kept for dumps.
	Resources       *resources.Resources
	ResourcesConfig map[string]any

	// Envs are exported to setup and run (after --env/--env-file).
	Envs map[string]string
	// Secrets are inline secrets (after --secret/--secret-file); they are
	// exported like envs but never printed.
	Secrets map[string]Secret
	// SecretRefs are references to managed secrets ("secrets:NAME", with an
	// optional personal./workspace./global. scope), from either form.
	SecretRefs []string
	// MissingSecrets are inline secrets left null in the YAML and not given
	// with --secret; ValidateForLaunch rejects the task while any remain.
	MissingSecrets []string
	ManagedSecrets []ManagedSecret

	FileMounts map[string]*FileMount   // destination -> source
	Volumes    map[string]*VolumeMount // mount path -> volume

	Setup string
	Run   string

	Service *Service
	Pool    *Pool

	// Config holds per-task config overrides (only override-able keys
	// and hooks; see internal/config).
	Config map[string]any

	EventCallback string
	// Inputs/Outputs are optional egress estimates: URI -> size in GB.
	Inputs  map[string]float64
	Outputs map[string]float64
	// APIServerAccess injects the API endpoint and a token into the job
	// environment (default true).
	APIServerAccess bool
	// WaitForSchedulingTimeout is job.wait_for_scheduling_timeout: a
	// managed job not started within it of its submission is cancelled
	// (0: wait as long as it takes).
	WaitForSchedulingTimeout time.Duration

	// Internal fields SkyPilot writes when it serializes tasks; kept as
	// written so a round trip does not lose them.
	FileMountsMapping map[string]any
	VolumeMountsRaw   []any
	Metadata          map[string]any

	src *docSource // where the task came from, for located errors
}

// Workdir is either a local directory (Path) or a git repository (URL, Ref).
type Workdir struct {
	Path string
	URL  string
	Ref  string
}

// IsGit reports whether the workdir is the git (url/ref) form.
func (w *Workdir) IsGit() bool { return w != nil && w.URL != "" }

// ManagedSecret is an entry of managed_secrets.
type ManagedSecret struct {
	Name      string
	MountPath string // empty: exported as an env var
}

// FileMount is one file_mounts entry: either a plain Source (local path or
// cloud URI, copied to the node) or a Storage (bucket) object.
type FileMount struct {
	Source  string
	Storage *Storage
}

// Storage is the mapping form of a file mount: a bucket.
type Storage struct {
	Name string
	// Source is a local directory, a cloud URI, or (SourceIsList) a list of
	// local paths.
	Source       []string
	SourceIsList bool
	Store        string // upper-case (S3, GCS, ...); empty = inferred
	Mode         string // upper-case MOUNT, COPY or MOUNT_CACHED
	Persistent   bool
	Type         string // MOUNT_CACHED preset, upper-case; may be empty
	Config       map[string]any
}

// VolumeMount is one task-level volumes entry.
type VolumeMount struct {
	// Name of an existing volume (string form or mapping with name).
	Name    string
	SubPath string
	// Size (ephemeral volume created with the cluster), e.g. "10Gi".
	Size   string
	Type   string
	Labels map[string]string
	Config map[string]any
}

// Ephemeral reports whether the volume is created with the cluster.
func (v *VolumeMount) Ephemeral() bool { return v.Name == "" && v.Size != "" }

// Service is the service: section (SkyServe).
type Service struct {
	ReadinessProbe       ReadinessProbe
	Replicas             *int
	Workers              *int
	ReplicaPolicy        *ReplicaPolicy
	Port                 int    // 0: taken from resources.ports at serve time
	LoadBalancingPolicy  string // lower-case; empty = least_load
	StreamTimeoutSeconds float64
	TLS                  *TLS
	// Raw is the section as written after env substitution, for dumps.
	Raw map[string]any
}

// ReadinessProbe says how replicas are probed.
type ReadinessProbe struct {
	Path                               string
	InitialDelaySeconds                float64
	TimeoutSeconds                     float64
	EndpointProbeIntervalSeconds       float64
	ConsecutiveFailureThresholdTimeout float64
	PostData                           any // mapping or JSON string; nil = GET
	Headers                            map[string]string
}

// ReplicaPolicy is service.replica_policy.
type ReplicaPolicy struct {
	MinReplicas                  int
	MaxReplicas                  int // = MinReplicas when not given
	TargetQPS                    *float64
	TargetQPSPerAccelerator      map[string]float64
	NumOverprovision             int
	UpscaleDelaySeconds          float64
	DownscaleDelaySeconds        float64
	BaseOndemandFallbackReplicas int
	DynamicOndemandFallback      bool
	SpotPlacer                   string
}

// TLS is service.tls.
type TLS struct {
	Keyfile  string
	Certfile string
}

// Pool is the pool: section (pre-provisioned workers for managed jobs).
type Pool struct {
	Workers               *int
	MinWorkers            *int
	MaxWorkers            *int
	QueueLengthThreshold  int // default 1 when autoscaling
	UpscaleDelaySeconds   float64
	DownscaleDelaySeconds float64
	Raw                   map[string]any
}

// Defaults from spec/service.md.
const (
	defaultInitialDelaySeconds     = 1200
	defaultProbeTimeoutSeconds     = 15
	defaultProbeIntervalSeconds    = 10
	defaultServiceFailureThreshold = 180
	defaultPoolFailureThreshold    = 10
	defaultUpscaleDelaySeconds     = 300
	defaultDownscaleDelaySeconds   = 1200
	defaultStreamTimeoutSeconds    = 120
)
