package jobs

import (
	"strings"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/config"
)

// The bounds of one submission. A submission costs the server memory,
// records and a copy of the uploaded files per job, so one request of any
// user must not be able to ask for an unbounded number of them. SkyPilot
// has no such keys; these are SkyGo's, read from the API server's config
// only (config.ServerOnlyKeys()), since they protect the server from its
// users.
const (
	KeyMaxArraySize         = "jobs.max_array_size"
	KeyMaxPipelineTasks     = "jobs.max_pipeline_tasks"
	DefaultMaxArraySize     = 10000
	DefaultMaxPipelineTasks = 100
)

// SubmitLimits bound what one `sky jobs launch` may submit.
type SubmitLimits struct {
	// MaxArraySize is the most jobs of one --num-jobs array.
	MaxArraySize int
	// MaxPipelineTasks is the most tasks of one job (a pipeline or group).
	MaxPipelineTasks int
}

// SubmitLimitsFrom reads the limits from the server's config; a missing
// or non-positive value means the default.
func SubmitLimitsFrom(cfg *config.Config) SubmitLimits {
	l := SubmitLimits{MaxArraySize: DefaultMaxArraySize, MaxPipelineTasks: DefaultMaxPipelineTasks}
	if cfg == nil {
		return l
	}
	if n := cfg.GetInt(KeyMaxArraySize, 0); n > 0 {
		l.MaxArraySize = n
	}
	if n := cfg.GetInt(KeyMaxPipelineTasks, 0); n > 0 {
		l.MaxPipelineTasks = n
	}
	return l
}

// CheckSize refuses a submission larger than the limits, naming the limit
// and the config key that raises it. It looks only at counts, so it runs
// before anything proportional to them is made.
func CheckSize(b api.JobsLaunchBody, l SubmitLimits) error {
	if b.NumJobs > l.MaxArraySize {
		return valueErr("--num-jobs %d is more than this API server's limit of %d jobs per array; submit fewer (several arrays if need be), "+
			"or have the server's admin raise %s in the API server's config (~/.sky/config.yaml where `sky api start` runs)",
			b.NumJobs, l.MaxArraySize, KeyMaxArraySize)
	}
	if len(b.Tasks) > l.MaxPipelineTasks {
		return valueErr("the managed job has %d tasks, more than this API server's limit of %d tasks per pipeline or job group; split it into several jobs, "+
			"or have the server's admin raise %s in the API server's config (~/.sky/config.yaml where `sky api start` runs)",
			len(b.Tasks), l.MaxPipelineTasks, KeyMaxPipelineTasks)
	}
	return nil
}

// CheckDAGDocs refuses a DAG YAML with more documents than a job of the
// most tasks needs (the tasks, a header and a leading "---"), by counting
// its document markers before the YAML is parsed: a 32 MiB body of
// "---" lines would otherwise be parsed into millions of tasks first.
func CheckDAGDocs(dagYAML string, l SubmitLimits) error {
	markers := 0
	for line := range strings.Lines(dagYAML) {
		if rest, ok := strings.CutPrefix(line, "---"); ok && (strings.TrimSpace(rest) == "" || rest[0] == ' ' || rest[0] == '\t') {
			markers++
		}
	}
	if markers > l.MaxPipelineTasks+1 {
		return valueErr("the job's YAML has %d documents, more than this API server's limit of %d tasks per pipeline or job group allows; split it into several jobs, "+
			"or have the server's admin raise %s in the API server's config (~/.sky/config.yaml where `sky api start` runs)",
			markers+1, l.MaxPipelineTasks, KeyMaxPipelineTasks)
	}
	return nil
}

// SubmitLimits are the limits of the server's config as it is now (a
// change applies to the next submission without a restart).
func (e *Env) SubmitLimits() SubmitLimits {
	cfg, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return SubmitLimitsFrom(nil)
	}
	return SubmitLimitsFrom(cfg)
}
