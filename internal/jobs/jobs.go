// Package jobs is SkyGo's managed-jobs controller: jobs that are launched
// on a cluster of their own, recovered when the cluster is lost or the
// task fails in a way the job's job_recovery allows, run task after task
// (pipelines) or side by side (job groups), and cleaned up when they end.
//
// It runs inside the API server (SkyPilot's consolidation mode) as two
// reconcilers on the server's controller runner, and its only state is
// the database:
//
//   - the scheduler (one key) grants launch slots: it moves jobs that want
//     to launch (WAITING, ALIVE_WAITING, ALIVE_BACKOFF past its backoff) to
//     LAUNCHING in claim order — higher priority first, then older — while
//     fewer than the launch limit are LAUNCHING and fewer than the running
//     limit hold a cluster;
//   - the job controller (one key per job) takes one step of one job per
//     reconcile: launch the task it may launch, observe a running task
//     (its job on the cluster, then the cluster itself), recover, move to
//     the next task, cancel, finish.
//
// Every move is one conditional update of the job's row (state.
// UpdateManagedJob). Side effects are idempotent and named
// deterministically: a task's cluster is <task name>-<job id>, and the job
// submitted on it is tagged <job id>/<task id>/<attempt>, so a reconcile
// killed at any instruction and run again (by this server after a restart,
// or another) finds the cluster and the job it made instead of making them
// twice, and tears down what it no longer needs.
package jobs

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

// Env is what the controller needs from the server.
type Env struct {
	Home    string
	Store   *state.Store
	Backend *backend.Backend
	// Plan returns the optimizer call for a launch body, printing plans
	// to log (the core owns the enabled infras and the catalog).
	Plan func(ctx context.Context, body api.LaunchBody, log io.Writer) (backend.Planner, error)
	// Limits size the scheduler; zero values are sized from memory.
	Limits Limits
	// Redact wraps a writer so the given secret values never pass it
	// (a job may print its secrets; its log must not show them).
	Redact func(w io.Writer, secrets map[string]string) io.Writer
	// Timings are the intervals the controller waits; zero values are
	// SkyPilot's.
	Timings Timings
	// Clock is the controller's time (nil: the machine's). Decisions that
	// depend on time and the times the rows record read it, so a test can
	// set the instant it decides at. Waits inside one step (a cancelled
	// job to end) are paced by real timers and keep the machine's clock.
	Clock func() time.Time

	mu        sync.Mutex
	jobs      *controller.Controller
	scheduler *controller.Controller
	// inflight cancels the reconcile launching a job, so that a cancel
	// does not wait for a provisioning to finish.
	inflight map[int]context.CancelFunc
	// lastDeadlineScan paces expireWaiting.
	lastDeadlineScan time.Time
	// schedMemo is what the scheduler's last pass saw.
	schedMemo schedMemo
	pool      poolCtl
}

// Limits bound what the controller does at once.
type Limits struct {
	// Launches is how many jobs may be LAUNCHING at once.
	Launches int
	// Running is how many jobs may hold a cluster (launching or alive).
	Running int
}

// SizeLimits sizes the limits from the machine's memory, as SkyPilot
// does from its controller's footprint but with SkyGo's: a running job
// costs the server one database row and, while a reconcile looks at
// it, a goroutine, so the running limit is set by what the clusters
// themselves cost this machine (a local node's agent, ~perNodeMB), and
// the launch limit by the launches the CPUs can drive.
func SizeLimits(memMB int, cpus int) Limits {
	// Measured: a local node's agent daemon has 5.7 MiB of its own
	// (RssAnon; its 18 MiB of binary text is shared by all of them), its
	// job's shell 1-2 MiB.
	const reserveMB, perNodeMB = 2048, 10
	running := (memMB - reserveMB) / perNodeMB
	running = max(16, min(running, 4000))
	return Limits{Launches: max(8, min(16*cpus, 64)), Running: running}
}

// Timings are the controller's intervals. The server sets RetryGap
// from its test knobs (servermain); a test sets any of them on its Env.
// A zero field is the default named beside it (SkyPilot's where
// SkyPilot has one).
type Timings struct {
	// RetryGap is the first gap between launch attempts of a job or a
	// pool worker (0: SkyPilot's 60 s); later gaps grow from it.
	RetryGap time.Duration
	// MonitorEvery is how often a RUNNING task's job is looked at: a
	// preemption is seen within it plus FailedGrace (0: 2 s).
	MonitorEvery time.Duration
	// FailedGrace is how long a job the cluster reports failed waits
	// before the cluster is looked at: a node being taken away kills its
	// processes before the node itself is gone (0: 1.5 s).
	FailedGrace time.Duration
	// TransientLimit is how long a cluster that is UP may fail to answer
	// before the task is recovered elsewhere (0: 60 s).
	TransientLimit time.Duration
	// ResyncEvery is how often every live job, pool and worker is looked
	// at again, whatever events were missed (0: 5 s).
	ResyncEvery time.Duration
	// ReleaseTimeout bounds one attempt to end a job's jobs on a worker
	// or to cancel a task's job on its head: an agent that is stopped
	// accepts the call and never answers (0: 10 s).
	ReleaseTimeout time.Duration
	// PoolDecideEvery is the pool autoscaler's decision interval, and
	// PoolDecideFromZero the one while the target is 0 (service.md; 0:
	// 20 s and 5 s).
	PoolDecideEvery, PoolDecideFromZero time.Duration
	// PoolDownJobsWait bounds how long `pool down` waits for the pool's
	// cancelled jobs to end before the workers go (managed-jobs.md; 0:
	// 300 s).
	PoolDownJobsWait time.Duration
	// WorkerWatchEvery is how often a READY worker's cluster is looked
	// at (0: 10 s).
	WorkerWatchEvery time.Duration
	// PoolWaitEvery is how often a pool job with no free worker tries
	// again (managed-jobs.md: every 1 s).
	PoolWaitEvery time.Duration
}

// withDefaults fills the zero fields with their defaults (RetryGap is
// controller.LaunchBackoff's to fill).
func (t Timings) withDefaults() Timings {
	t.MonitorEvery = cmp.Or(t.MonitorEvery, 2*time.Second)
	t.FailedGrace = cmp.Or(t.FailedGrace, 1500*time.Millisecond)
	t.TransientLimit = cmp.Or(t.TransientLimit, 60*time.Second)
	t.ResyncEvery = cmp.Or(t.ResyncEvery, 5*time.Second)
	t.ReleaseTimeout = cmp.Or(t.ReleaseTimeout, 10*time.Second)
	t.PoolDecideEvery = cmp.Or(t.PoolDecideEvery, 20*time.Second)
	t.PoolDecideFromZero = cmp.Or(t.PoolDecideFromZero, 5*time.Second)
	t.PoolDownJobsWait = cmp.Or(t.PoolDownJobsWait, 300*time.Second)
	t.WorkerWatchEvery = cmp.Or(t.WorkerWatchEvery, 10*time.Second)
	t.PoolWaitEvery = cmp.Or(t.PoolWaitEvery, time.Second)
	return t
}

// timings are the Env's intervals, defaults filled in.
func (e *Env) timings() Timings { return e.Timings.withDefaults() }

// retryGap is the wait before launch attempt tries+1 of a job or a
// pool worker.
func (e *Env) retryGap(tries int) time.Duration {
	return controller.LaunchBackoff(tries, e.Timings.RetryGap)
}

// now is the controller's time in unix seconds, as the job rows keep it.
func (e *Env) now() float64 { return unixSeconds(e.clock()) }

func (e *Env) clock() time.Time {
	if e.Clock != nil {
		return e.Clock()
	}
	return time.Now()
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func numCPU() int { return runtime.NumCPU() }

// machineMemoryMB is MemTotal of /proc/meminfo (4 GiB when unreadable).
func machineMemoryMB() int {
	raw, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.Atoi(f[1]); err == nil {
					return kb / 1024
				}
			}
		}
	}
	return 4096
}

// clusterName is a task's cluster: SkyPilot's make_cluster_name_on_cloud
// of the task name (at most 25 characters, lowercase, '.' and '_' as
// '-'; a longer name is cut to 22 and given 2 base-36 characters of its
// md5) followed by -<job id>.
func clusterName(task string, jobID int) string {
	n := strings.ToLower(task)
	n = strings.NewReplacer(".", "-", "_", "-").Replace(n)
	n = invalidName.ReplaceAllString(n, "-")
	if n == "" {
		n = "sky"
	}
	if n[0] < 'a' || n[0] > 'z' {
		n = "sky-" + n
	}
	if len(n) > 25 {
		sum := md5.Sum([]byte(task))
		h := new(big.Int).SetBytes(sum[:]).Text(36)
		n = strings.TrimRight(n[:22], "-") + "-" + h[:2]
	}
	return fmt.Sprintf("%s-%d", n, jobID)
}

var invalidName = regexp.MustCompile(`[^a-z0-9-]`)

// runTimestamp is SkyPilot's run timestamp of t without its "sky-"
// prefix: 2006-01-02-15-04-05-000000.
func runTimestamp(t time.Time) string {
	return strings.Replace(t.Format("2006-01-02-15-04-05.000000"), ".", "-", 1)
}

// taskTag is what the job on a task's cluster is tagged with.
func taskTag(jobID, taskID, attempt int) string {
	return fmt.Sprintf("%d/%d/%d", jobID, taskID, attempt)
}

// ControllerLogPath is `sky jobs logs --controller`'s file for a job.
func ControllerLogPath(home string, jobID int) string {
	return filepath.Join(home, "sky_logs", "jobs_controller", strconv.Itoa(jobID)+".log")
}

// TaskLogPath is where a task's log is kept once its cluster is gone.
func TaskLogPath(home string, jobID, taskID int) string {
	return filepath.Join(home, "sky_logs", "managed_jobs", "job-id-"+strconv.Itoa(jobID), fmt.Sprintf("task-%d.log", taskID))
}

// filesDir holds a job's own copy of its uploaded workdir and file
// mounts, kept for as long as the job may relaunch.
func filesDir(home string, jobID int) string {
	return filepath.Join(paths.ServerDir(home), "managed_jobs", strconv.Itoa(jobID))
}

// clog appends lines to a job's controller log.
func (e *Env) clog(jobID int) io.WriteCloser {
	return ux.AppendLog(ControllerLogPath(e.Home, jobID))
}

// note writes one timestamped line to a job's controller log.
func (e *Env) note(jobID int, format string, args ...any) {
	ux.Note(ControllerLogPath(e.Home, jobID), format, args...)
}

// Controllers builds the scheduler and the job controller, counting into
// m and logging on log.
func (e *Env) Controllers(m *controller.Metrics, log *slog.Logger) []*controller.Controller {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if e.Limits.Launches == 0 || e.Limits.Running == 0 {
		l := SizeLimits(machineMemoryMB(), numCPU())
		e.Limits.Launches = max(e.Limits.Launches, l.Launches)
		if e.Limits.Running == 0 {
			e.Limits.Running = l.Running
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight = map[int]context.CancelFunc{}
	e.jobs = controller.New(controller.ReconcilerFunc(e.reconcileJob), controller.Options{
		Name: "managed-jobs", Workers: e.Limits.Launches + 32, Logger: log, Metrics: m,
		// A launch on a slow infrastructure takes minutes; a stuck one is
		// cut off and retried.
		Timeout:     30 * time.Minute,
		BaseBackoff: time.Second, MaxBackoff: 30 * time.Second,
		Resync: e.liveJobKeys, ResyncEvery: e.timings().ResyncEvery,
	})
	e.scheduler = controller.New(controller.ReconcilerFunc(e.reconcileScheduler), controller.Options{
		Name: "managed-jobs-scheduler", Workers: 1, Logger: log, Metrics: m, Timeout: time.Minute,
		Resync: func(context.Context) ([]string, error) { return []string{schedulerKey}, nil }, ResyncEvery: time.Second,
	})
	return append([]*controller.Controller{e.jobs, e.scheduler, e.gcController(m, log)}, e.poolControllers(m, log)...)
}

type controllerLogger = *slog.Logger

const schedulerKey = "schedule"

// kick asks the scheduler to look now.
func (e *Env) kick() {
	e.mu.Lock()
	s := e.scheduler
	e.mu.Unlock()
	if s != nil {
		s.Enqueue(schedulerKey)
	}
}

// poke asks the job controller to look at a job now.
func (e *Env) poke(id int) {
	e.mu.Lock()
	c := e.jobs
	e.mu.Unlock()
	if c != nil {
		c.Enqueue(strconv.Itoa(id))
	}
}

// launching gives a job's launch its own context, which interrupt
// cancels; the returned func ends it.
func (e *Env) launching(ctx context.Context, id int) (context.Context, func()) {
	lctx, cancel := context.WithCancel(ctx)
	e.mu.Lock()
	e.inflight[id] = cancel
	e.mu.Unlock()
	return lctx, func() {
		e.mu.Lock()
		delete(e.inflight, id)
		e.mu.Unlock()
		cancel()
	}
}

// interrupt cancels the launch in flight for a job, if any.
func (e *Env) interrupt(id int) {
	e.mu.Lock()
	cancel := e.inflight[id]
	e.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// liveJobKeys lists the jobs the job controller looks after: every job
// past WAITING and not DONE. WAITING jobs are the scheduler's; they are
// many (a queue of thousands) and need no look until claimed.
func (e *Env) liveJobKeys(ctx context.Context) ([]string, error) {
	ids, err := e.Store.ManagedJobIDs(ctx, state.ManagedFilter{ScheduleStates: []string{
		api.ScheduleLaunching, api.ScheduleAlive, api.ScheduleAliveWaiting, api.ScheduleAliveBackoff}})
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = strconv.Itoa(id)
	}
	return keys, nil
}

// Secrets are the secret values of a job's tasks.
func (e *Env) Secrets(ctx context.Context, id int) (map[string]string, error) {
	j, err := e.Store.GetManagedJob(ctx, id, true)
	if err != nil {
		return nil, err
	}
	var spec api.JobsLaunchBody
	if err := json.Unmarshal(j.Spec, &spec); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range spec.Tasks {
		for k, v := range t.Secrets {
			out[k] = v
		}
	}
	return out, nil
}

// redacted wraps w for job id's secrets.
func (e *Env) redacted(ctx context.Context, id int, w io.Writer) (io.Writer, error) {
	sec, err := e.Secrets(ctx, id)
	if err != nil || len(sec) == 0 || e.Redact == nil {
		return w, err
	}
	return e.Redact(w, sec), nil
}
